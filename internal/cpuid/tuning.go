package cpuid

import (
	"slices"
	"time"
)

// A Tuning is the kernels xtsctl runs on one kind of CPU, and the
// measurements they were chosen from. Where a row lists one kernel, that
// is the choice; where it lists several, or no row covers the CPU, the
// package times its candidates once per process, at start-up (Fastest),
// and takes the fastest: that is what Linux does to pick its RAID-6 and
// XOR routines.
type Tuning struct {
	CPU    string   // the CPUs the row covers, for people
	Vendor string   // CPUID vendor string: "GenuineIntel", "AuthenticAMD"
	Family uint32   // x86 family (extended family added)
	Models []uint32 // x86 models (extended model folded in); none: every model of the family

	// XTS: package aesni's kernel for data units on this CPU (names as
	// `xtsctl bench --variant`), or the candidates to time. A kernel the
	// CPU cannot run (GODEBUG masks, a family member without AVX-512) is
	// left out; if none is left, aesni's own order by features decides.
	XTS []string
	// Compress: package blake2b's compression function for single
	// messages, or the candidates to time, as for XTS; if none is left,
	// every one the CPU runs is timed.
	Compress []string
	// Measured: where the figures behind the row are.
	Measured string
}

const (
	intel = "GenuineIntel"
	amd   = "AuthenticAMD"
)

// Table is every CPU xtsctl has been measured on. BENCHMARKS.md ("Dispatch
// per CPU") has the figures; `xtsctl bench --variant all` prints the
// choice and where it came from.
var Table = []Tuning{
	{
		CPU:    "AMD Zen 5 (EPYC 9005 Turin; family 26)",
		Vendor: amd, Family: 26,
		XTS:      []string{"vaes512"},
		Compress: []string{"scalar"},
		Measured: "BENCHMARKS.md, \"AES-XTS kernels\" (vaes512 the fastest at every length from 32 bytes) and \"BLAKE2b\" (vector integer ops take 2 cycles: scalar 1135 MB/s, AVX-512 697, AVX2 626 at 4 KiB), on the project VM's EPYC Turin, family 26 model 2",
	},
	{
		CPU:    "AMD Zen 4 and Zen 3 (EPYC Genoa, Milan; family 25)",
		Vendor: amd, Family: 25,
		XTS:      []string{"vaes512"},
		Compress: []string{"scalar"},
		Measured: "BENCHMARKS.md, \"AES-XTS engine on Zen 4\" (vaes512 the fastest at every length from 32 bytes, on EPYC Genoa, family 25 model 17); the compression function kept from Zen 5, where BLAKE2b met its targets on Zen 4 too (issue 16); Zen 3 has no AVX-512 and takes vaes256",
	},
	{
		CPU:    "Intel Xeon, family 6 model 207 (Emerald Rapids)",
		Vendor: intel, Family: 6, Models: []uint32{207},
		XTS:      []string{"vaes512c"},
		Compress: []string{"avx512"},
		Measured: "BENCHMARKS.md, \"Dispatch per CPU\": 512-bit AES and vector shifts by bits issue to one port, so vaes512c (no such shift in its main loop) runs 1.045x vaes512 at 4096 B and 1.053x at 16 KiB; the ymm AVX-512 compression function 1.10x AVX2, 1.5x scalar",
	},
	{
		CPU:    "Intel Xeon reporting family 6 model 167 in a VM (AMX, AVX512-FP16: a Sapphire Rapids class core)",
		Vendor: intel, Family: 6, Models: []uint32{167},
		XTS:      []string{"vaes512c"},
		Compress: []string{"avx512"},
		Measured: "BENCHMARKS.md, \"Intel Xeon, family 6 model 167\" (2026-12-02, on that CPU): vaes512c 1.03-1.07x vaes512 from 256 bytes and the same code below, 0.94 of the zmm roofline at 4096 B; the ymm AVX-512 compression function 1.10x AVX2, 1.29x x/crypto at 4 KiB. Before that, ../shared/measurements/intel-xeon-f6m167 (vaes512 the fastest of the kernels then, AVX2 compression ahead of the first AVX-512 form)",
	},
}

// Lookup returns the row of Table that covers a CPU.
func Lookup(vendor string, family, model uint32) (Tuning, bool) {
	for _, t := range Table {
		if t.Vendor == vendor && t.Family == family && (len(t.Models) == 0 || slices.Contains(t.Models, model)) {
			return t, true
		}
	}
	return Tuning{}, false
}

// Fastest returns which of n candidates runs fastest: run(i) does a fixed
// amount of candidate i's work, about ten microseconds of it. Candidates
// take turns, nine times each after a warm-up, and each one's quickest
// turn counts (a turn the system interrupted is only slower). Candidate 0
// is preferred: another wins only if it is at least 1% faster.
func Fastest(n int, run func(i int)) int {
	return fastest(n, func(i int) time.Duration {
		start := time.Now()
		run(i)
		return time.Since(start)
	})
}

// fastest is Fastest over a function that times one turn.
func fastest(n int, turn func(i int) time.Duration) int {
	if n <= 1 {
		return 0
	}
	best := make([]time.Duration, n)
	for round := -1; round < 9; round++ {
		for k := range n {
			i := (k + max(round, 0)) % n
			d := turn(i)
			if round >= 0 && (best[i] == 0 || d < best[i]) {
				best[i] = d
			}
		}
	}
	pick := 0
	for i := 1; i < n; i++ {
		if float64(best[i]) < 0.99*float64(best[pick]) {
			pick = i
		}
	}
	return pick
}
