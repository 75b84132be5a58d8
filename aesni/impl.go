package aesni

import (
	"fmt"
	"os"
)

// Impl names one implementation of the XTS kernels.
type Impl int8

const (
	Generic Impl = iota // pure Go reference (xts_generic.go)
	AESNI1              // AES-NI, one block at a time
	AESNI4              // AES-NI, 4-way stride
	AESNI8              // AES-NI, 8-way stride
	VAES256             // VAES on ymm (2 blocks a register)
	VAES512             // VAES on zmm (4 blocks a register)
	numImpls

	implAuto Impl = -1 // no forced choice: dispatch by CPU and length
)

var implNames = [numImpls]string{"generic", "aesni1", "aesni4", "aesni8", "vaes256", "vaes512"}

func (i Impl) String() string {
	if i >= 0 && i < numImpls {
		return implNames[i]
	}
	return fmt.Sprintf("Impl(%d)", int(i))
}

// ParseImpl returns the Impl called name (as printed by String).
func ParseImpl(name string) (Impl, error) {
	for i, n := range implNames {
		if n == name {
			return Impl(i), nil
		}
	}
	return implAuto, fmt.Errorf("aesni: unknown implementation %q (known: %v)", name, implNames)
}

// Impls lists every implementation, available on this machine or not.
func Impls() []Impl {
	all := make([]Impl, numImpls)
	for i := range all {
		all[i] = Impl(i)
	}
	return all
}

// available is filled in by the platform's dispatch init; Generic always runs.
var available = [numImpls]bool{Generic: true}

// Available reports whether i can run on this machine.
func Available(i Impl) bool { return i >= 0 && i < numImpls && available[i] }

// forced, when not implAuto, overrides the automatic choice for every call.
var forced = implAuto

// Select forces every later call to use i, for tests and benchmarks.
// It is not safe to call while other goroutines use the package.
func Select(i Impl) error {
	if !Available(i) {
		return fmt.Errorf("aesni: implementation %v is not available on this CPU", i)
	}
	forced = i
	return nil
}

// Reset undoes Select: calls go back to the automatic choice.
func Reset() { forced = implAuto }

// Pick reports the implementation a call on an n-byte data unit uses now.
func Pick(n int) Impl {
	if forced != implAuto {
		return forced
	}
	return autoPick(n)
}

// EnvVar names the environment variable that forces an implementation for
// the whole process (for example XTSCTL_XTS_IMPL=aesni4), so every kernel can
// be exercised and benchmarked from outside Go tests too.
const EnvVar = "XTSCTL_XTS_IMPL"

// EnvError reports why the value of EnvVar was ignored, or nil.
var EnvError error

func selectFromEnv() {
	name, ok := os.LookupEnv(EnvVar)
	if !ok || name == "" || name == "auto" {
		return
	}
	i, err := ParseImpl(name)
	if err == nil {
		err = Select(i)
	}
	if err != nil {
		EnvError = fmt.Errorf("%s ignored: %w", EnvVar, err)
	}
}

// DispatchRange is one row of the automatic choice: data units of at least
// MinLen bytes (and shorter than the next row's MinLen) use Impl.
type DispatchRange struct {
	MinLen int
	Impl   Impl
}

// DispatchTable reports the automatic choice on this machine, shortest
// lengths first, for tools such as `xtsctl bench`. It ignores Select and
// XTSCTL_XTS_IMPL.
func DispatchTable() []DispatchRange { return dispatchTable() }

// PrefersYMM reports whether this CPU is one where the 256-bit VAES kernel
// is chosen over the 512-bit one although both could run (Intel cores that
// lower their clock under 512-bit instructions).
func PrefersYMM() bool { return preferYMM }
