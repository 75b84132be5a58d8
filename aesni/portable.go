package aesni

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"sync"
)

// The portable XTS path: IEEE 1619 over crypto/aes blocks, for every
// platform where none of our kernels runs (other GOARCHes, the purego tag,
// x86 without AES-NI). crypto/aes uses the CPU's AES instructions where
// the standard library has them (arm64, s390x, ppc64le, amd64) and
// constant-time-minded generic Go elsewhere. It is not the oracle:
// xts_generic.go, written to be read, is what every path, this one
// included, is tested against.
//
// Blocks go through a pooled scratch buffer, never the caller's slices, so
// that handing them to the cipher.Block interface does not make the
// callers' buffers (and their tweak) escape to the heap on every platform.

// blocks holds crypto/aes ciphers for key1 and key2.
type blocks struct {
	k1, k2 cipher.Block
}

// newBlocks makes c's crypto/aes ciphers from its schedules: an AES key is
// the first 16 or 32 bytes of its own expanded schedule.
func newBlocks(c *Cipher) *blocks {
	n := 4 * (c.rounds - 6) // 16 for AES-128, 32 for AES-256
	k1, err1 := aes.NewCipher(c.enc[:n])
	k2, err2 := aes.NewCipher(c.tweak[:n])
	if err1 != nil || err2 != nil {
		panic("aesni: crypto/aes rejected a key length it accepts")
	}
	return &blocks{k1, k2}
}

// portableBlocks returns c's ciphers, made in Init where this path is the
// automatic choice; a Cipher made elsewhere (this path forced through
// internal/impl, in tests) gets them for the call.
func (c *Cipher) portableBlocks() *blocks {
	if c.blocks != nil {
		return c.blocks
	}
	return newBlocks(c)
}

var scratchPool = sync.Pool{New: func() any { return new([16]byte) }}

// mulX64 is mulX on the tweak as two little-endian words.
func mulX64(lo, hi uint64) (uint64, uint64) {
	carry := hi >> 63
	return lo<<1 ^ carry*0x87, hi<<1 | lo>>63
}

// xex64 sets dst[:16] = E(src[:16] ^ T) ^ T (D when decrypting), with the
// tweak T = (lo, hi) and x as the scratch block.
func xex64(b cipher.Block, decrypt bool, x *[16]byte, dst, src []byte, lo, hi uint64) {
	binary.LittleEndian.PutUint64(x[:8], binary.LittleEndian.Uint64(src[:8])^lo)
	binary.LittleEndian.PutUint64(x[8:], binary.LittleEndian.Uint64(src[8:16])^hi)
	if decrypt {
		b.Decrypt(x[:], x[:])
	} else {
		b.Encrypt(x[:], x[:])
	}
	binary.LittleEndian.PutUint64(dst[:8], binary.LittleEndian.Uint64(x[:8])^lo)
	binary.LittleEndian.PutUint64(dst[8:16], binary.LittleEndian.Uint64(x[8:])^hi)
}

// xtsPortable is xtsGeneric on crypto/aes: one data unit, len(src) >= 16,
// dst and src of equal length, equal or disjoint.
func xtsPortable(c *Cipher, dst, src []byte, tweak *[16]byte, decrypt bool) {
	bl := c.portableBlocks()
	x := scratchPool.Get().(*[16]byte)
	defer scratchPool.Put(x)
	*x = *tweak
	bl.k2.Encrypt(x[:], x[:]) // T = E_K2(i)
	lo, hi := binary.LittleEndian.Uint64(x[:8]), binary.LittleEndian.Uint64(x[8:])

	tail := len(src) % 16
	full := len(src) / 16
	if tail != 0 {
		full-- // the last whole block takes part in ciphertext stealing
	}
	for j := 0; j < full; j++ {
		xex64(bl.k1, decrypt, x, dst[16*j:], src[16*j:], lo, hi)
		lo, hi = mulX64(lo, hi)
	}
	if tail == 0 {
		return
	}
	// Ciphertext stealing, as in xtsGeneric.
	m := 16 * full
	last := m + 16
	var pp, cc [16]byte
	if !decrypt {
		xex64(bl.k1, false, x, cc[:], src[m:], lo, hi) // CC = XEX(P_m, T_m)
		lo, hi = mulX64(lo, hi)
		copy(pp[:], src[last:])
		copy(pp[tail:], cc[tail:])
		copy(dst[last:], cc[:tail])
		xex64(bl.k1, false, x, dst[m:], pp[:], lo, hi)
		return
	}
	lo2, hi2 := mulX64(lo, hi)
	xex64(bl.k1, true, x, pp[:], src[m:], lo2, hi2) // PP = XEX^-1(C_m, T_m+1)
	copy(cc[:], src[last:])
	copy(cc[tail:], pp[tail:])
	copy(dst[last:], pp[:tail])
	xex64(bl.k1, true, x, dst[m:], cc[:], lo, hi)
}
