package aesni

import (
	"crypto/subtle"
	"encoding/binary"
)

// This file is the reference XTS-AES (IEEE 1619-2007, section 5), written to
// be read rather than to be fast. Every kernel is tested against it.

// mulX multiplies the tweak t by x in GF(2^128) modulo x^128 + x^7 + x^2 + x + 1.
// The tweak is a little-endian 128-bit number: byte 0 holds the lowest bits.
func mulX(t *[16]byte) {
	lo := binary.LittleEndian.Uint64(t[:8])
	hi := binary.LittleEndian.Uint64(t[8:])
	carry := hi >> 63 // the bit that leaves x^127 wraps around as x^7 + x^2 + x + 1
	hi = hi<<1 | lo>>63
	lo = lo<<1 ^ carry*0x87
	binary.LittleEndian.PutUint64(t[:8], lo)
	binary.LittleEndian.PutUint64(t[8:], hi)
}

// xexBlock computes dst = E(src ^ t) ^ t (or with D when decrypting) for one block.
func xexBlock(c *Cipher, dst, src []byte, t *[16]byte, decrypt bool) {
	var b [16]byte
	subtle.XORBytes(b[:], src[:16], t[:])
	if decrypt {
		decryptBlockGeneric(&c.dec, c.rounds, b[:], b[:])
	} else {
		encryptBlockGeneric(&c.enc, c.rounds, b[:], b[:])
	}
	subtle.XORBytes(dst[:16], b[:], t[:])
}

// xtsGeneric encrypts or decrypts one data unit (len(src) >= 16). dst and src
// have the same length and are equal or disjoint.
func xtsGeneric(c *Cipher, dst, src []byte, tweak *[16]byte, decrypt bool) {
	var t [16]byte
	encryptBlockGeneric(&c.tweak, c.rounds, t[:], tweak[:]) // T = E_K2(i)

	tail := len(src) % 16
	full := len(src) / 16
	if tail != 0 {
		full-- // the last whole block takes part in ciphertext stealing
	}
	for j := 0; j < full; j++ {
		xexBlock(c, dst[16*j:], src[16*j:], &t, decrypt)
		mulX(&t)
	}
	if tail == 0 {
		return
	}

	// Ciphertext stealing over the last whole block m and the partial block
	// m+1 (IEEE 1619-2007 section 5.3.2 and 5.4.2).
	m := 16 * full
	last := m + 16
	var pp, cc [16]byte
	if !decrypt {
		xexBlock(c, cc[:], src[m:], &t, false) // CC = XEX(P_m, T_m)
		mulX(&t)
		copy(pp[:], src[last:])     // PP = P_{m+1} || CC[tail:]
		copy(pp[tail:], cc[tail:])  //
		copy(dst[last:], cc[:tail]) // C_{m+1} = CC[:tail]
		xexBlock(c, dst[m:], pp[:], &t, false)
		return
	}
	// Decryption uses the two tweaks in the other order.
	t2 := t
	mulX(&t2)
	xexBlock(c, pp[:], src[m:], &t2, true) // PP = XEX^-1(C_m, T_{m+1})
	copy(cc[:], src[last:])                // CC = C_{m+1} || PP[tail:]
	copy(cc[tail:], pp[tail:])
	copy(dst[last:], pp[:tail]) // P_{m+1} = PP[:tail]
	xexBlock(c, dst[m:], cc[:], &t, true)
}

// plain64 writes dm-crypt's plain64 tweak for sector n: little-endian n, then zeros.
func plain64(t *[16]byte, n uint64) {
	binary.LittleEndian.PutUint64(t[:8], n)
	clear(t[8:])
}

// sectorsGeneric runs xtsGeneric over consecutive data units of unit bytes,
// unit i with the plain64 tweak of sector + i*step.
func sectorsGeneric(c *Cipher, dst, src []byte, unit int, sector, step uint64, decrypt bool) {
	var t [16]byte
	for off := 0; off < len(src); off += unit {
		plain64(&t, sector)
		xtsGeneric(c, dst[off:off+unit], src[off:off+unit], &t, decrypt)
		sector += step
	}
}
