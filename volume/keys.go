package volume

import (
	"crypto/rand"
	"crypto/subtle"
	"errors"

	"github.com/xtsctl/xtsctl/blake2b"
	"github.com/xtsctl/xtsctl/internal/secret"
	"golang.org/x/crypto/chacha20poly1305"
)

// The master key is the XTS key of the data area itself (what dm-crypt is
// given, what info --dm-table --show-key prints). Everything else is keyed
// with subkeys derived from it with keyed BLAKE2b over a label naming the
// purpose (docs/FORMAT.md, "Keys"), so that no two uses share a key.
const (
	purposeTags   = "xtsctl volume v1: sector tags"
	purposeMAC    = "xtsctl volume v1: header mac"
	purposeDigest = "xtsctl volume v1: digest"
	// Version 2: the state area.
	purposeStateRecords = "xtsctl volume v2: state records"
	purposeBitmap       = "xtsctl volume v2: dirty-region bitmap"
)

// deriveKey returns BLAKE2b-size keyed with the master key over purpose.
// The caller wipes it. SumKeyed keeps no copy of the master key.
func deriveKey(master []byte, purpose string, size int) []byte {
	key := make([]byte, size)
	blake2b.SumKeyed(key, master, []byte(purpose))
	return key
}

// computeMAC authenticates the header fields under the master key.
func (h *Header) computeMAC(master []byte) ([macSize]byte, error) {
	in, err := h.macInput()
	if err != nil {
		return [macSize]byte{}, err
	}
	key := deriveKey(master, purposeMAC, 64)
	var mac [macSize]byte
	blake2b.SumKeyed(mac[:], key, in)
	clear(key)
	return mac, nil
}

// ErrHeaderMAC: the header does not authenticate under the unlocked master
// key. Either its fields were changed by something other than xtsctl, or
// the key slot belongs with a different header.
var ErrHeaderMAC = errors.New("header authentication failed: its fields were modified, or it does not belong to this key slot")

func (h *Header) checkMAC(master []byte) error {
	mac, err := h.computeMAC(master)
	if err != nil {
		return err
	}
	if subtle.ConstantTimeCompare(mac[:], h.MAC[:]) != 1 {
		return ErrHeaderMAC
	}
	return nil
}

// SealedDigestSize is the size of the encrypted digest field: XChaCha20-
// Poly1305 nonce, BLAKE2b-512 digest, Poly1305 tag.
const SealedDigestSize = chacha20poly1305.NonceSizeX + blake2b.Size + chacha20poly1305.Overhead

func digestAEAD(master []byte) (aeadCipher, func()) {
	key := deriveKey(master, purposeDigest, chacha20poly1305.KeySize)
	a, err := chacha20poly1305.NewX(key)
	clear(key)
	if err != nil {
		panic("volume: " + err.Error())
	}
	return a, func() { secret.WipeObject(a) }
}

type aeadCipher interface {
	Seal(dst, nonce, plaintext, additionalData []byte) []byte
	Open(dst, nonce, ciphertext, additionalData []byte) ([]byte, error)
}

// sealDigest stores the plaintext digest, encrypted (a digest of the
// plaintext in the clear would tell whether the volume holds a known image).
func (h *Header) sealDigest(master []byte, digest *[blake2b.Size]byte) error {
	var stack secret.Stack
	stack.Reserve()
	defer stack.Burn()
	a, wipe := digestAEAD(master)
	defer wipe()
	nonce := h.SealedDigest[:chacha20poly1305.NonceSizeX]
	if _, err := rand.Read(nonce); err != nil {
		return err
	}
	a.Seal(h.SealedDigest[len(nonce):len(nonce)], nonce, digest[:], h.UUID[:])
	h.Flags |= FlagDigest
	return nil
}

// openDigest returns the recorded plaintext digest, or ok false if none.
func (h *Header) openDigest(master []byte) (digest [blake2b.Size]byte, ok bool, err error) {
	if h.Flags&FlagDigest == 0 {
		return digest, false, nil
	}
	var stack secret.Stack
	stack.Reserve()
	defer stack.Burn()
	a, wipe := digestAEAD(master)
	defer wipe()
	n := chacha20poly1305.NonceSizeX
	if _, err := a.Open(digest[:0], h.SealedDigest[:n], h.SealedDigest[n:], h.UUID[:]); err != nil {
		return digest, false, errors.New("the recorded digest does not decrypt: header damaged")
	}
	return digest, true, nil
}
