package blake2b

// implID names one implementation of the compression function and of the
// multi-lane kernels. Exactly one is active; the platform's init picks the
// fastest available, and tests force each in turn (useImpl).
type implID uint8

const (
	implGeneric implID = iota // pure Go (blake2b_generic.go)
	implAVX2                  // compress: AVX2; lanes: 4 in ymm
	implAVX512                // compress: AVX-512VL (VPRORQ); lanes: 8 in zmm, 4 in ymm for tails
	numImpls
)

var implNames = [numImpls]string{"generic", "avx2", "avx512"}

func (i implID) String() string { return implNames[i] }

// available is filled in by the platform's init; generic always runs.
var available = [numImpls]bool{implGeneric: true}

// active is the implementation every call uses.
var active = implGeneric

// useImpl makes i the active implementation and returns a function that
// restores the previous one. For tests and benchmarks only; not safe while
// other goroutines hash.
func useImpl(i implID) (restore func()) {
	if !available[i] {
		panic("blake2b: implementation " + i.String() + " is not available")
	}
	prev := active
	active = i
	return func() { active = prev }
}
