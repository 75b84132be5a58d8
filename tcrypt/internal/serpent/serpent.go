// Package serpent implements the Serpent block cipher (Anderson, Biham and
// Knudsen's AES submission) with a 256-bit key, in the byte order of the
// NESSIE vectors, Linux and libgcrypt, which VeraCrypt's volumes use.
//
// It serves one purpose here: recognising a VeraCrypt or TrueCrypt header
// encrypted with Serpent or a cascade holding it, so that xtsctl can name
// what it refuses. It is the specification's bit-sliced description
// written plainly, neither fast nor constant-time, and must not be used
// to encrypt data.
package serpent

import (
	"crypto/cipher"
	"encoding/binary"
	"errors"
	"math/bits"
)

// BlockSize is Serpent's block size in bytes.
const BlockSize = 16

var sbox = [8][16]byte{
	{3, 8, 15, 1, 10, 6, 5, 11, 14, 13, 4, 2, 7, 0, 9, 12},
	{15, 12, 2, 7, 9, 0, 5, 10, 1, 11, 14, 8, 6, 13, 3, 4},
	{8, 6, 7, 9, 3, 12, 10, 15, 13, 1, 14, 4, 0, 11, 5, 2},
	{0, 15, 11, 8, 12, 9, 6, 3, 13, 1, 2, 4, 10, 7, 5, 14},
	{1, 15, 8, 3, 12, 0, 11, 6, 2, 5, 4, 10, 9, 14, 7, 13},
	{15, 5, 2, 11, 4, 10, 9, 12, 0, 3, 14, 8, 13, 6, 7, 1},
	{7, 2, 12, 5, 8, 4, 6, 11, 14, 9, 1, 15, 13, 3, 10, 0},
	{1, 13, 15, 0, 14, 8, 2, 11, 7, 4, 12, 10, 9, 3, 5, 6},
}

var sboxInv [8][16]byte

func init() {
	for i, s := range sbox {
		for x, y := range s {
			sboxInv[i][y] = byte(x)
		}
	}
}

// apply runs the 4-bit S-box s on the 32 columns of bits of w.
func apply(s *[16]byte, w *[4]uint32) {
	var out [4]uint32
	for j := range 32 {
		n := (w[0]>>j)&1 | (w[1]>>j&1)<<1 | (w[2]>>j&1)<<2 | (w[3]>>j&1)<<3
		v := uint32(s[n])
		out[0] |= (v & 1) << j
		out[1] |= (v >> 1 & 1) << j
		out[2] |= (v >> 2 & 1) << j
		out[3] |= (v >> 3 & 1) << j
	}
	*w = out
}

func lt(w *[4]uint32) {
	x0, x1, x2, x3 := w[0], w[1], w[2], w[3]
	x0 = bits.RotateLeft32(x0, 13)
	x2 = bits.RotateLeft32(x2, 3)
	x1 ^= x0 ^ x2
	x3 ^= x2 ^ x0<<3
	x1 = bits.RotateLeft32(x1, 1)
	x3 = bits.RotateLeft32(x3, 7)
	x0 ^= x1 ^ x3
	x2 ^= x3 ^ x1<<7
	x0 = bits.RotateLeft32(x0, 5)
	x2 = bits.RotateLeft32(x2, 22)
	*w = [4]uint32{x0, x1, x2, x3}
}

func ltInv(w *[4]uint32) {
	x0, x1, x2, x3 := w[0], w[1], w[2], w[3]
	x2 = bits.RotateLeft32(x2, -22)
	x0 = bits.RotateLeft32(x0, -5)
	x2 ^= x3 ^ x1<<7
	x0 ^= x1 ^ x3
	x3 = bits.RotateLeft32(x3, -7)
	x1 = bits.RotateLeft32(x1, -1)
	x3 ^= x2 ^ x0<<3
	x1 ^= x0 ^ x2
	x2 = bits.RotateLeft32(x2, -3)
	x0 = bits.RotateLeft32(x0, -13)
	*w = [4]uint32{x0, x1, x2, x3}
}

type serpent struct{ k [33][4]uint32 }

// NewCipher returns Serpent with a 32-byte key.
func NewCipher(key []byte) (cipher.Block, error) {
	if len(key) != 32 {
		return nil, errors.New("serpent: key must be 32 bytes")
	}
	const phi = 0x9e3779b9
	var w [140]uint32 // w[i+8] is the specification's w_i
	for i := range 8 {
		w[i] = binary.LittleEndian.Uint32(key[4*i:])
	}
	for i := 8; i < 140; i++ {
		w[i] = bits.RotateLeft32(w[i-8]^w[i-5]^w[i-3]^w[i-1]^phi^uint32(i-8), 11)
	}
	c := new(serpent)
	for i := range 33 {
		k := [4]uint32{w[8+4*i], w[9+4*i], w[10+4*i], w[11+4*i]}
		apply(&sbox[(35-i)%8], &k)
		c.k[i] = k
	}
	clear(w[:])
	return c, nil
}

func (c *serpent) BlockSize() int { return BlockSize }

func load(src []byte) [4]uint32 {
	return [4]uint32{binary.LittleEndian.Uint32(src), binary.LittleEndian.Uint32(src[4:]),
		binary.LittleEndian.Uint32(src[8:]), binary.LittleEndian.Uint32(src[12:])}
}

func store(dst []byte, w [4]uint32) {
	for i, v := range w {
		binary.LittleEndian.PutUint32(dst[4*i:], v)
	}
}

func xorKey(w *[4]uint32, k *[4]uint32) {
	for i := range w {
		w[i] ^= k[i]
	}
}

func (c *serpent) Encrypt(dst, src []byte) {
	w := load(src[:BlockSize])
	for r := range 32 {
		xorKey(&w, &c.k[r])
		apply(&sbox[r%8], &w)
		if r < 31 {
			lt(&w)
		}
	}
	xorKey(&w, &c.k[32])
	store(dst[:BlockSize], w)
}

func (c *serpent) Decrypt(dst, src []byte) {
	w := load(src[:BlockSize])
	xorKey(&w, &c.k[32])
	for r := 31; r >= 0; r-- {
		if r < 31 {
			ltInv(&w)
		}
		apply(&sboxInv[r%8], &w)
		xorKey(&w, &c.k[r])
	}
	store(dst[:BlockSize], w)
}
