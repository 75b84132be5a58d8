// Package aesni is xtsctl's AES-XTS engine (IEEE 1619 XTS-AES-128 and
// XTS-AES-256, with ciphertext stealing).
//
// A Cipher holds the expanded key schedules of one XTS key. Each call
// encrypts or decrypts whole data units with one direct call into an
// assembly kernel (AES-NI on xmm, VAES on ymm or zmm; see Impl), chosen
// once at start-up: from the per-CPU table in internal/cpuid where it has
// a row for this CPU, else from the CPU's features (timing the two zmm
// kernels against each other where both run); the VAES kernels then
// switch on the data-unit length, so that units shorter than one vector
// skip the wide set-up. The per-block path never makes an indirect call.
// DispatchTable, DispatchSource and PrefersYMM report the choice.
//
// Where no kernel runs (other GOARCHes, the purego build tag, CPUs without
// AES-NI) the portable path (portable.go) does XTS over crypto/aes blocks,
// which use the CPU's AES instructions where the standard library has
// them (arm64, s390x, ppc64le). The pure-Go reference in xts_generic.go,
// byte by byte as the standards write it, is the oracle every path is
// tested against.
//
// This package checks only what it needs for memory safety; callers (package
// xts) validate user-facing arguments and give the error messages.
package aesni

import (
	"errors"
	"fmt"
	"unsafe"
)

// BlockSize is the AES block size in bytes.
const BlockSize = 16

// maxRounds is the number of rounds of AES-256; schedules are sized for it.
const maxRounds = 14

// schedule holds round keys 0..rounds, 16 bytes each, in the byte order
// AESENC and AESDEC consume them.
type schedule [(maxRounds + 1) * BlockSize]byte

// Cipher is an expanded XTS key: key1 (data) and key2 (tweak).
// The zero value is not usable; call Init.
type Cipher struct {
	rounds int      // 10 (XTS-AES-128) or 14 (XTS-AES-256)
	enc    schedule // key1, encryption schedule
	dec    schedule // key1, decryption schedule (equivalent inverse cipher, for AESDEC)
	tweak  schedule // key2, encryption schedule
	blocks *blocks  // crypto/aes ciphers, where the portable path is the automatic choice
}

// Init expands key (key1 || key2, 32 or 64 bytes) into c.
func (c *Cipher) Init(key []byte) error {
	if len(key) != 32 && len(key) != 64 {
		return fmt.Errorf("aesni: invalid XTS key length %d bytes (want 32 or 64)", len(key))
	}
	half := len(key) / 2
	k1, k2 := key[:half], key[half:]
	c.rounds = 6 + half/4
	expandKey(c, k1, k2)
	c.blocks = nil
	if Pick(4096) == Portable { // the automatic choice, or forced (tests, xtsctl bench)
		c.blocks = newBlocks(c)
	}
	return nil
}

// Rounds reports the number of AES rounds: 10 for XTS-AES-128, 14 for XTS-AES-256.
func (c *Cipher) Rounds() int { return c.rounds }

// Wipe zeroes the key schedules held by c. c must not be used afterwards.
// The portable path's crypto/aes ciphers keep schedules of their own that
// cannot be zeroed: Wipe drops them, and the garbage collector frees them.
func (c *Cipher) Wipe() {
	clear(c.enc[:])
	clear(c.dec[:])
	clear(c.tweak[:])
	c.rounds = 0
	c.blocks = nil
}

var errNotInit = errors.New("aesni: Cipher used before Init")

func (c *Cipher) mustInit() {
	if c.rounds == 0 {
		panic(errNotInit)
	}
}

// Encrypt encrypts one data unit src (len(src) >= 16) into dst under the
// 128-bit tweak value. dst must be at least as long as src and either equal
// to src or not overlap it.
//
// Encrypt and Decrypt are small enough to be inlined into their callers:
// a 16-byte unit's whole cost is a few dozen cycles, and every call level
// (with its stack check and spills) lengthens the instruction stream
// between one unit's data and the next unit's tweak encryption, which
// out-of-order execution overlaps only within its window.
func (c *Cipher) Encrypt(dst, src []byte, tweak *[16]byte) {
	if c.rounds == 0 || len(src) < BlockSize || len(dst) < len(src) {
		c.badUnit(dst, src)
	}
	encryptUnit(c, unsafe.SliceData(dst), unsafe.SliceData(src), len(src), tweak)
}

// Decrypt is the inverse of Encrypt.
func (c *Cipher) Decrypt(dst, src []byte, tweak *[16]byte) {
	if c.rounds == 0 || len(src) < BlockSize || len(dst) < len(src) {
		c.badUnit(dst, src)
	}
	decryptUnit(c, unsafe.SliceData(dst), unsafe.SliceData(src), len(src), tweak)
}

// badUnit panics with the reason Encrypt or Decrypt cannot run.
//
//go:noinline
func (c *Cipher) badUnit(dst, src []byte) {
	c.mustInit()
	checkUnit(dst, src)
}

// EncryptSectors encrypts consecutive data units of unit bytes each
// (unit >= 16, len(src) a multiple of unit). Data unit i gets the dm-crypt
// plain64 tweak: little-endian uint64(sector + i*step) followed by 8 zero
// bytes.
func (c *Cipher) EncryptSectors(dst, src []byte, unit int, sector, step uint64) {
	c.mustInit()
	checkSectors(dst, src, unit)
	encryptSectors(c, dst[:len(src)], src, unit, sector, step)
}

// DecryptSectors is the inverse of EncryptSectors.
func (c *Cipher) DecryptSectors(dst, src []byte, unit int, sector, step uint64) {
	c.mustInit()
	checkSectors(dst, src, unit)
	decryptSectors(c, dst[:len(src)], src, unit, sector, step)
}

func checkUnit(dst, src []byte) {
	if len(src) < BlockSize {
		panic("aesni: data unit shorter than one block")
	}
	if len(dst) < len(src) {
		panic("aesni: output smaller than input")
	}
}

func checkSectors(dst, src []byte, unit int) {
	if unit < BlockSize {
		panic("aesni: data unit shorter than one block")
	}
	if len(src)%unit != 0 {
		panic("aesni: input is not a whole number of data units")
	}
	if len(dst) < len(src) {
		panic("aesni: output smaller than input")
	}
}
