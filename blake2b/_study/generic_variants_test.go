package study

import (
	"encoding/binary"
	"math/bits"
	"math/rand/v2"
	"testing"
)

// gWords lists the state words of the 8 G's of a round: 4 columns, then 4
// diagonals.
var gWords = [8][4]uint8{
	{0, 4, 8, 12}, {1, 5, 9, 13}, {2, 6, 10, 14}, {3, 7, 11, 15},
	{0, 5, 10, 15}, {1, 6, 11, 12}, {2, 7, 8, 13}, {3, 4, 9, 14},
}

// compressGenericRolled is the fully rolled point of the code-size study:
// one loop over rounds, one over the G's, state and message in arrays.
func compressGenericRolled(h *[8]uint64, c *[2]uint64, flag uint64, blocks []byte) {
	for len(blocks) >= BlockSize {
		var carry uint64
		c[0], carry = bits.Add64(c[0], BlockSize, 0)
		c[1] += carry
		var m [16]uint64
		for i := range m {
			m[i] = binary.LittleEndian.Uint64(blocks[8*i:])
		}
		var v [16]uint64
		copy(v[:8], h[:])
		copy(v[8:], iv[:])
		v[12] ^= c[0]
		v[13] ^= c[1]
		v[14] ^= flag
		for r := range sigma {
			for i, w := range gWords {
				v[w[0]], v[w[1]], v[w[2]], v[w[3]] = g(v[w[0]], v[w[1]], v[w[2]], v[w[3]],
					m[sigma[r][2*i]], m[sigma[r][2*i+1]])
			}
		}
		for k := range h {
			h[k] ^= v[k] ^ v[k+8]
		}
		blocks = blocks[BlockSize:]
	}
}

// TestGenericVariants checks the study's pure-Go variants against
// compressGeneric.
func TestGenericVariants(t *testing.T) {
	r := rand.New(rand.NewPCG(81, 82))
	for name, f := range map[string]func(*[8]uint64, *[2]uint64, uint64, []byte){
		"rolled":   compressGenericRolled,
		"unrolled": compressGenericUnrolled,
	} {
		for iter := range 200 {
			var h [8]uint64
			for i := range h {
				h[i] = r.Uint64()
			}
			c := [2]uint64{^uint64(0) - uint64(r.IntN(400)), r.Uint64()}
			flag := uint64(0)
			n := r.IntN(5)
			if iter%2 == 0 {
				flag, n = finalFlag, 1
			}
			blocks := pattern(n*BlockSize, r.Uint64())
			hw, cw := h, c
			compressGeneric(&hw, &cw, flag, blocks)
			f(&h, &c, flag, blocks)
			if h != hw || c != cw {
				t.Fatalf("%s, iteration %d: h %x c %x, want %x %x", name, iter, h, c, hw, cw)
			}
		}
	}
}

// BenchmarkGenericVariants times the pure-Go variants on 64 KiB.
func BenchmarkGenericVariants(b *testing.B) {
	data := make([]byte, 64<<10)
	for _, v := range []struct {
		name string
		f    func(*[8]uint64, *[2]uint64, uint64, []byte)
	}{
		{"compressGeneric", compressGeneric},
		{"compressGenericRolled", compressGenericRolled},
		{"compressGenericUnrolled", compressGenericUnrolled},
	} {
		b.Run(v.name, func(b *testing.B) {
			var h [8]uint64
			var c [2]uint64
			measureCPU(b, len(data), func() { v.f(&h, &c, 0, data) })
		})
	}
}
