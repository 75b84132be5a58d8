//go:build amd64 && gc && !purego

package study

import (
	"flag"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
)

var measure = flag.Bool("measure", false, "run TestMeasureCompressKernels")

// TestMeasureCompressKernels times every compression function on 4 KiB in
// short interleaved rounds (thread CPU time, the order rotated each round)
// and prints the medians in MB/s and each one's ratio to compressAVX2:
// sequential benchmarks on a shared machine see different neighbours.
// Only with -measure:
//
//	go test -run TestMeasureCompressKernels -v . -args -measure
func TestMeasureCompressKernels(t *testing.T) {
	if !*measure {
		t.Skip("needs -measure")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var ks []struct {
		name string
		ok   bool
		f    compressFunc
	}
	for _, k := range compressKernels() {
		if k.ok {
			ks = append(ks, k)
		}
	}
	data := make([]byte, 4096)
	const rounds, calls = 201, 50
	samples := make([][]float64, len(ks))
	for r := range rounds {
		for i := range ks {
			k := (r + i) % len(ks)
			var h [8]uint64
			var c [2]uint64
			start := threadCPU()
			for range calls {
				ks[k].f(&h, &c, 0, data)
			}
			samples[k] = append(samples[k], float64(len(data)*calls)/(threadCPU()-start).Seconds()/1e6)
		}
	}
	med := make([]float64, len(ks))
	ref := 0.0
	for i := range ks {
		slices.Sort(samples[i])
		med[i] = samples[i][len(samples[i])/2]
		if ks[i].name == "compressAVX2" {
			ref = med[i]
		}
	}
	var out strings.Builder
	fmt.Fprintf(&out, "\n4 KiB, MB/s of thread CPU time, medians of %d interleaved rounds:\n", rounds)
	for i, k := range ks {
		fmt.Fprintf(&out, "%-22s %6.0f  %.3f of compressAVX2\n", k.name, med[i], med[i]/ref)
	}
	t.Log(out.String())
}
