package blake2b

import (
	"flag"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"

	xblake2b "golang.org/x/crypto/blake2b"
)

var measure = flag.Bool("measure", false, "run TestMeasureCompress (interleaved kernel timings for BENCHMARKS.md)")

// TestMeasureCompress times Sum512 with every compression function this
// CPU runs, and x/crypto's, in short interleaved rounds (thread CPU time,
// the order rotated each round), and prints the medians in MB/s with each
// kernel's ratio to x/crypto and the dispatched kernel's ratio to the
// fastest: the figures the per-CPU choice in internal/cpuid rests on. Only
// with -measure:
//
//	go test -run TestMeasureCompress -v ./blake2b -args -measure
func TestMeasureCompress(t *testing.T) {
	if !*measure {
		t.Skip("needs -measure")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var names []string
	for i := range numImpls {
		if compressAvailable[i] {
			names = append(names, implID(i).String())
		}
	}
	names = append(names, "xcrypto")
	const rounds = 101
	sizes := []int{64, 512, 4096, 64 << 10}
	var out strings.Builder
	fmt.Fprintf(&out, "\nSum512, MB/s of thread CPU time, medians of %d interleaved rounds; dispatch: %v\n\n", rounds, compressWith)
	fmt.Fprintf(&out, "| bytes | %s | dispatched / fastest | dispatched / x/crypto |\n|---:|%s---:|---:|\n", strings.Join(names, " | "), strings.Repeat("---:|", len(names)))
	for _, size := range sizes {
		data := make([]byte, size)
		run := func(name string, calls int) float64 {
			f := func() { xblake2b.Sum512(data) }
			if name != "xcrypto" {
				for i := range numImpls {
					if implID(i).String() == name {
						defer useImpls(implID(i), lanesWith)()
					}
				}
				f = func() { Sum512(data) }
			}
			start := threadCPU()
			for range calls {
				f()
			}
			return float64(size*calls) / (threadCPU() - start).Seconds() / 1e6
		}
		calls := max(1, 200_000/size) // about 200 µs a run
		samples := map[string][]float64{}
		for r := range rounds {
			for k := range names {
				n := names[(r+k)%len(names)]
				samples[n] = append(samples[n], run(n, calls))
			}
		}
		med := map[string]float64{}
		best := 0.0
		fmt.Fprintf(&out, "| %d |", size)
		for _, n := range names {
			slices.Sort(samples[n])
			med[n] = samples[n][len(samples[n])/2]
			if n != "xcrypto" {
				best = max(best, med[n])
			}
			fmt.Fprintf(&out, " %.0f |", med[n])
		}
		d := med[compressWith.String()]
		fmt.Fprintf(&out, " %.3f | %.2fx |\n", d/best, d/med["xcrypto"])
	}
	t.Log(out.String())
}
