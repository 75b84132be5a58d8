package blake2b

import (
	"encoding/binary"
	"math/bits"
)

// sigma is the message schedule (RFC 7693, section 2.7): round r uses
// message word sigma[r][2i] and sigma[r][2i+1] in the i-th G. Rounds 10 and
// 11 repeat rounds 0 and 1, so the table has one row per round.
var sigma = [12][16]uint8{
	{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
	{14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
	{11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4},
	{7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8},
	{9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13},
	{2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9},
	{12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11},
	{13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10},
	{6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5},
	{10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0},
	{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
	{14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
}

// compressGeneric hashes the whole blocks in blocks into h (RFC 7693,
// section 3.2). Before each block it adds BlockSize to the 128-bit byte
// counter c; flag is the finalisation word f0 used for every block (callers
// pass finalFlag only with a single block).
func compressGeneric(h *[8]uint64, c *[2]uint64, flag uint64, blocks []byte) {
	c0, c1 := c[0], c[1]
	var m [16]uint64 // the block's words: the key, for a keyed hash's first block
	for len(blocks) >= BlockSize {
		var carry uint64
		c0, carry = bits.Add64(c0, BlockSize, 0)
		c1 += carry

		for i := range m {
			m[i] = binary.LittleEndian.Uint64(blocks[8*i:])
		}
		v0, v1, v2, v3, v4, v5, v6, v7 := h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]
		v8, v9, v10, v11 := iv[0], iv[1], iv[2], iv[3]
		v12, v13, v14, v15 := iv[4]^c0, iv[5]^c1, iv[6]^flag, iv[7]

		for r := range sigma {
			s := &sigma[r]
			// Columns, then diagonals.
			v0, v4, v8, v12 = g(v0, v4, v8, v12, m[s[0]], m[s[1]])
			v1, v5, v9, v13 = g(v1, v5, v9, v13, m[s[2]], m[s[3]])
			v2, v6, v10, v14 = g(v2, v6, v10, v14, m[s[4]], m[s[5]])
			v3, v7, v11, v15 = g(v3, v7, v11, v15, m[s[6]], m[s[7]])
			v0, v5, v10, v15 = g(v0, v5, v10, v15, m[s[8]], m[s[9]])
			v1, v6, v11, v12 = g(v1, v6, v11, v12, m[s[10]], m[s[11]])
			v2, v7, v8, v13 = g(v2, v7, v8, v13, m[s[12]], m[s[13]])
			v3, v4, v9, v14 = g(v3, v4, v9, v14, m[s[14]], m[s[15]])
		}

		h[0] ^= v0 ^ v8
		h[1] ^= v1 ^ v9
		h[2] ^= v2 ^ v10
		h[3] ^= v3 ^ v11
		h[4] ^= v4 ^ v12
		h[5] ^= v5 ^ v13
		h[6] ^= v6 ^ v14
		h[7] ^= v7 ^ v15
		blocks = blocks[BlockSize:]
	}
	c[0], c[1] = c0, c1
	clear(m[:])
}

// g is the BLAKE2b mixing function G (RFC 7693, section 3.1).
func g(a, b, c, d, x, y uint64) (uint64, uint64, uint64, uint64) {
	a += b + x
	d = bits.RotateLeft64(d^a, -32)
	c += d
	b = bits.RotateLeft64(b^c, -24)
	a += b + y
	d = bits.RotateLeft64(d^a, -16)
	c += d
	b = bits.RotateLeft64(b^c, -63)
	return a, b, c, d
}

// hashLanesGeneric is the reference for the multi-lane kernels (see
// hashLanes): it hashes the lanes one after the other.
func hashLanesGeneric(h *laneState, ptr *[maxLanes]*byte, lanes, blocks int, t uint64, final bool) {
	for j := range lanes {
		var s [8]uint64
		for k := range s {
			s[k] = h[k][j]
		}
		data := unsafeBlocks(ptr[j], blocks)
		for b := range blocks {
			var flag uint64
			if final && b == blocks-1 {
				flag = finalFlag
			}
			compressGenericAt(&s, data[b*BlockSize:(b+1)*BlockSize], t+uint64(b)*BlockSize, flag)
		}
		for k := range s {
			h[k][j] = s[k]
		}
	}
}

// compressGenericAt compresses one block whose byte counter, this block
// included, is t (below 2^64: lane messages are never that long).
func compressGenericAt(h *[8]uint64, block []byte, t, flag uint64) {
	// compressGeneric adds BlockSize first; start one block lower, borrowing
	// from the high word when t is smaller than a block.
	c := [2]uint64{t - BlockSize, 0}
	if t < BlockSize {
		c[1] = ^uint64(0)
	}
	compressGeneric(h, &c, flag, block)
}
