package luks

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/xtsctl/xtsctl/internal/dmtable"
	"github.com/xtsctl/xtsctl/xts"
)

// UnlockOptions choose what Unlock tries.
type UnlockOptions struct {
	// Keyslots lists the keyslots to try, in order (cryptsetup's
	// --key-slot). Empty means every keyslot that holds the data segment's
	// key, as cryptsetup tries them: those with priority "prefer" first,
	// then "normal", each in the order of the header's JSON area (LUKS1:
	// by number); "ignore" keyslots are tried only when listed here.
	Keyslots []int
	// Limits bound the KDF costs read from the image; nil means
	// DefaultLimits().
	Limits *Limits
}

// Unlock recovers the volume key with a passphrase: for each keyslot
// tried, the KDF (bounded by the limits), the keyslot area read from hdr
// (the header device) and decrypted, the AF merge, and the digest check.
// It returns the key and the keyslot that opened. It refuses a volume this
// package cannot decrypt (Supported) before running any KDF.
//
// The keyslots are tried as cryptsetup tries them: one that is of another
// type, or holds the key of another segment, is passed over; one that
// cannot be used for another reason (an unknown KDF, a damaged salt or
// digest) ends the search with a *KeyslotStopError, as it ends
// cryptsetup's, so that a passphrase opens here what it opens there.
//
// The limits bound the whole call: the Argon2 work and PBKDF2 iterations
// of the keyslots already tried count against them, so a header with many
// keyslots just under the limits cannot multiply them. A keyslot above
// what is left is skipped; if no other opens, the error wraps both
// ErrWrongPassphrase and the *KDFCostError.
func (h *Header) Unlock(ctx context.Context, hdr io.ReaderAt, passphrase []byte, opt UnlockOptions) ([]byte, int, error) {
	if err := h.Supported(); err != nil {
		return nil, -1, err
	}
	k, key, err := h.unlock(ctx, hdr, passphrase, opt, false)
	if err != nil {
		return nil, -1, err
	}
	return key, k.ID, nil
}

// PassphraseCheck is what TestPassphrase found.
type PassphraseCheck struct {
	Keyslot int    // the keyslot the passphrase opens
	Key     []byte // the key that keyslot holds, checked against its digest; Wipe erases it
	// Unservable says why this package cannot decrypt the data with the
	// key, nil when it can: an *UnsupportedError, from Supported, or with
	// FeatureUnboundKey when the keyslot's key opens no data segment.
	Unservable error
}

// Wipe erases the key.
func (c *PassphraseCheck) Wipe() {
	if c != nil {
		clear(c.Key)
	}
}

// TestPassphrase checks a passphrase as cryptsetup open --test-passphrase
// does: it needs only the keyslot and its digest, so it runs on headers
// whose data this package cannot serve (another cipher or sector size, an
// unknown mandatory requirement, dm-integrity, several segments) and, with
// the keyslot picked in opt.Keyslots, on an unbound keyslot (cryptsetup's
// luksAddKey --unbound). Without a pick it tries the keyslots Unlock
// tries. On success the check says which keyslot opened and, in
// Unservable, what then keeps the data from being served. The errors are
// Unlock's, without the refusal of what Supported refuses.
func (h *Header) TestPassphrase(ctx context.Context, hdr io.ReaderAt, passphrase []byte, opt UnlockOptions) (*PassphraseCheck, error) {
	k, key, err := h.unlock(ctx, hdr, passphrase, opt, true)
	if err != nil {
		return nil, err
	}
	c := &PassphraseCheck{Keyslot: k.ID, Key: key}
	if c.Unservable = h.Supported(); c.Unservable == nil {
		c.Unservable = h.segmentProblem(k, h.segmentDigest(h.Segment.ID))
	}
	return c, nil
}

// anyDigest, as the digest a keyslot must have, lets it have any (or
// none).
const anyDigest = -2

// unlock tries keyslots. test lets a picked keyslot hold the key of any
// segment, or of none (cryptsetup checks a picked keyslot so when it only
// tests the passphrase); and while an online reencryption is in progress,
// a test needs, as cryptsetup's, the passphrase to open both the old key
// and the new.
func (h *Header) unlock(ctx context.Context, hdr io.ReaderAt, passphrase []byte, opt UnlockOptions, test bool) (*Keyslot, []byte, error) {
	if !test {
		return h.unlockDigest(ctx, hdr, passphrase, opt, h.segmentDigest(h.Segment.ID))
	}
	targets := h.testTargets(len(opt.Keyslots) > 0)
	if len(targets) == 0 {
		return nil, nil, &UnusableKeyslotsError{Errs: []error{errors.New("no segment has a key digest")}}
	}
	var k *Keyslot
	var key []byte
	for _, want := range targets {
		clear(key)
		var err error
		if k, key, err = h.unlockDigest(ctx, hdr, passphrase, opt, want); err != nil {
			return nil, nil, err
		}
	}
	return k, key, nil
}

// testTargets returns the digests a passphrase test must open a keyslot
// of, in order: with a reencryption in progress, the old key's and the new
// key's (LUKS2_keyslot_open_all_segments); else the data segment's, or
// any with a keyslot picked.
func (h *Header) testTargets(picked bool) []int {
	if h.meta != nil && onlineReencrypt(h.Requirements) {
		var out []int
		for _, flag := range []string{"backup-previous", "backup-final"} {
			for _, m := range h.meta.get("segments").obj {
				if hasFlag(m.val, flag) {
					if d := h.segmentDigest(atoi(m.key)); d >= 0 && (len(out) == 0 || out[0] != d) {
						out = append(out, d)
					}
					break
				}
			}
		}
		return out
	}
	if picked {
		return []int{anyDigest}
	}
	return []int{h.segmentDigest(h.Segment.ID)}
}

// unlockDigest tries keyslots for the key digest want checks.
func (h *Header) unlockDigest(ctx context.Context, hdr io.ReaderAt, passphrase []byte, opt UnlockOptions, want int) (*Keyslot, []byte, error) {
	lim := DefaultLimits()
	if opt.Limits != nil {
		lim = *opt.Limits
	}
	picked := len(opt.Keyslots) > 0
	order, err := h.tryOrder(opt.Keyslots)
	if err != nil {
		return nil, nil, err
	}
	var skipped, passed []error
	var sp spent
	for i, k := range order {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		if err, skip := h.slotProblem(k, want); err != nil {
			switch {
			case picked:
				return nil, nil, err
			case skip:
				passed = append(passed, err)
				continue
			}
			return nil, nil, stopAt(order, i, err, len(passed) == i && len(skipped) == 0, passed)
		}
		d := h.digest(k.Digest)
		err := lim.checkKDF(k.ID, k.KDF, sp)
		if err == nil {
			err = lim.checkDigest(d, sp.add(k.KDF))
		}
		if err != nil {
			if len(order) == 1 {
				return nil, nil, err
			}
			skipped = append(skipped, err)
			continue
		}
		sp = sp.add(k.KDF)
		sp.iter += uint64(d.Iterations)
		key, err := h.openSlot(hdr, k, passphrase)
		switch {
		case err == nil:
			return k, key, nil
		case errors.Is(err, ErrWrongPassphrase):
			continue
		}
		return nil, nil, err
	}
	if len(skipped) > 0 {
		return nil, nil, fmt.Errorf("%w; not tried: %w", ErrWrongPassphrase, errors.Join(skipped...))
	}
	if len(passed) == len(order) && len(passed) > 0 {
		// No keyslot could be tried at all: cryptsetup's "No usable
		// keyslot is available".
		return nil, nil, &UnusableKeyslotsError{Errs: passed}
	}
	return nil, nil, ErrWrongPassphrase
}

func ids(ks []*Keyslot) []int {
	out := make([]int, 0, len(ks))
	for _, k := range ks {
		out = append(out, k.ID)
	}
	return out
}

// CheckUnlock reports, before anyone is asked for a passphrase, whether
// Unlock can open the volume at all: the volume is one this package
// decrypts (Supported), and keyslot (cryptsetup's --key-slot; nil for any)
// is in use and usable, or, with nil, some keyslot can be tried before one
// that stops the search. It returns the Keyslots option for Unlock: the
// one picked, or nil for any. Errors: an *UnsupportedError, a
// *KeyslotStateError, the keyslot's own error (Keyslot.Err), a
// *KeyslotStopError, ErrNoKeyslot, or an *UnusableKeyslotsError.
func (h *Header) CheckUnlock(keyslot *int) ([]int, error) {
	if err := h.Supported(); err != nil {
		return nil, err
	}
	return h.checkUnlock(keyslot, false)
}

// CheckTestPassphrase is CheckUnlock for TestPassphrase: what keeps the
// data from being served is no reason to refuse, and a picked keyslot may
// hold the key of any segment, or of none.
func (h *Header) CheckTestPassphrase(keyslot *int) ([]int, error) {
	return h.checkUnlock(keyslot, true)
}

func (h *Header) checkUnlock(keyslot *int, test bool) ([]int, error) {
	targets := []int{h.segmentDigest(h.Segment.ID)}
	if test {
		targets = h.testTargets(keyslot != nil)
	}
	if keyslot != nil {
		k := h.Keyslot(*keyslot)
		if k == nil {
			return nil, &KeyslotStateError{Keyslot: *keyslot, Used: h.KeyslotIDs()}
		}
		for _, want := range targets {
			if err, _ := h.slotProblem(k, want); err != nil {
				return nil, err
			}
		}
		return []int{*keyslot}, nil
	}
	if len(h.Keyslots) == 0 {
		return nil, ErrNoKeyslot
	}
	order, err := h.tryOrder(nil)
	if err != nil {
		return nil, err
	}
	for _, want := range targets {
		if err := h.checkAny(order, want); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

// checkAny reports whether trying order for the key digest want checks
// can open: some keyslot can be tried before one that stops the search.
func (h *Header) checkAny(order []*Keyslot, want int) error {
	var passed []error
	for i, k := range order {
		err, skip := h.slotProblem(k, want)
		switch {
		case err == nil:
			return nil
		case !skip:
			return stopAt(order, i, err, true, passed)
		}
		passed = append(passed, err)
	}
	return &UnusableKeyslotsError{Errs: passed}
}

// stopAt is the error of a search that stopped at order[i] with err.
// When nothing was tried before it (none) and nothing is left after it,
// no keyslot could be used at all: an *UnusableKeyslotsError with the
// reasons (passed, for the keyslots before). Otherwise a
// *KeyslotStopError names the keyslots left untried.
func stopAt(order []*Keyslot, i int, err error, none bool, passed []error) error {
	if none && i == len(order)-1 {
		return &UnusableKeyslotsError{Errs: append(passed, err)}
	}
	return &KeyslotStopError{Keyslot: order[i].ID, Err: err, Untried: ids(order[i+1:])}
}

// tryOrder returns the keyslots to try: the ones picked, or cryptsetup's
// order (LUKS2_keyslot_open_priority: "prefer", then "normal", each in the
// order of the JSON area; other priorities only when picked).
func (h *Header) tryOrder(pick []int) ([]*Keyslot, error) {
	var out []*Keyslot
	if len(pick) > 0 {
		for _, id := range pick {
			k := h.Keyslot(id)
			if k == nil {
				return nil, &KeyslotStateError{Keyslot: id, Used: h.KeyslotIDs()}
			}
			out = append(out, k)
		}
		return out, nil
	}
	var ignored []error
	for _, prio := range []Priority{PriorityPrefer, PriorityNormal} {
		var pass []*Keyslot
		for i := range h.Keyslots {
			if k := &h.Keyslots[i]; k.Priority == prio {
				pass = append(pass, k)
			}
		}
		sort.SliceStable(pass, func(i, j int) bool { return pass[i].pos < pass[j].pos })
		out = append(out, pass...)
	}
	for _, k := range h.Keyslots {
		if k.Priority != PriorityPrefer && k.Priority != PriorityNormal {
			ignored = append(ignored, fmt.Errorf("keyslot %d has priority %s: it is tried only when picked", k.ID, k.Priority))
		}
	}
	if len(out) == 0 {
		if len(ignored) == 0 {
			return nil, ErrNoKeyslot
		}
		return nil, &UnusableKeyslotsError{Errs: ignored}
	}
	return out, nil
}

// segmentProblem says whether keyslot k holds the key digest want checks
// (anyDigest: any key): nil, or why not; cryptsetup passes over such a
// keyslot.
func (h *Header) segmentProblem(k *Keyslot, want int) error {
	if want == anyDigest || k.Digest >= 0 && k.Digest == want {
		return nil
	}
	hint := "its key opens no data segment"
	if !k.Unbound {
		hint = "its key is not the data segment's"
	}
	return &UnsupportedError{Feature: FeatureUnboundKey, Keyslot: k.ID, Hint: hint}
}

// slotProblem says why keyslot k cannot be tried for the key digest want
// checks (anyDigest: any key), nil if it can. skip says that cryptsetup
// passes over it (a keyslot of another type, or holding another key)
// rather than stopping there.
func (h *Header) slotProblem(k *Keyslot, want int) (err error, skip bool) {
	where := fmt.Sprintf("keyslot %d", k.ID)
	switch k.Type {
	case "luks1", "luks2":
	case "reencrypt":
		return unsupportedSlot(k.ID, FeatureReencryption, "(a reencryption keyslot)", "it holds no passphrase"), true
	default:
		return unsupportedSlot(k.ID, FeatureKeyslotType, fmt.Sprintf("%q", k.Type), "only luks2 keyslots hold a passphrase"), true
	}
	if !k.canonical() {
		return corrupt(where, "its name %q is not the canonical spelling of %d: cryptsetup opens keyslot %d for it", k.name, k.ID, k.ID), true
	}
	if err := h.segmentProblem(k, want); err != nil {
		return err, true
	}
	if k.KeySize <= 0 || k.KeySize > maxKeyBytes {
		return corrupt(where, "key size of %d bytes", k.KeySize), false
	}
	if k.useErr != nil {
		return k.useErr, false
	}
	switch k.KDF.Type {
	case "pbkdf2":
		if hashByName(k.KDF.Hash) == nil {
			return &UnsupportedError{Feature: FeatureHash, Value: k.KDF.Hash, Keyslot: k.ID, Hint: supportedHashes, CryptsetupOpens: cryptsetupHash(k.KDF.Hash)}, false
		}
		if k.KDF.Iterations == 0 {
			return corrupt(where, "0 PBKDF2 iterations"), false
		}
	case "argon2i", "argon2id":
		switch {
		case k.KDF.Time == 0:
			return corrupt(where, "%s with 0 passes", k.KDF.Type), false
		case k.KDF.Threads == 0:
			return corrupt(where, "%s with 0 threads", k.KDF.Type), false
		case uint64(k.KDF.MemoryKiB) < 8*uint64(k.KDF.Threads):
			return corrupt(where, "%s with %d KiB for %d threads (Argon2 needs 8 KiB per thread)", k.KDF.Type, k.KDF.MemoryKiB, k.KDF.Threads), false
		}
	default:
		return unsupportedSlot(k.ID, FeatureKDF, k.KDF.Type, "pbkdf2, argon2i or argon2id"), false
	}
	if hashByName(k.AF.Hash) == nil {
		return &UnsupportedError{Feature: FeatureHash, Value: k.AF.Hash + " (anti-forensic splitter)", Keyslot: k.ID, Hint: supportedHashes, CryptsetupOpens: cryptsetupHash(k.AF.Hash)}, false
	}
	if k.Area.Cipher != dmtable.DefaultCipher && k.Area.Cipher != "aes-xts-plain" {
		ue := unsupportedSlot(k.ID, FeatureCipher, k.Area.Cipher, "keyslot areas in aes-xts-plain64 only")
		ue.CryptsetupOpens = keyslotCipher(k.Area.Cipher)
		return ue, false
	}
	if k.Area.KeySize != 32 && k.Area.KeySize != 64 {
		return corrupt(where, "%d-bit key for its %s area (AES-XTS takes 256 or 512)", k.Area.KeySize*8, k.Area.Cipher), false
	}
	d := h.digest(k.Digest)
	switch {
	case d == nil:
		return corrupt(where, "no digest is found by its number %d", k.Digest), false
	case d.Err != nil:
		return fmt.Errorf("%s: %w", where, d.Err), false
	}
	return nil, false
}

// keyslotCipher reports whether cryptsetup can decrypt a keyslot area in
// c: its userspace crypto handles XTS and CBC with plain IVs (ESSIV and
// the others only dm-crypt has are refused for keyslots).
func keyslotCipher(c string) bool {
	if !cryptsetupCipher(c) {
		return false
	}
	for _, mode := range []string{"-xts-plain64", "-xts-plain", "-cbc-plain64", "-cbc-plain", "-ecb"} {
		if len(c) > len(mode) && c[len(c)-len(mode):] == mode {
			return true
		}
	}
	return false
}

// checkSlots sets each keyslot's Err: why it cannot open the data
// segment.
func (h *Header) checkSlots() {
	want := h.segmentDigest(h.Segment.ID)
	for i := range h.Keyslots {
		h.Keyslots[i].Err, _ = h.slotProblem(&h.Keyslots[i], want)
	}
}

// openSlot tries one keyslot, as cryptsetup's luks2_keyslot_get_key: the
// split key of the keyslot's key size, read from the area's offset rounded
// down to a 512-byte sector whatever the area's size, decrypted in 512-byte
// sectors numbered from 0, merged over 4000 stripes whatever the header
// says. It returns ErrWrongPassphrase if the key does not match the
// digest. slotProblem has vetted k.
func (h *Header) openSlot(hdr io.ReaderAt, k *Keyslot, passphrase []byte) ([]byte, error) {
	d := h.digest(k.Digest)
	dk, err := k.KDF.derive(passphrase, k.Area.KeySize)
	if err != nil {
		return nil, fmt.Errorf("keyslot %d: %w", k.ID, err)
	}
	defer clear(dk)
	mat := make([]byte, afMaterialSize(k.KeySize, stripesLUKS))
	defer clear(mat)
	if err := readFull(hdr, mat, int64(k.Area.Offset&^511)); err != nil {
		return nil, fmt.Errorf("keyslot %d: %w", k.ID, err)
	}
	if err := decryptArea(dk, mat); err != nil {
		return nil, fmt.Errorf("keyslot %d: %w", k.ID, err)
	}
	key := make([]byte, k.KeySize)
	afMerge(key, mat, stripesLUKS, hashByName(k.AF.Hash))
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
	if d.Err != nil {
		return false, d.Err
	}
	got, err := pbkdf2Key(hashByName(d.Hash), key, d.Salt, int(d.Iterations), len(d.Value))
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
	d := h.digest(h.segmentDigest(h.Segment.ID))
	switch {
	case d == nil:
		return corrupt("header", "no digest for the data segment")
	case d.Err != nil:
		return d.Err
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
