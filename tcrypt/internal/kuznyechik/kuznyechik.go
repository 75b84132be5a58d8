// Package kuznyechik implements the GOST R 34.12-2015 128-bit block
// cipher "Kuznyechik" (RFC 7801), in the byte order of RFC 7801's
// examples (a block's first byte is the RFC's most significant a15), as
// VeraCrypt's volumes use it.
//
// It serves one purpose here: recognising a VeraCrypt header encrypted
// with Kuznyechik or a cascade holding it, so that xtsctl can name what it
// refuses. It is RFC 7801's description written plainly, neither fast nor
// constant-time, and must not be used to encrypt data.
package kuznyechik

import (
	"crypto/cipher"
	"errors"

	"github.com/xtsctl/xtsctl/tcrypt/internal/streebog"
)

// BlockSize is Kuznyechik's block size in bytes.
const BlockSize = 16

// lc are the coefficients of the linear map l (RFC 7801 section 4.1.2),
// for the block's bytes in order.
var lc = [16]byte{148, 32, 133, 16, 194, 192, 1, 251, 1, 192, 194, 16, 133, 32, 148, 1}

var pi, piInv [256]byte

func init() {
	pi = streebog.Pi() // the same π' as GOST R 34.11-2012
	for i, v := range pi {
		piInv[v] = byte(i)
	}
}

// mul multiplies in GF(2^8) modulo x^8 + x^7 + x^6 + x + 1.
func mul(a, b byte) byte {
	var p byte
	for b != 0 {
		if b&1 != 0 {
			p ^= a
		}
		hi := a & 0x80
		a <<= 1
		if hi != 0 {
			a ^= 0xC3
		}
		b >>= 1
	}
	return p
}

type block = [BlockSize]byte

// r is the map R: l of the block in front, the rest shifted back.
func r(a *block) {
	var x byte
	for i := range a {
		x ^= mul(a[i], lc[i])
	}
	copy(a[1:], a[:15])
	a[0] = x
}

func rInv(a *block) {
	first := a[0]
	copy(a[:15], a[1:])
	a[15] = first
	var x byte
	for i := range a {
		x ^= mul(a[i], lc[i])
	}
	a[15] = x
}

func lsx(a *block, k *block) {
	for i := range a {
		a[i] = pi[a[i]^k[i]]
	}
	for range 16 {
		r(a)
	}
}

type kuz struct{ k [10]block }

// NewCipher returns Kuznyechik with a 32-byte key.
func NewCipher(key []byte) (cipher.Block, error) {
	if len(key) != 32 {
		return nil, errors.New("kuznyechik: key must be 32 bytes")
	}
	c := new(kuz)
	copy(c.k[0][:], key[:16])
	copy(c.k[1][:], key[16:])
	for i := range 4 {
		a1, a0 := c.k[2*i], c.k[2*i+1]
		for j := 1; j <= 8; j++ {
			var ci block
			ci[15] = byte(8*i + j)
			for range 16 {
				r(&ci)
			}
			t := a1
			lsx(&t, &ci)
			for b := range t {
				t[b] ^= a0[b]
			}
			a1, a0 = t, a1
		}
		c.k[2*i+2], c.k[2*i+3] = a1, a0
	}
	return c, nil
}

func (c *kuz) BlockSize() int { return BlockSize }

func (c *kuz) Encrypt(dst, src []byte) {
	var a block
	copy(a[:], src[:BlockSize])
	for i := range 9 {
		lsx(&a, &c.k[i])
	}
	for i := range a {
		dst[i] = a[i] ^ c.k[9][i]
	}
}

func (c *kuz) Decrypt(dst, src []byte) {
	var a block
	copy(a[:], src[:BlockSize])
	for i := range a {
		a[i] ^= c.k[9][i]
	}
	for i := 8; i >= 0; i-- {
		for range 16 {
			rInv(&a)
		}
		for j := range a {
			a[j] = piInv[a[j]] ^ c.k[i][j]
		}
	}
	copy(dst[:BlockSize], a[:])
}
