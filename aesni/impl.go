package aesni

import (
	"fmt"

	"github.com/xtsctl/xtsctl/internal/impl"
)

// Impl names one implementation of the XTS kernels.
type Impl int8

const (
	Generic  Impl = iota // pure Go reference (xts_generic.go), the test oracle
	Portable             // XTS over crypto/aes blocks (portable.go)
	AESNI1               // AES-NI, one block at a time
	AESNI4               // AES-NI, 4-way stride
	AESNI8               // AES-NI, 8-way stride
	VAES256              // VAES on ymm (2 blocks a register)
	VAES512              // VAES on zmm (4 blocks a register), tweaks advanced by shifts and XORs
	VAES512C             // VAES on zmm, tweaks advanced by carry-less multiplication
	numImpls

	implAuto Impl = -1 // no forced choice: dispatch by CPU and length
)

var implNames = [numImpls]string{"generic", "portable", "aesni1", "aesni4", "aesni8", "vaes256", "vaes512", "vaes512c"}

func (i Impl) String() string {
	if i >= 0 && i < numImpls {
		return implNames[i]
	}
	return fmt.Sprintf("Impl(%d)", int(i))
}

// ImplPackage is the name under which aesni registers its kernels in
// internal/impl, for tests and `xtsctl bench --variant` to force one.
const ImplPackage = "aesni"

// available is filled in by the platform's dispatch init; Generic and
// Portable always run.
var available = [numImpls]bool{Generic: true, Portable: true}

// forced, when not implAuto, overrides the automatic choice for every call;
// only internal/impl's Select (tests, benchmarks) sets it.
var forced = implAuto

// registerImpls records the kernels and their availability in
// internal/impl; the platform's init calls it once available is final.
func registerImpls() {
	impl.Register(ImplPackage, implNames[:], available[:], func(i int) {
		if i < 0 {
			forced = implAuto
		} else {
			forced = Impl(i)
		}
	})
}

// Pick reports the implementation a call on an n-byte data unit uses now.
func Pick(n int) Impl {
	if forced != implAuto {
		return forced
	}
	return autoPick(n)
}

// DispatchRange is one row of the automatic choice: data units of at least
// MinLen bytes (and shorter than the next row's MinLen) use Impl.
type DispatchRange struct {
	MinLen int
	Impl   Impl
}

// DispatchTable reports the automatic choice on this machine, shortest
// lengths first, for tools such as `xtsctl bench`. It ignores a choice
// forced through internal/impl.
func DispatchTable() []DispatchRange { return dispatchTable() }

// DispatchSource says where the automatic choice on this CPU came from:
// the per-CPU table in internal/cpuid (naming the row), a timing of the
// row's candidates at start-up, or the CPU's features alone.
func DispatchSource() string { return dispatchSource() }

// parseImplName returns the Impl called name.
func parseImplName(name string) (Impl, bool) {
	for i, n := range implNames {
		if n == name {
			return Impl(i), true
		}
	}
	return implAuto, false
}

// PrefersYMM reports whether this CPU is one where the 256-bit VAES kernel
// is chosen over the 512-bit one although both could run (Intel cores that
// lower their clock under 512-bit instructions).
func PrefersYMM() bool { return preferYMM }
