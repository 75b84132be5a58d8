package luks

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/xtsctl/xtsctl/xts"
)

// UnlockOptions choose what Unlock tries.
type UnlockOptions struct {
	// Keyslots lists the keyslots to try, in order (cryptsetup's
	// --key-slot). Empty means every usable keyslot, by priority: "prefer"
	// first, then "normal", each in ID order; "ignore" slots are tried only
	// when listed here.
	Keyslots []int
	// Limits bound the KDF costs read from the image; nil means
	// DefaultLimits().
	Limits *Limits
}

// Unlock recovers the volume key with a passphrase: for each keyslot
// tried, the KDF (bounded by the limits), the keyslot area read from hdr
// (the header device) and decrypted, the AF merge, and the digest check.
// It returns the key and the keyslot that opened. The limits bound the
// whole call: the Argon2 work and PBKDF2 iterations of the keyslots
// already tried count against them, so a header with many keyslots just
// under the limits cannot multiply them. A keyslot above what is left is
// skipped; if no other opens, the error wraps both ErrWrongPassphrase and
// the *KDFCostError.
func (h *Header) Unlock(ctx context.Context, hdr io.ReaderAt, passphrase []byte, opt UnlockOptions) ([]byte, int, error) {
	if err := h.Supported(); err != nil {
		return nil, -1, err
	}
	lim := DefaultLimits()
	if opt.Limits != nil {
		lim = *opt.Limits
	}
	order, err := h.slotOrder(opt.Keyslots)
	if err != nil {
		return nil, -1, err
	}
	var skipped []error
	var sp spent
	for _, k := range order {
		if err := ctx.Err(); err != nil {
			return nil, -1, err
		}
		d := h.digest(k.Digest)
		err := lim.checkKDF(k.ID, k.KDF, sp)
		if err == nil {
			err = lim.checkDigest(d, sp.add(k.KDF))
		}
		if err != nil {
			if len(order) == 1 {
				return nil, -1, err
			}
			skipped = append(skipped, err)
			continue
		}
		sp = sp.add(k.KDF)
		sp.iter += uint64(d.Iterations)
		key, err := h.openSlot(hdr, k, passphrase)
		switch {
		case err == nil:
			return key, k.ID, nil
		case errors.Is(err, ErrWrongPassphrase):
			continue
		}
		return nil, -1, err
	}
	if len(skipped) > 0 {
		return nil, -1, fmt.Errorf("%w; not tried: %w", ErrWrongPassphrase, errors.Join(skipped...))
	}
	return nil, -1, ErrWrongPassphrase
}

// CheckUnlock reports, before anyone is asked for a passphrase, whether
// Unlock can open the volume at all: the volume is one this package
// decrypts (Supported), and keyslot (cryptsetup's --key-slot; nil for any)
// is in use and usable, or, with nil, some keyslot is. It returns the
// Keyslots option for Unlock: the one picked, or nil for any. Errors:
// an *UnsupportedError, a *KeyslotStateError, the keyslot's own error
// (Keyslot.Err), ErrNoKeyslot, or an *UnusableKeyslotsError.
func (h *Header) CheckUnlock(keyslot *int) ([]int, error) {
	if err := h.Supported(); err != nil {
		return nil, err
	}
	if keyslot != nil {
		k := h.Keyslot(*keyslot)
		switch {
		case k == nil:
			return nil, &KeyslotStateError{Keyslot: *keyslot, Used: h.KeyslotIDs()}
		case k.Err != nil:
			return nil, k.Err
		}
		return []int{*keyslot}, nil
	}
	var why []error
	for _, k := range h.Keyslots {
		if k.Err == nil {
			return nil, nil
		}
		why = append(why, k.Err)
	}
	if len(why) == 0 {
		return nil, ErrNoKeyslot
	}
	return nil, &UnusableKeyslotsError{Errs: why}
}

// slotOrder returns the keyslots to try.
func (h *Header) slotOrder(pick []int) ([]*Keyslot, error) {
	var out []*Keyslot
	if len(pick) > 0 {
		for _, id := range pick {
			k := h.Keyslot(id)
			if k == nil {
				return nil, fmt.Errorf("keyslot %d is not active", id)
			}
			if k.Err != nil {
				return nil, k.Err
			}
			out = append(out, k)
		}
		return out, nil
	}
	var unusable []error
	for i := range h.Keyslots {
		k := &h.Keyslots[i]
		switch {
		case k.Err != nil:
			unusable = append(unusable, k.Err)
		case k.Priority != PriorityIgnore:
			out = append(out, k)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Priority > out[j].Priority })
	if len(out) == 0 {
		if len(unusable) > 0 {
			return nil, fmt.Errorf("no keyslot this package can use: %w", errors.Join(unusable...))
		}
		return nil, errors.New("no active keyslot (a keyslot with priority \"ignore\" is tried only when picked)")
	}
	return out, nil
}

// openSlot tries one keyslot. It returns ErrWrongPassphrase if the key
// it yields does not match the digest.
func (h *Header) openSlot(hdr io.ReaderAt, k *Keyslot, passphrase []byte) ([]byte, error) {
	d := h.digest(k.Digest)
	dk, err := k.KDF.derive(passphrase, k.Area.KeySize)
	if err != nil {
		return nil, fmt.Errorf("keyslot %d: %w", k.ID, err)
	}
	defer clear(dk)
	mat := make([]byte, afMaterialSize(k.KeySize, k.AF.Stripes))
	defer clear(mat)
	if err := readFull(hdr, mat, int64(k.Area.Offset)); err != nil {
		return nil, fmt.Errorf("keyslot %d: %w", k.ID, err)
	}
	if err := decryptArea(dk, mat); err != nil {
		return nil, fmt.Errorf("keyslot %d: %w", k.ID, err)
	}
	key := make([]byte, k.KeySize)
	afMerge(key, mat, k.AF.Stripes, hashByName(k.AF.Hash))
	ok, err := d.matches(key)
	if err != nil || !ok {
		clear(key)
		if err == nil {
			err = ErrWrongPassphrase
		}
		return nil, err
	}
	return key, nil
}

// decryptArea decrypts keyslot material in place: aes-xts-plain64 in
// 512-byte sectors numbered from 0 at the start of the area. (The area is
// far below 2^32 sectors, so aes-xts-plain is the same.)
func decryptArea(key, mat []byte) error {
	c, err := xts.NewCipher(key)
	if err != nil {
		return err
	}
	defer c.Wipe()
	c.DecryptSectors(mat, mat, 512, 0, 1)
	return nil
}

func (l Limits) checkDigest(d *Digest, sp spent) error {
	if sp.iter+uint64(d.Iterations) > l.MaxIterations {
		return &KDFCostError{Keyslot: -1, KDF: "pbkdf2-" + d.Hash, Cost: "iterations", Value: uint64(d.Iterations),
			Limit: l.MaxIterations, Spent: sp.iter}
	}
	return nil
}

// matches checks key against the digest in constant time.
func (d *Digest) matches(key []byte) (bool, error) {
	h := hashByName(d.Hash)
	if h == nil {
		return false, unsupported(FeatureHash, d.Hash, supportedHashes)
	}
	got, err := pbkdf2Key(h, key, d.Salt, int(d.Iterations), len(d.Value))
	if err != nil {
		return false, err
	}
	return subtle.ConstantTimeCompare(got, d.Value) == 1, nil
}

// VerifyKey reports whether key is the volume key: it checks it against
// the data segment's digest, without any keyslot. It returns
// ErrWrongPassphrase (the key did not match) or another error.
func (h *Header) VerifyKey(key []byte, limits *Limits) error {
	lim := DefaultLimits()
	if limits != nil {
		lim = *limits
	}
	d := segmentDigest(h.Digests, h.Segment.ID)
	if d == nil {
		return corrupt("header", "no digest for the data segment")
	}
	if err := h.checkKeyLen(key); err != nil {
		return fmt.Errorf("%w: %w", err, ErrWrongPassphrase)
	}
	if err := lim.checkDigest(d, spent{}); err != nil {
		return err
	}
	ok, err := d.matches(key)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("volume key does not match the digest: %w", ErrWrongPassphrase)
	}
	return nil
}
