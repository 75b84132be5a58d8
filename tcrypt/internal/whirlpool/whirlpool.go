// Package whirlpool implements the Whirlpool hash function (ISO/IEC
// 10118-3:2004, the final 2003 version of Barreto and Rijmen's design),
// which VeraCrypt and TrueCrypt use in PBKDF2-HMAC.
//
// No well-kept Go module provides it, so it is written here from the
// specification: the S-box is built from its mini-boxes E and R, the
// tables from the S-box and the circulant matrix cir(1, 1, 4, 1, 8, 5, 2,
// 9), the round constants from the S-box; the tests hold the ISO/NESSIE
// vectors. Digests implement encoding.BinaryMarshaler, so crypto/hmac keeps
// its padded-key states instead of hashing them again on every Reset.
package whirlpool

import (
	"encoding/binary"
	"errors"
	"hash"
)

// Size is the digest size and BlockSize the block size, in bytes.
const (
	Size      = 64
	BlockSize = 64
	rounds    = 10
)

// table[j][x] is row j of the round function's lookup: the S-box output
// of x times column j of the circulant matrix, as eight bytes big-endian.
var (
	table [8][256]uint64
	rc    [rounds + 1]uint64
)

func init() {
	// The mini-boxes of the specification, section 3.2.1.
	e := [16]byte{0x1, 0xB, 0x9, 0xC, 0xD, 0x6, 0xF, 0x3, 0xE, 0x8, 0x7, 0x4, 0xA, 0x2, 0x5, 0x0}
	r := [16]byte{0x7, 0xC, 0xB, 0xD, 0xE, 0x4, 0x9, 0xF, 0x6, 0x3, 0x8, 0xA, 0x2, 0x5, 0x1, 0x0}
	var einv [16]byte
	for i, v := range e {
		einv[v] = byte(i)
	}
	var sbox [256]byte
	for u := range 256 {
		a, b := e[u>>4], einv[u&15]
		t := r[a^b]
		sbox[u] = e[a^t]<<4 | einv[b^t]
	}
	// Multiplication in GF(2^8) modulo x^8 + x^4 + x^3 + x^2 + 1 (0x11D).
	mul := func(a, b byte) byte {
		var p byte
		for b != 0 {
			if b&1 != 0 {
				p ^= a
			}
			hi := a & 0x80
			a <<= 1
			if hi != 0 {
				a ^= 0x1D
			}
			b >>= 1
		}
		return p
	}
	c := [8]byte{1, 1, 4, 1, 8, 5, 2, 9}
	for x := range 256 {
		s := sbox[x]
		var v uint64
		for k := range 8 {
			v = v<<8 | uint64(mul(s, c[k]))
		}
		for j := range 8 {
			table[j][x] = v>>(8*j) | v<<(64-8*j)
		}
	}
	for i := 1; i <= rounds; i++ {
		rc[i] = binary.BigEndian.Uint64(sbox[8*(i-1) : 8*i])
	}
}

type digest struct {
	h   [8]uint64
	buf [BlockSize]byte
	n   int    // bytes in buf
	len uint64 // bytes hashed; the specification's 256-bit length is this times 8
}

// New returns a new Whirlpool hash.
func New() hash.Hash { return new(digest) }

// Sum returns the Whirlpool digest of data.
func Sum(data []byte) [Size]byte {
	var d digest
	d.Write(data)
	var out [Size]byte
	d.Sum(out[:0])
	return out
}

func (d *digest) Size() int      { return Size }
func (d *digest) BlockSize() int { return BlockSize }
func (d *digest) Reset()         { *d = digest{} }

func (d *digest) Write(p []byte) (int, error) {
	n := len(p)
	d.len += uint64(n)
	if d.n > 0 {
		k := copy(d.buf[d.n:], p)
		d.n += k
		p = p[k:]
		if d.n < BlockSize {
			return n, nil
		}
		d.block(d.buf[:])
		d.n = 0
	}
	for len(p) >= BlockSize {
		d.block(p[:BlockSize])
		p = p[BlockSize:]
	}
	d.n = copy(d.buf[:], p)
	return n, nil
}

func (d *digest) Sum(in []byte) []byte {
	c := *d
	// A 1 bit, zeros up to 32 bytes before a block's end, then the length
	// in bits as a 256-bit big-endian number.
	var pad [2 * BlockSize]byte
	pad[0] = 0x80
	k := BlockSize - 32 - c.n
	if k <= 0 {
		k += BlockSize
	}
	bits := c.len << 3
	binary.BigEndian.PutUint64(pad[k+24:], bits)
	binary.BigEndian.PutUint64(pad[k+16:], c.len>>61)
	c.Write(pad[:k+32])
	var out [Size]byte
	for i, v := range c.h {
		binary.BigEndian.PutUint64(out[8*i:], v)
	}
	return append(in, out[:]...)
}

// round computes one application of the round function ρ[k] to s.
func round(s *[8]uint64, k *[8]uint64) [8]uint64 {
	var out [8]uint64
	for i := range 8 {
		out[i] = k[i] ^
			table[0][byte(s[i]>>56)] ^
			table[1][byte(s[(i+7)&7]>>48)] ^
			table[2][byte(s[(i+6)&7]>>40)] ^
			table[3][byte(s[(i+5)&7]>>32)] ^
			table[4][byte(s[(i+4)&7]>>24)] ^
			table[5][byte(s[(i+3)&7]>>16)] ^
			table[6][byte(s[(i+2)&7]>>8)] ^
			table[7][byte(s[(i+1)&7])]
	}
	return out
}

// block is the Miyaguchi-Preneel compression of one block: the
// dedicated block cipher W keyed by the chaining value.
func (d *digest) block(p []byte) {
	var m, s [8]uint64
	for i := range 8 {
		m[i] = binary.BigEndian.Uint64(p[8*i:])
	}
	k := d.h
	for i := range 8 {
		s[i] = m[i] ^ k[i]
	}
	for r := 1; r <= rounds; r++ {
		rk := [8]uint64{rc[r]}
		k = round(&k, &rk)
		s = round(&s, &k)
	}
	for i := range 8 {
		d.h[i] ^= s[i] ^ m[i]
	}
}

const (
	magic         = "whrl\x01"
	marshaledSize = len(magic) + 8*8 + BlockSize + 8
)

// MarshalBinary saves the state (for crypto/hmac).
func (d *digest) MarshalBinary() ([]byte, error) {
	return d.AppendBinary(make([]byte, 0, marshaledSize))
}

// AppendBinary appends the state to b.
func (d *digest) AppendBinary(b []byte) ([]byte, error) {
	b = append(b, magic...)
	for _, v := range d.h {
		b = binary.BigEndian.AppendUint64(b, v)
	}
	b = append(b, d.buf[:d.n]...)
	b = append(b, make([]byte, BlockSize-d.n)...)
	return binary.BigEndian.AppendUint64(b, d.len), nil
}

// UnmarshalBinary restores a state saved by MarshalBinary.
func (d *digest) UnmarshalBinary(b []byte) error {
	if len(b) != marshaledSize || string(b[:len(magic)]) != magic {
		return errors.New("whirlpool: invalid hash state")
	}
	b = b[len(magic):]
	for i := range d.h {
		d.h[i] = binary.BigEndian.Uint64(b[8*i:])
	}
	b = b[64:]
	copy(d.buf[:], b[:BlockSize])
	d.len = binary.BigEndian.Uint64(b[BlockSize:])
	d.n = int(d.len % BlockSize)
	return nil
}
