//go:build amd64 && gc && !purego

package blake2b

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/xtsctl/xtsctl/internal/cpuid"
)

type compressFunc func(h *[8]uint64, c *[2]uint64, flag uint64, blocks []byte)
type lanesFunc func(h *laneState, ptr *[maxLanes]*byte, blocks int, t uint64, flag uint64)

// compressKernels lists every assembly compression function, with the CPU
// support it needs; dispatch picks one per CPU (chooseCompress), and all
// are tested the same.
func compressKernels() []struct {
	name string
	ok   bool
	f    compressFunc
} {
	return []struct {
		name string
		ok   bool
		f    compressFunc
	}{
		{"compressScalar", true, compressScalar},
		{"compressAVX2", hasAVX2, compressAVX2},
		{"compressAVX512", hasAVX512, compressAVX512},
	}
}

func lanesKernels() []struct {
	name  string
	width int
	ok    bool
	f     lanesFunc
} {
	return []struct {
		name  string
		width int
		ok    bool
		f     lanesFunc
	}{
		{"hashLanes4AVX2", 4, hasAVX2, hashLanes4AVX2},
		{"hashLanes4AVX512", 4, hasAVX512, hashLanes4AVX512},
		{"hashLanes8AVX512", 8, hasAVX512, hashLanes8AVX512},
		{"hashLanes16AVX512", 16, hasAVX512, hashLanes16AVX512},
	}
}

// TestCompressKernels calls each kernel directly against compressGeneric: random chaining values, counters on both sides of
// the 64-bit carry, with and without the final flag, 0..9 blocks, and a
// trailing partial block that must be ignored.
func TestCompressKernels(t *testing.T) {
	r := rand.New(rand.NewPCG(61, 62))
	for _, k := range compressKernels() {
		t.Run(k.name, func(t *testing.T) {
			if !k.ok {
				t.Skip("CPU lacks the features")
			}
			for iter := range 400 {
				var h [8]uint64
				for i := range h {
					h[i] = r.Uint64()
				}
				c := [2]uint64{r.Uint64(), r.Uint64()}
				if iter%4 == 0 {
					c[0] = ^uint64(0) - uint64(r.IntN(3*BlockSize)) // carry into c[1]
				}
				n := r.IntN(10)
				var flag uint64
				if iter%3 == 0 {
					flag, n = finalFlag, 1
				}
				blocks := pattern(n*BlockSize+r.IntN(BlockSize), r.Uint64())
				hw, cw := h, c
				compressGeneric(&hw, &cw, flag, blocks)
				k.f(&h, &c, flag, blocks)
				if h != hw || c != cw {
					t.Fatalf("iteration %d (%d blocks): h %x c %x, want h %x c %x", iter, n, h, c, hw, cw)
				}
			}
		})
	}
}

// TestLanesKernels does the same for the multi-lane kernels, each lane with
// its own chaining value and data.
func TestLanesKernels(t *testing.T) {
	r := rand.New(rand.NewPCG(71, 72))
	for _, k := range lanesKernels() {
		t.Run(k.name, func(t *testing.T) {
			if !k.ok {
				t.Skip("CPU lacks the features")
			}
			for iter := range 200 {
				var h laneState
				for i := range h {
					for j := range h[i] {
						h[i][j] = r.Uint64()
					}
				}
				n := r.IntN(6)
				var flag uint64
				if iter%3 == 0 {
					flag, n = finalFlag, 1
				}
				tt := r.Uint64() >> 1
				var ptr [maxLanes]*byte
				bufs := make([][]byte, maxLanes)
				for j := range bufs {
					bufs[j] = pattern(n*BlockSize+1, r.Uint64())
					ptr[j] = &bufs[j][0]
				}
				want := h
				hashLanesGeneric(&want, &ptr, k.width, n, tt, flag != 0)
				// Lanes beyond the width must be left alone.
				k.f(&h, &ptr, n, tt, flag)
				if h != want {
					t.Fatalf("iteration %d (%d blocks): lanes differ\n got %x\nwant %x", iter, n, h, want)
				}
			}
		})
	}
}

// BenchmarkCompressKernels times each compression function directly on
// 64 KiB, next to compressGeneric (the other shapes of each are in the
// study module, _study).
func BenchmarkCompressKernels(b *testing.B) {
	data := make([]byte, 64<<10)
	all := append(compressKernels(), struct {
		name string
		ok   bool
		f    compressFunc
	}{"compressGeneric", true, compressGeneric})
	for _, k := range all {
		if !k.ok {
			continue
		}
		b.Run(k.name, func(b *testing.B) {
			var h [8]uint64
			var c [2]uint64
			measureCPU(b, len(data), func() { k.f(&h, &c, 0, data) })
		})
	}
}

// BenchmarkLanesKernels times each multi-lane kernel directly: width
// messages of 32 blocks (4 KiB) each.
func BenchmarkLanesKernels(b *testing.B) {
	const blocks = 32
	for _, k := range lanesKernels() {
		if !k.ok {
			continue
		}
		b.Run(k.name, func(b *testing.B) {
			data := make([]byte, maxLanes*blocks*BlockSize)
			var ptr [maxLanes]*byte
			for j := range ptr {
				ptr[j] = &data[j*blocks*BlockSize]
			}
			var h laneState
			measureCPU(b, k.width*blocks*BlockSize, func() { k.f(&h, &ptr, blocks, BlockSize, 0) })
		})
	}
}

// TestChooseCompress: the per-CPU table's row decides where it names one
// compression function this CPU runs, its candidates are timed where it
// names several, and a CPU without a row, or none of whose row's functions
// runs here, times every one it runs.
func TestChooseCompress(t *testing.T) {
	saved := compressAvailable
	defer func() { compressAvailable = saved }()
	var timed []implID
	calib := func(c []implID) implID { timed = c; return c[len(c)-1] }
	row := func(names ...string) cpuid.Tuning { return cpuid.Tuning{CPU: "test CPU", Compress: names} }
	all := []implID{implScalar, implAVX2, implAVX512}
	for _, c := range []struct {
		name    string
		row     cpuid.Tuning
		hasRow  bool
		unavail []implID
		want    implID
		timed   []implID
	}{
		{"no row", cpuid.Tuning{}, false, nil, implAVX512, all},
		{"no row, no AVX-512", cpuid.Tuning{}, false, []implID{implAVX512}, implAVX2, []implID{implScalar, implAVX2}},
		{"one", row("scalar"), true, nil, implScalar, nil},
		{"one, vector", row("avx512"), true, nil, implAVX512, nil},
		{"candidates", row("avx512", "avx2"), true, nil, implAVX2, []implID{implAVX512, implAVX2}},
		{"candidates, one masked", row("avx512", "avx2"), true, []implID{implAVX512}, implAVX2, nil},
		{"masked", row("avx512"), true, []implID{implAVX512}, implAVX2, []implID{implScalar, implAVX2}},
	} {
		for _, i := range all {
			compressAvailable[i] = true
		}
		for _, u := range c.unavail {
			compressAvailable[u] = false
		}
		timed = nil
		got, why := chooseCompress(c.row, c.hasRow, calib)
		if got != c.want || !slices.Equal(timed, c.timed) || why == "" {
			t.Errorf("%s: %v (timed %v, %q), want %v (timed %v)", c.name, got, timed, why, c.want, c.timed)
		}
	}
}

// TestCompressFollowsTable: on a CPU the table covers with one function it
// runs, that function is the dispatched one; calibrateCompress picks one
// of its candidates.
func TestCompressFollowsTable(t *testing.T) {
	if row, ok := cpuid.This(); ok && len(row.Compress) == 1 {
		for i := range numImpls {
			if implNames[i] == row.Compress[0] && compressAvailable[i] && compressWith != implID(i) {
				t.Errorf("the table's row for %s names %s; dispatch picked %v", row.CPU, row.Compress[0], compressWith)
			}
		}
	}
	t.Log(CompressDispatch())
	cands := []implID{implScalar}
	if compressAvailable[implAVX2] {
		cands = append(cands, implAVX2)
	}
	if got := calibrateCompress(cands); !slices.Contains(cands, got) {
		t.Errorf("calibrateCompress picked %v", got)
	}
}
