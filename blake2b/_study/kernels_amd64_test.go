//go:build amd64 && gc && !purego

package study

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

type compressFunc func(h *[8]uint64, c *[2]uint64, flag uint64, blocks []byte)
type lanesFunc func(h *laneState, ptr *[maxLanes]*byte, blocks int, t uint64, flag uint64)

// compressKernels lists every assembly compression function, in both
// shapes, with the CPU support it needs.
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
		{"compressScalarRolled", true, compressScalarRolled},
		{"compressAVX2", hasAVX2, compressAVX2},
		{"compressAVX2Rolled", hasAVX2, compressAVX2Rolled},
		{"compressAVX512", hasAVX512, compressAVX512},
		{"compressAVX512Rolled", hasAVX512, compressAVX512Rolled},
		{"compressAVX512Gather", hasAVX512, compressAVX512Gather},
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
		{"hashLanes4AVX2Unrolled", 4, hasAVX2, hashLanes4AVX2Unrolled},
		{"hashLanes4AVX512", 4, hasAVX512, hashLanes4AVX512},
		{"hashLanes8AVX512", 8, hasAVX512, hashLanes8AVX512},
		{"hashLanes8AVX512Unrolled", 8, hasAVX512, hashLanes8AVX512Unrolled},
		{"hashLanes16AVX512", 16, hasAVX512, hashLanes16AVX512},
		{"hashLanes16AVX512Unrolled", 16, hasAVX512, hashLanes16AVX512Unrolled},
	}
}

// TestCompressKernels calls each kernel against compressGeneric: random
// chaining values, counters on both sides of the 64-bit carry, with and
// without the final flag, 0..9 blocks, and a trailing partial block that
// must be ignored; and once through a whole hash against x/crypto.
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
			msg := pattern(1000, 63)
			if got, want := sum512(k.f, msg), sum512(compressGeneric, msg); !bytes.Equal(got, want) {
				t.Fatalf("whole hash: %x, want %x", got, want)
			}
		})
	}
}

// TestLanesKernels does the same for the multi-lane kernels, each lane with
// its own chaining value and data; lanes beyond the width are left alone.
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
				k.f(&h, &ptr, n, tt, flag)
				if h != want {
					t.Fatalf("iteration %d (%d blocks): lanes differ\n got %x\nwant %x", iter, n, h, want)
				}
			}
		})
	}
}

// BenchmarkCompressKernels times each compression function on 64 KiB, both
// shapes, next to compressGeneric.
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

// BenchmarkLanesKernels times each multi-lane kernel, both shapes: width
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
