package bitlk

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/xtsctl/xtsctl/internal/secret"
)

const (
	// stretchCount is BitLocker's fixed number of SHA-256 rounds that
	// stretch a password or recovery password: a constant of the format,
	// never read from the image.
	stretchCount = 0x100000
	// stretchCheckEvery is how often (in rounds) the stretching looks at
	// its context: a few milliseconds of work.
	stretchCheckEvery = 1 << 14
	// keyDatumHeaderSize is a decrypted key's header: u16 size, u16
	// type, u16 value, u16 version, u32 method.
	keyDatumHeaderSize = 12
	vmkSize            = 32
	// methodVMK is the method of a VMK key datum and of a clear key.
	methodVMK = 0x2000
	// maxBEK bounds a startup key file: Windows writes 156 to 180 bytes.
	maxBEK = 64 << 10
)

// stretch runs BitLocker's key stretching: a state of last hash, initial
// hash, salt and a 64-bit counter, hashed stretchCount times. It stops
// with ctx.Err() when ctx is cancelled.
func stretch(ctx context.Context, initial *[32]byte, salt *[16]byte) (*[32]byte, error) {
	var state [32 + 32 + 16 + 8]byte
	defer clear(state[:])
	copy(state[32:], initial[:])
	copy(state[64:], salt[:])
	for i := range uint64(stretchCount) {
		if i%stretchCheckEvery == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		binary.LittleEndian.PutUint64(state[80:], i)
		h := sha256.Sum256(state[:])
		copy(state[:32], h[:])
	}
	out := new([32]byte)
	copy(out[:], state[:32])
	return out, nil
}

// passwordHash is the initial hash of a user password: SHA-256 twice of
// the password as UTF-16LE code units, as Windows hashes it (no
// terminator; characters outside the BMP as surrogate pairs). The
// password is UTF-8 text.
func passwordHash(password []byte) (*[32]byte, error) {
	if !utf8.Valid(password) {
		return nil, errors.New("the password is not valid UTF-8 text (BitLocker passwords are Unicode)")
	}
	// Room for the worst case (every byte a unit, or every 4 bytes two),
	// so that no copy of the secret is left behind by a reallocation.
	units := make([]uint16, 0, len(password))
	for len(password) > 0 {
		r, n := utf8.DecodeRune(password)
		password = password[n:]
		if r1, r2 := utf16.EncodeRune(r); r1 != 0xfffd || r2 != 0xfffd {
			units = append(units, uint16(r1), uint16(r2))
		} else {
			units = append(units, uint16(r))
		}
	}
	b := make([]byte, 2*len(units))
	for i, u := range units {
		binary.LittleEndian.PutUint16(b[2*i:], u)
	}
	clear(units)
	h := sha256.Sum256(b)
	clear(b)
	out := new([32]byte)
	*out = sha256.Sum256(h[:])
	clear(h[:])
	return out, nil
}

// recoveryKey parses a recovery password: 8 groups of 6 digits, joined
// by '-' (as Windows shows it) or not at all; one trailing newline is
// ignored. Each group is a multiple of 11 whose quotient fits 16 bits;
// the quotients, little-endian, are the 16-byte key. ok is false when s
// does not have the shape at all; err says which group is wrong when it
// has the shape but not the checksum.
func recoveryKey(s []byte) (key *[16]byte, ok bool, err error) {
	s = bytes.TrimSuffix(s, []byte("\n"))
	s = bytes.TrimSuffix(s, []byte("\r"))
	var step int
	switch len(s) {
	case 55:
		step = 7
	case 48:
		step = 6
	default:
		return nil, false, nil
	}
	for i, c := range s {
		if step == 7 && i%7 == 6 {
			if c != '-' {
				return nil, false, nil
			}
		} else if c < '0' || c > '9' {
			return nil, false, nil
		}
	}
	key = new([16]byte)
	for g := range 8 {
		n := 0
		for _, c := range s[g*step : g*step+6] {
			n = n*10 + int(c-'0')
		}
		if n%11 != 0 || n/11 > 0xffff {
			clear(key[:])
			return nil, true, fmt.Errorf("group %d of the recovery password is not valid (each group is a multiple of 11 below 720896)", g+1)
		}
		binary.LittleEndian.PutUint16(key[2*g:], uint16(n/11))
	}
	return key, true, nil
}

// recoveryHash is the initial hash of a recovery password's key.
func recoveryHash(key *[16]byte) *[32]byte {
	out := new([32]byte)
	*out = sha256.Sum256(key[:])
	return out
}

// openKeyDatum decrypts b with key (AES-256-CCM) and checks the key
// datum inside: its size is the ciphertext's, it is a key (value 1).
// It returns the method and the key bytes; errCCMOpen if the tag fails.
func openKeyDatum(key []byte, b *ccmBlob) (method uint32, keyBytes []byte, err error) {
	pt, err := openCCM(key, b)
	if err != nil {
		return 0, nil, err
	}
	le := binary.LittleEndian
	if len(pt) < keyDatumHeaderSize || int(le.Uint16(pt)) != len(pt) || le.Uint16(pt[4:]) != valueKey {
		clear(pt)
		return 0, nil, errors.New("the decrypted datum is not a key")
	}
	return le.Uint32(pt[8:]), pt[keyDatumHeaderSize:], nil
}

// openCCM decrypts and authenticates an AES-CCM blob with a 32-byte key.
func openCCM(key []byte, b *ccmBlob) ([]byte, error) {
	blk, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	defer secret.WipeObject(blk) // crypto/aes has no call for it
	c, err := newCCM(blk, ccmNonceSize, ccmTagSize)
	if err != nil {
		return nil, err
	}
	in := make([]byte, 0, len(b.ct)+ccmTagSize)
	in = append(append(in, b.ct...), b.tag[:]...)
	return c.Open(in[:0], b.nonce[:], in, nil)
}

// openVMK decrypts a protector's VMK with the key its secret gave.
func openVMK(key []byte, p *protector) ([]byte, error) {
	// The datum's method (0x2000 in every image seen) is not checked:
	// the tag already vouches for the datum.
	_, k, err := openKeyDatum(key, p.encVMK)
	if err != nil {
		return nil, err
	}
	if len(k) != vmkSize {
		clear(k)
		return nil, fmt.Errorf("the VMK of %s has %d bytes (want %d)", p, len(k), vmkSize)
	}
	return k, nil
}

// A startupKey is a .BEK file: the external key that opens the
// protector with the file's GUID.
type startupKey struct {
	guid       guid // the protector it opens
	volumeGUID *guid
	key        []byte
}

// parseBEK reads a startup key file: a 48-byte header like the
// metadata's, then an external key entry holding the key.
func parseBEK(b []byte) (*startupKey, error) {
	le := binary.LittleEndian
	if len(b) < metaHeaderSize || len(b) > maxBEK {
		return nil, fmt.Errorf("a file of %d bytes is not a startup key (.BEK)", len(b))
	}
	size := int(le.Uint32(b))
	if size < metaHeaderSize || size > len(b) || le.Uint32(b[4:]) != 1 || le.Uint32(b[8:]) != metaHeaderSize || le.Uint32(b[12:]) != uint32(size) {
		return nil, errors.New("the file is not a startup key (.BEK): its header does not describe it")
	}
	sk := &startupKey{}
	copy(sk.guid[:], b[16:])
	entries, err := parseEntries(b[metaHeaderSize:size])
	if err != nil {
		return nil, fmt.Errorf("startup key: %w", err)
	}
	for _, e := range entries {
		if e.typ != entryStartupKey || e.value != valueExternalKey {
			continue
		}
		nested, err := parseNested(e, extKeyHeaderSize, "external key")
		if err != nil {
			return nil, fmt.Errorf("startup key: %w", err)
		}
		for _, n := range nested {
			switch {
			case n.value == valueKey && len(n.data) >= keyHeaderSize && sk.key == nil:
				sk.key = n.data[keyHeaderSize:]
			case n.typ == entryVolumeGUID && n.value == valueGUID && len(n.data) >= 16:
				g := guid(n.data[:16])
				sk.volumeGUID = &g
			}
		}
		break
	}
	if len(sk.key) != vmkSize {
		return nil, fmt.Errorf("the startup key file holds no %d-byte key", vmkSize)
	}
	return sk, nil
}
