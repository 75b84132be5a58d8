package luksimage

import (
	"context"

	"github.com/xtsctl/xtsctl/luks"
)

// KeyslotOp is what ChangeKeyslots does.
type KeyslotOp int

const (
	AddKeyslot    KeyslotOp = iota // a new passphrase in a free keyslot
	ChangeKeyslot                  // a keyslot's passphrase replaced
	RemoveKeyslot                  // a keyslot removed, its key material overwritten
)

// KeyslotChange describes one keyslot change. Passphrases come from the
// caller, asked only once every check that needs none has passed.
type KeyslotChange struct {
	Op KeyslotOp
	// Keyslot is cryptsetup's --key-slot. Add: the keyslot to add, which
	// must be free. Change: the keyslot to change, which the passphrase
	// must open. Remove: the keyslot to remove, which any passphrase
	// authorises (luksKillSlot). nil: add to the lowest free keyslot;
	// change or remove the keyslot the passphrase opens.
	Keyslot *int
	// Passphrase returns a passphrase of the image, to unlock it with (the
	// one to change or remove, or, with Keyslot set for add and remove,
	// any). ChangeKeyslots wipes it once it has unlocked.
	Passphrase func() ([]byte, error)
	// New returns the new passphrase (Add, Change) and the Argon2id costs
	// of its keyslot; it is called after the image is unlocked.
	// ChangeKeyslots wipes the passphrase before it returns.
	New func() ([]byte, *luks.Argon2Params, error)
	// AllowLast allows removing the last keyslot (luks.RemoveOptions).
	AllowLast bool
	// Limits bound the KDF costs of unlocking (nil: luks.DefaultLimits).
	Limits *luks.Limits
}

// ChangeKeyslots unlocks the image, opened with WriteHeader, and adds,
// changes or removes a keyslot (luks.Header.AddKeyslot, ChangeKeyslot,
// RemoveKeyslot, which write crash-safely). It returns the keyslot added,
// changed or removed, also with luks.ErrLastKeyslot. Before asking for a
// passphrase it refuses a picked keyslot in the wrong state
// (*luks.KeyslotStateError) and what CheckUnlock refuses; then come
// Passphrase's errors, Unlock's, New's and the write's.
func (img *Image) ChangeKeyslots(ctx context.Context, c KeyslotChange) (int, error) {
	h := img.Header
	pick, target := c.Keyslot, (*int)(nil)
	switch {
	case c.Op == AddKeyslot && pick != nil:
		if h.Keyslot(*pick) != nil {
			return -1, &luks.KeyslotStateError{Keyslot: *pick, InUse: true, Used: h.KeyslotIDs()}
		}
		target, pick = pick, nil
	case c.Op == RemoveKeyslot && pick != nil:
		if h.Keyslot(*pick) == nil {
			return -1, &luks.KeyslotStateError{Keyslot: *pick, Used: h.KeyslotIDs()}
		}
		target, pick = pick, nil
	}
	slots, err := h.CheckUnlock(pick)
	if err != nil {
		return -1, err
	}
	pass, err := c.Passphrase()
	if err != nil {
		return -1, err
	}
	key, slot, err := img.Unlock(ctx, pass, slots, c.Limits)
	clear(pass)
	if err != nil {
		return -1, err
	}
	defer clear(key)
	if c.Op == RemoveKeyslot {
		if target != nil {
			slot = *target
		}
		return slot, h.RemoveKeyslot(img.HeaderFile, img.HeaderSize, slot, luks.RemoveOptions{AllowLast: c.AllowLast})
	}
	newPass, kp, err := c.New()
	defer clear(newPass)
	if err != nil {
		return -1, err
	}
	opts := luks.KeyslotOptions{Argon2: kp, Keyslot: target, Limits: c.Limits}
	if c.Op == AddKeyslot {
		return h.AddKeyslot(img.HeaderFile, img.HeaderSize, key, newPass, opts)
	}
	return slot, h.ChangeKeyslot(img.HeaderFile, img.HeaderSize, slot, key, newPass, opts)
}
