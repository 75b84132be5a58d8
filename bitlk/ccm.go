package bitlk

import (
	"crypto/cipher"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"fmt"
)

// ccm is AES-CCM, counter mode with CBC-MAC (NIST SP 800-38C, RFC 3610),
// as a cipher.AEAD: Seal appends the tag to the ciphertext, Open takes
// them in that order. BitLocker wraps every key with it (12-byte nonce,
// 16-byte tag, no associated data); golang.org/x/crypto has no CCM.
type ccm struct {
	b         cipher.Block
	nonceSize int
	tagSize   int
}

var _ cipher.AEAD = (*ccm)(nil)

// errCCMOpen: the tag does not match (wrong key or changed data).
var errCCMOpen = errors.New("ccm: message authentication failed")

// newCCM returns CCM over b (a 16-byte block cipher) with nonces of
// nonceSize bytes (7 to 13) and tags of tagSize bytes (4 to 16, even), the
// parameters SP 800-38C allows.
func newCCM(b cipher.Block, nonceSize, tagSize int) (*ccm, error) {
	if b.BlockSize() != 16 {
		return nil, errors.New("ccm: the block cipher must have 16-byte blocks")
	}
	if nonceSize < 7 || nonceSize > 13 {
		return nil, fmt.Errorf("ccm: nonce of %d bytes (want 7 to 13)", nonceSize)
	}
	if tagSize < 4 || tagSize > 16 || tagSize%2 != 0 {
		return nil, fmt.Errorf("ccm: tag of %d bytes (want 4, 6, ..., 16)", tagSize)
	}
	return &ccm{b: b, nonceSize: nonceSize, tagSize: tagSize}, nil
}

func (c *ccm) NonceSize() int { return c.nonceSize }
func (c *ccm) Overhead() int  { return c.tagSize }

// lenSize is L, the bytes that encode the message length (and the counter).
func (c *ccm) lenSize() int { return 15 - c.nonceSize }

// maxLen is the longest message L bytes can encode.
func (c *ccm) maxLen() uint64 {
	if l := c.lenSize(); l < 8 {
		return 1<<(8*uint(l)) - 1
	}
	return 1<<64 - 1
}

// cbcMAC runs the CBC-MAC over a stream of bytes, 16 at a time.
type cbcMAC struct {
	b   cipher.Block
	x   [16]byte
	buf [16]byte
	n   int
}

func (m *cbcMAC) write(p []byte) {
	for len(p) > 0 {
		k := copy(m.buf[m.n:], p)
		m.n += k
		p = p[k:]
		if m.n == 16 {
			subtle.XORBytes(m.x[:], m.x[:], m.buf[:])
			m.b.Encrypt(m.x[:], m.x[:])
			m.n = 0
		}
	}
}

// pad ends a field: a partial block is completed with zeros.
func (m *cbcMAC) pad() {
	if m.n > 0 {
		clear(m.buf[m.n:])
		m.write(m.buf[m.n:])
	}
}

// tag computes T, the unencrypted MAC of plaintext and ad (SP 800-38C
// A.2: B0 with the flags, nonce and length; the encoded associated data;
// the plaintext; each zero-padded to whole blocks).
func (c *ccm) tag(nonce, plaintext, ad []byte) [16]byte {
	m := cbcMAC{b: c.b}
	defer clear(m.buf[:]) // the plaintext's last partial block: a key datum's last bytes
	var b0 [16]byte
	b0[0] = byte((c.tagSize-2)/2<<3 | (c.lenSize() - 1))
	if len(ad) > 0 {
		b0[0] |= 0x40
	}
	copy(b0[1:], nonce)
	putLen(b0[1+c.nonceSize:], uint64(len(plaintext)))
	m.write(b0[:])
	if len(ad) > 0 {
		var enc [10]byte
		switch n := uint64(len(ad)); {
		case n < 1<<16-1<<8:
			binary.BigEndian.PutUint16(enc[:], uint16(n))
			m.write(enc[:2])
		case n <= 1<<32-1:
			enc[0], enc[1] = 0xff, 0xfe
			binary.BigEndian.PutUint32(enc[2:], uint32(n))
			m.write(enc[:6])
		default:
			enc[0], enc[1] = 0xff, 0xff
			binary.BigEndian.PutUint64(enc[2:], n)
			m.write(enc[:10])
		}
		m.write(ad)
		m.pad()
	}
	m.write(plaintext)
	m.pad()
	return m.x
}

// putLen writes v big-endian into all of b.
func putLen(b []byte, v uint64) {
	for i := len(b) - 1; i >= 0; i-- {
		b[i] = byte(v)
		v >>= 8
	}
}

// counterBlock is A_i: the flags (L-1), the nonce and i.
func (c *ccm) counterBlock(a *[16]byte, nonce []byte, i uint64) {
	a[0] = byte(c.lenSize() - 1)
	copy(a[1:], nonce)
	putLen(a[1+c.nonceSize:], i)
}

// ctr XORs src with the key stream S_1, S_2, ... into dst.
func (c *ccm) ctr(dst, src, nonce []byte) {
	var a, s [16]byte
	for i := uint64(1); len(src) > 0; i++ {
		c.counterBlock(&a, nonce, i)
		c.b.Encrypt(s[:], a[:])
		n := subtle.XORBytes(dst, src, s[:])
		dst, src = dst[n:], src[n:]
	}
	clear(s[:])
}

// tagMask returns S_0, which encrypts the tag.
func (c *ccm) tagMask(nonce []byte) [16]byte {
	var a, s [16]byte
	c.counterBlock(&a, nonce, 0)
	c.b.Encrypt(s[:], a[:])
	return s
}

func (c *ccm) check(nonce []byte, n int) {
	if len(nonce) != c.nonceSize {
		panic("ccm: incorrect nonce length given to CCM")
	}
	if uint64(n) > c.maxLen() {
		panic("ccm: message too long for the nonce size")
	}
}

// Seal encrypts and authenticates plaintext and ad, appending
// ciphertext || tag to dst.
func (c *ccm) Seal(dst, nonce, plaintext, ad []byte) []byte {
	c.check(nonce, len(plaintext))
	t := c.tag(nonce, plaintext, ad)
	s0 := c.tagMask(nonce)
	ret, out := sliceForAppend(dst, len(plaintext)+c.tagSize)
	c.ctr(out, plaintext, nonce)
	subtle.XORBytes(out[len(plaintext):], t[:c.tagSize], s0[:c.tagSize])
	return ret
}

// Open authenticates and decrypts ciphertext || tag, appending the
// plaintext to dst. It returns errCCMOpen, and no plaintext, if the tag
// does not match.
func (c *ccm) Open(dst, nonce, ciphertext, ad []byte) ([]byte, error) {
	if len(nonce) != c.nonceSize {
		panic("ccm: incorrect nonce length given to CCM")
	}
	if len(ciphertext) < c.tagSize || uint64(len(ciphertext)-c.tagSize) > c.maxLen() {
		return nil, errCCMOpen
	}
	n := len(ciphertext) - c.tagSize
	ret, out := sliceForAppend(dst, n)
	c.ctr(out, ciphertext[:n], nonce)
	t := c.tag(nonce, out, ad)
	s0 := c.tagMask(nonce)
	subtle.XORBytes(t[:c.tagSize], t[:c.tagSize], s0[:c.tagSize])
	if subtle.ConstantTimeCompare(t[:c.tagSize], ciphertext[n:]) != 1 {
		clear(out)
		return nil, errCCMOpen
	}
	return ret, nil
}

// sliceForAppend extends in by n bytes, returning the whole slice and
// the new part (as crypto/cipher does).
func sliceForAppend(in []byte, n int) (head, tail []byte) {
	if total := len(in) + n; cap(in) >= total {
		head = in[:total]
	} else {
		head = make([]byte, total)
		copy(head, in)
	}
	return head, head[len(in):]
}
