package aesni

import "github.com/xtsctl/xtsctl/internal/impl"

// Test helpers over the internal/impl registration.

// impls lists every implementation, available on this machine or not.
func impls() []Impl {
	all := make([]Impl, numImpls)
	for i := range all {
		all[i] = Impl(i)
	}
	return all
}

func isAvailable(i Impl) bool { return i >= 0 && i < numImpls && available[i] }

func selectImpl(i Impl) error { return impl.Select(ImplPackage, i.String()) }

func resetImpl() { impl.Reset(ImplPackage) }

func parseImpl(name string) (Impl, bool) { return parseImplName(name) }
