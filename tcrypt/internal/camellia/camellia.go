// Package camellia implements the Camellia block cipher (RFC 3713) with a
// 256-bit key, as VeraCrypt's volumes use it.
//
// It serves one purpose here: recognising a VeraCrypt header encrypted
// with Camellia or a cascade holding it, so that xtsctl can name what it
// refuses. It is RFC 3713's description written plainly, neither fast nor
// constant-time, and must not be used to encrypt data.
package camellia

import (
	"crypto/cipher"
	"encoding/binary"
	"errors"
	"math/bits"
)

// BlockSize is Camellia's block size in bytes.
const BlockSize = 16

// sbox1 is SBOX1 of RFC 3713 section 2.4.4; the other three are rotations
// of it.
var sbox1 = [256]byte{
	112, 130, 44, 236, 179, 39, 192, 229, 228, 133, 87, 53, 234, 12, 174, 65,
	35, 239, 107, 147, 69, 25, 165, 33, 237, 14, 79, 78, 29, 101, 146, 189,
	134, 184, 175, 143, 124, 235, 31, 206, 62, 48, 220, 95, 94, 197, 11, 26,
	166, 225, 57, 202, 213, 71, 93, 61, 217, 1, 90, 214, 81, 86, 108, 77,
	139, 13, 154, 102, 251, 204, 176, 45, 116, 18, 43, 32, 240, 177, 132, 153,
	223, 76, 203, 194, 52, 126, 118, 5, 109, 183, 169, 49, 209, 23, 4, 215,
	20, 88, 58, 97, 222, 27, 17, 28, 50, 15, 156, 22, 83, 24, 242, 34,
	254, 68, 207, 178, 195, 181, 122, 145, 36, 8, 232, 168, 96, 252, 105, 80,
	170, 208, 160, 125, 161, 137, 98, 151, 84, 91, 30, 149, 224, 255, 100, 210,
	16, 196, 0, 72, 163, 247, 117, 219, 138, 3, 230, 218, 9, 63, 221, 148,
	135, 92, 131, 2, 205, 74, 144, 51, 115, 103, 246, 243, 157, 127, 191, 226,
	82, 155, 216, 38, 200, 55, 198, 59, 129, 150, 111, 75, 19, 190, 99, 46,
	233, 121, 167, 140, 159, 110, 188, 142, 41, 245, 249, 182, 47, 253, 180, 89,
	120, 152, 6, 106, 231, 70, 113, 186, 212, 37, 171, 66, 136, 162, 141, 250,
	114, 7, 185, 85, 248, 238, 172, 10, 54, 73, 42, 104, 60, 56, 241, 164,
	64, 40, 211, 123, 187, 201, 67, 193, 21, 227, 173, 244, 119, 199, 128, 158,
}

var sigma = [6]uint64{
	0xA09E667F3BCC908B, 0xB67AE8584CAA73B2, 0xC6EF372FE94F82BE,
	0x54FF53A5F1D36F1C, 0x10E527FADE682D1D, 0xB05688C2B3E6C1FD,
}

func s1(x byte) byte { return sbox1[x] }
func s2(x byte) byte { return bits.RotateLeft8(sbox1[x], 1) }
func s3(x byte) byte { return bits.RotateLeft8(sbox1[x], 7) }
func s4(x byte) byte { return sbox1[bits.RotateLeft8(x, 1)] }

// f is the F-function (RFC 3713 section 2.4.1).
func f(in, ke uint64) uint64 {
	x := in ^ ke
	t1, t2, t3, t4 := s1(byte(x>>56)), s2(byte(x>>48)), s3(byte(x>>40)), s4(byte(x>>32))
	t5, t6, t7, t8 := s2(byte(x>>24)), s3(byte(x>>16)), s4(byte(x>>8)), s1(byte(x))
	y1 := t1 ^ t3 ^ t4 ^ t6 ^ t7 ^ t8
	y2 := t1 ^ t2 ^ t4 ^ t5 ^ t7 ^ t8
	y3 := t1 ^ t2 ^ t3 ^ t5 ^ t6 ^ t8
	y4 := t2 ^ t3 ^ t4 ^ t5 ^ t6 ^ t7
	y5 := t1 ^ t2 ^ t6 ^ t7 ^ t8
	y6 := t2 ^ t3 ^ t5 ^ t7 ^ t8
	y7 := t3 ^ t4 ^ t5 ^ t6 ^ t8
	y8 := t1 ^ t4 ^ t5 ^ t6 ^ t7
	return uint64(y1)<<56 | uint64(y2)<<48 | uint64(y3)<<40 | uint64(y4)<<32 |
		uint64(y5)<<24 | uint64(y6)<<16 | uint64(y7)<<8 | uint64(y8)
}

func fl(in, ke uint64) uint64 {
	x1, x2 := uint32(in>>32), uint32(in)
	k1, k2 := uint32(ke>>32), uint32(ke)
	x2 ^= bits.RotateLeft32(x1&k1, 1)
	x1 ^= x2 | k2
	return uint64(x1)<<32 | uint64(x2)
}

func flInv(in, ke uint64) uint64 {
	y1, y2 := uint32(in>>32), uint32(in)
	k1, k2 := uint32(ke>>32), uint32(ke)
	y1 ^= y2 | k2
	y2 ^= bits.RotateLeft32(y1&k1, 1)
	return uint64(y1)<<32 | uint64(y2)
}

// u128 is a 128-bit number, hi and lo halves.
type u128 struct{ hi, lo uint64 }

// rotl rotates x left by n bits (0 <= n < 128).
func (x u128) rotl(n uint) u128 {
	if n >= 64 {
		x = u128{x.lo, x.hi}
		n -= 64
	}
	if n == 0 {
		return x
	}
	return u128{x.hi<<n | x.lo>>(64-n), x.lo<<n | x.hi>>(64-n)}
}

type camellia struct {
	kw [4]uint64
	k  [24]uint64
	ke [6]uint64
}

// NewCipher returns Camellia with a 32-byte key.
func NewCipher(key []byte) (cipher.Block, error) {
	if len(key) != 32 {
		return nil, errors.New("camellia: key must be 32 bytes")
	}
	kl := u128{binary.BigEndian.Uint64(key), binary.BigEndian.Uint64(key[8:])}
	kr := u128{binary.BigEndian.Uint64(key[16:]), binary.BigEndian.Uint64(key[24:])}
	d1, d2 := kl.hi^kr.hi, kl.lo^kr.lo
	d2 ^= f(d1, sigma[0])
	d1 ^= f(d2, sigma[1])
	d1 ^= kl.hi
	d2 ^= kl.lo
	d2 ^= f(d1, sigma[2])
	d1 ^= f(d2, sigma[3])
	ka := u128{d1, d2}
	d1, d2 = ka.hi^kr.hi, ka.lo^kr.lo
	d2 ^= f(d1, sigma[4])
	d1 ^= f(d2, sigma[5])
	kb := u128{d1, d2}

	c := new(camellia)
	halves := func(x u128, n uint) (uint64, uint64) { r := x.rotl(n); return r.hi, r.lo }
	c.kw[0], c.kw[1] = halves(kl, 0)
	c.k[0], c.k[1] = halves(kb, 0)
	c.k[2], c.k[3] = halves(kr, 15)
	c.k[4], c.k[5] = halves(ka, 15)
	c.ke[0], c.ke[1] = halves(kr, 30)
	c.k[6], c.k[7] = halves(kb, 30)
	c.k[8], c.k[9] = halves(kl, 45)
	c.k[10], c.k[11] = halves(ka, 45)
	c.ke[2], c.ke[3] = halves(kl, 60)
	c.k[12], c.k[13] = halves(kr, 60)
	c.k[14], c.k[15] = halves(kb, 60)
	c.k[16], c.k[17] = halves(kl, 77)
	c.ke[4], c.ke[5] = halves(ka, 77)
	c.k[18], c.k[19] = halves(kr, 94)
	c.k[20], c.k[21] = halves(ka, 94)
	c.k[22], c.k[23] = halves(kl, 111)
	c.kw[2], c.kw[3] = halves(kb, 111)
	return c, nil
}

func (c *camellia) BlockSize() int { return BlockSize }

// crypt runs the 24 rounds with the given subkey order.
func crypt(dst, src []byte, kw [4]uint64, k [24]uint64, ke [6]uint64) {
	d1 := binary.BigEndian.Uint64(src) ^ kw[0]
	d2 := binary.BigEndian.Uint64(src[8:]) ^ kw[1]
	for r := 0; r < 24; r += 2 {
		if r > 0 && r%6 == 0 {
			d1 = fl(d1, ke[r/3-2])
			d2 = flInv(d2, ke[r/3-1])
		}
		d2 ^= f(d1, k[r])
		d1 ^= f(d2, k[r+1])
	}
	binary.BigEndian.PutUint64(dst, d2^kw[2])
	binary.BigEndian.PutUint64(dst[8:], d1^kw[3])
}

func (c *camellia) Encrypt(dst, src []byte) { crypt(dst[:BlockSize], src[:BlockSize], c.kw, c.k, c.ke) }

// Decrypt runs the rounds with the subkeys in reverse order (RFC 3713
// section 2.3.3).
func (c *camellia) Decrypt(dst, src []byte) {
	kw := [4]uint64{c.kw[2], c.kw[3], c.kw[0], c.kw[1]}
	var k [24]uint64
	for i := range k {
		k[i] = c.k[23-i]
	}
	var ke [6]uint64
	for i := range ke {
		ke[i] = c.ke[5-i]
	}
	crypt(dst[:BlockSize], src[:BlockSize], kw, k, ke)
}
