// Package xts implements XTS-AES (IEEE 1619-2007) for disk sectors:
// XTS-AES-128 with a 32-byte key and XTS-AES-256 with a 64-byte key
// (key1 || key2), on data units of any length of 16 bytes or more, with
// ciphertext stealing when the length is not a multiple of 16.
//
// Encrypt and Decrypt take a sector number and use dm-crypt's plain64 tweak
// (the little-endian sector number followed by eight zero bytes), so their
// output is what the Linux kernel's aes-xts-plain64 puts on the disk.
// EncryptTweak and DecryptTweak take the 128-bit tweak as IEEE 1619 defines it.
//
// Threat model: XTS gives confidentiality of data at rest and nothing else.
// It has no integrity: a changed ciphertext block decrypts, without any
// error, to 16 bytes of garbage (and a changed final partial block to a
// garbled last two blocks). Equal plaintext blocks at the same position of the
// same sector give equal ciphertexts, so an observer of several versions of
// a disk sees which 16-byte blocks changed, and an attacker can put back an
// older ciphertext of a sector (replay). Use the volume format's integrity
// tags to detect modification.
//
// The work is done by package aesni: AES-NI and VAES assembly where the CPU
// has it, XTS over crypto/aes elsewhere (hardware AES on arm64, s390x and
// ppc64le).
package xts

import (
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"

	"github.com/xtsctl/xtsctl/aesni"
)

// BlockSize is the AES block size; data units must be at least this long.
const BlockSize = 16

// ErrEqualKeyHalves is returned by NewCipher for a key whose two halves,
// key1 and key2, are equal (an all-zero key among them). IEEE 1619-2018 and
// FIPS 140 require refusing such keys, as OpenSSL does: with one key for
// both, an attacker who can have a sector decrypted learns its secret tweak
// mask T = E(i) (an all-zero first ciphertext block decrypts to i XOR T).
var ErrEqualKeyHalves = errors.New("xts: the two halves of the key are equal; XTS needs two independent AES keys")

// A Cipher is an expanded XTS key. It is safe for concurrent use.
type Cipher struct {
	k aesni.Cipher
}

// NewCipher expands key, which is key1 || key2: 32 bytes for XTS-AES-128 or
// 64 bytes for XTS-AES-256. key1 encrypts the data, key2 the tweak; if
// they are equal, NewCipher returns ErrEqualKeyHalves.
func NewCipher(key []byte) (*Cipher, error) {
	if len(key) != 32 && len(key) != 64 {
		return nil, fmt.Errorf("xts: invalid key length %d bytes (want 32 for XTS-AES-128 or 64 for XTS-AES-256)", len(key))
	}
	// Constant time: how far the halves agree says something about the key.
	half := len(key) / 2
	if subtle.ConstantTimeCompare(key[:half], key[half:]) == 1 {
		return nil, ErrEqualKeyHalves
	}
	c := new(Cipher)
	if err := c.k.Init(key); err != nil {
		return nil, err
	}
	return c, nil
}

// KeySize returns the key length in bytes: 32 or 64.
func (c *Cipher) KeySize() int {
	if c.k.Rounds() == 14 {
		return 64
	}
	return 32
}

// Wipe zeroes the expanded keys. The Cipher must not be used afterwards.
func (c *Cipher) Wipe() { c.k.Wipe() }

// Encrypt encrypts src, one data unit, into dst with the plain64 tweak of
// sector. dst and src must be equal or not overlap; dst must be at least as
// long as src, and src at least 16 bytes long.
func (c *Cipher) Encrypt(dst, src []byte, sector uint64) {
	var t [16]byte
	binary.LittleEndian.PutUint64(t[:8], sector)
	c.EncryptTweak(dst, src, &t)
}

// Decrypt decrypts src, one data unit, into dst with the plain64 tweak of
// sector. The buffer rules are those of Encrypt.
func (c *Cipher) Decrypt(dst, src []byte, sector uint64) {
	var t [16]byte
	binary.LittleEndian.PutUint64(t[:8], sector)
	c.DecryptTweak(dst, src, &t)
}

// EncryptTweak encrypts src, one data unit, into dst with the given 128-bit
// tweak value (IEEE 1619's i, before it is encrypted with key2).
func (c *Cipher) EncryptTweak(dst, src []byte, tweak *[16]byte) {
	if len(src) < BlockSize || len(dst) < len(src) || inexactOverlap(dst[:len(src)], src) {
		checkBuffers(dst, src)
	}
	c.k.Encrypt(dst[:len(src)], src, tweak)
}

// DecryptTweak decrypts src, one data unit, into dst with the given tweak.
func (c *Cipher) DecryptTweak(dst, src []byte, tweak *[16]byte) {
	if len(src) < BlockSize || len(dst) < len(src) || inexactOverlap(dst[:len(src)], src) {
		checkBuffers(dst, src)
	}
	c.k.Decrypt(dst[:len(src)], src, tweak)
}

// EncryptSectors encrypts src as consecutive data units of sectorSize bytes:
// unit i gets the plain64 tweak of sector + i*step. (step is the number of
// tweak units per data unit: 1, or sectorSize/512 for dm-crypt's default of
// counting tweaks in 512-byte units.) It equals one Encrypt call per unit,
// in one call, so the kernels can overlap the units' tweak encryptions.
func (c *Cipher) EncryptSectors(dst, src []byte, sectorSize int, sector, step uint64) {
	checkSectors(dst, src, sectorSize)
	c.k.EncryptSectors(dst[:len(src)], src, sectorSize, sector, step)
}

// DecryptSectors is the inverse of EncryptSectors.
func (c *Cipher) DecryptSectors(dst, src []byte, sectorSize int, sector, step uint64) {
	checkSectors(dst, src, sectorSize)
	c.k.DecryptSectors(dst[:len(src)], src, sectorSize, sector, step)
}

// checkBuffers panics with the reason dst and src cannot be used. The
// one-unit calls test the same conditions inline and call it only then:
// at 16 bytes a unit costs a few dozen cycles, and each call level (stack
// check, spills) lengthens the instruction stream between one unit's data
// and the next unit's tweak encryption, which out-of-order execution
// overlaps only within its window.
func checkBuffers(dst, src []byte) {
	if len(src) < BlockSize {
		panic("xts: data unit shorter than 16 bytes")
	}
	if len(dst) < len(src) {
		panic("xts: output smaller than input")
	}
	if inexactOverlap(dst[:len(src)], src) {
		panic("xts: invalid buffer overlap")
	}
}

func checkSectors(dst, src []byte, sectorSize int) {
	if sectorSize < BlockSize {
		panic("xts: sector size shorter than 16 bytes")
	}
	if len(src)%sectorSize != 0 {
		panic("xts: input is not a whole number of sectors")
	}
	if len(dst) < len(src) {
		panic("xts: output smaller than input")
	}
	if inexactOverlap(dst[:len(src)], src) {
		panic("xts: invalid buffer overlap")
	}
}

// inexactOverlap reports whether x and y share memory at different offsets
// (in place, with x and y starting at the same byte, is allowed).
func inexactOverlap(x, y []byte) bool {
	if len(x) == 0 || len(y) == 0 || &x[0] == &y[0] {
		return false
	}
	x0 := uintptr(unsafe.Pointer(&x[0]))
	y0 := uintptr(unsafe.Pointer(&y[0]))
	return x0 < y0+uintptr(len(y)) && y0 < x0+uintptr(len(x))
}
