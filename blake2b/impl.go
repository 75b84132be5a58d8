package blake2b

// implID names one implementation of a kernel. There are two kernels, each
// with its own choice: the compression function (Sum*, New, and lone
// messages of a batch) and the multi-lane kernels (SumSectors, SumMany). The
// platform's init picks the fastest available of each; tests and benchmarks
// force each in turn (useImpls, in impl_test.go).
type implID uint8

const (
	implGeneric   implID = iota // pure Go (blake2b_generic.go)
	implScalar                  // compress: amd64 general-purpose registers
	implAVX2                    // compress: rows in ymm; lanes: 4 in ymm
	implAVX512                  // compress: rows in ymm, VPRORQ; lanes: 8 in zmm, tails of 2..4 in ymm
	implAVX512x16               // lanes only: 16 as two interleaved groups of 8 in zmm, tails as avx512
	numImpls
)

var implNames = [numImpls]string{"generic", "scalar", "avx2", "avx512", "avx512x16"}

func (i implID) String() string { return implNames[i] }

// The platform's init fills these in; generic always runs.
var (
	compressAvailable = [numImpls]bool{implGeneric: true}
	lanesAvailable    = [numImpls]bool{implGeneric: true}
	compressWith      = implGeneric // used by compress
	lanesWith         = implGeneric // used by hashLanes and laneWidth

	compressSource = "no assembly in this build" // where compressWith came from
)

// CompressDispatch names the compression function single messages use on
// this CPU and says where the choice came from (the per-CPU table in
// internal/cpuid, or a timing at start-up): for `xtsctl bench`.
func CompressDispatch() string { return compressWith.String() + " (" + compressSource + ")" }
