//go:build amd64 && gc && !purego

package study

import "golang.org/x/sys/cpu"

// The kernels of blake2b_amd64.s, with the shipped package's contracts
// (../blake2b_amd64.go). The shipped shape of each is the first of its
// pair: compression functions unrolled, lane kernels rolled.

//go:noescape
func compressScalar(h *[8]uint64, c *[2]uint64, flag uint64, blocks []byte)

//go:noescape
func compressScalarRolled(h *[8]uint64, c *[2]uint64, flag uint64, blocks []byte)

//go:noescape
func compressAVX2(h *[8]uint64, c *[2]uint64, flag uint64, blocks []byte)

//go:noescape
func compressAVX2Rolled(h *[8]uint64, c *[2]uint64, flag uint64, blocks []byte)

//go:noescape
func compressAVX512(h *[8]uint64, c *[2]uint64, flag uint64, blocks []byte)

//go:noescape
func compressAVX512Rolled(h *[8]uint64, c *[2]uint64, flag uint64, blocks []byte)

// compressAVX512Gather is compressAVX512's first form: the message words
// gathered by VPERMI2Q from the block held in two zmm registers.
//
//go:noescape
func compressAVX512Gather(h *[8]uint64, c *[2]uint64, flag uint64, blocks []byte)

//go:noescape
func hashLanes4AVX2(h *laneState, ptr *[maxLanes]*byte, blocks int, t uint64, flag uint64)

//go:noescape
func hashLanes4AVX2Unrolled(h *laneState, ptr *[maxLanes]*byte, blocks int, t uint64, flag uint64)

//go:noescape
func hashLanes4AVX512(h *laneState, ptr *[maxLanes]*byte, blocks int, t uint64, flag uint64)

//go:noescape
func hashLanes8AVX512(h *laneState, ptr *[maxLanes]*byte, blocks int, t uint64, flag uint64)

//go:noescape
func hashLanes8AVX512Unrolled(h *laneState, ptr *[maxLanes]*byte, blocks int, t uint64, flag uint64)

//go:noescape
func hashLanes16AVX512(h *laneState, ptr *[maxLanes]*byte, blocks int, t uint64, flag uint64)

//go:noescape
func hashLanes16AVX512Unrolled(h *laneState, ptr *[maxLanes]*byte, blocks int, t uint64, flag uint64)

var (
	hasAVX2   = cpu.X86.HasAVX && cpu.X86.HasAVX2
	hasAVX512 = hasAVX2 && cpu.X86.HasAVX512 && cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL
)
