package volume

import (
	"errors"
	"fmt"
)

// SlotOp is what ChangeSlots does.
type SlotOp int

const (
	OpAddSlot    SlotOp = iota // a new passphrase in a free key slot
	OpChangeSlot               // a key slot's passphrase replaced, in the same slot
	OpRemoveSlot               // a key slot emptied
)

// SlotChange describes one key slot change for ChangeSlots. Passphrases
// come from the caller, asked only once every check that needs none has
// passed.
type SlotChange struct {
	Op SlotOp
	// Slot is cryptsetup's --key-slot, or -1. Add: the slot to add, which
	// must be free. Change: the slot to change, which the passphrase must
	// open. Remove: the slot to remove, which any passphrase of the volume
	// authorises (luksKillSlot). -1: add to the first free slot; change or
	// remove the slot the passphrase opens.
	Slot int
	// Passphrase returns a passphrase of the volume to unlock it with (the
	// one to change or remove, or, removing a given Slot, any).
	// ChangeSlots wipes it once it has unlocked.
	Passphrase func() ([]byte, error)
	// New returns the new passphrase (Add, Change) and the Argon2id costs
	// of its slot; it is called after the volume is unlocked. ChangeSlots
	// wipes the passphrase before it returns.
	New func() ([]byte, KDFParams, error)
	// AllowLast allows removing the last key slot, after which the volume
	// cannot be opened (short of a header backup).
	AllowLast bool
	// Unlock gives the KDF limits and the Trying callback of the unlock;
	// its Slot is ignored (ChangeSlots tries Slot when changing it, every
	// slot otherwise).
	Unlock UnlockOptions
}

// SlotStateError: the slot picked for ChangeSlots is in use (add) or empty
// (change, remove). Nothing was asked or written.
type SlotStateError struct {
	Slot  int
	InUse bool
}

func (e *SlotStateError) Error() string {
	if e.InUse {
		return fmt.Sprintf("key slot %d is in use", e.Slot)
	}
	return fmt.Sprintf("key slot %d is empty", e.Slot)
}

// ErrLastSlot: removing the slot would leave the volume without a
// passphrase, and SlotChange.AllowLast is not set.
var ErrLastSlot = errors.New("refusing to remove the last key slot: without it the volume cannot be opened")

// ChangeSlots unlocks the volume whose headers hs were read from dev (an
// image opened with OpenForHeader) and adds, changes or removes a key
// slot, writing the header crash-safely (AddSlot, ChangeSlot, RemoveSlot).
// It returns the slot added, changed or removed, also with ErrLastSlot.
// Before asking for a passphrase it refuses a Slot out of range or in the
// wrong state (*SlotStateError); then come Passphrase's errors, those of
// Headers.UnlockWith, ErrLastSlot, New's errors and the write's
// (ErrSlotsFull when adding to a volume without a free slot).
func ChangeSlots(dev Device, hs *Headers, c SlotChange) (int, error) {
	target := c.Slot
	if target < -1 || target >= MaxSlots {
		return -1, fmt.Errorf("key slot %d does not exist (a volume has slots 0 to %d)", target, MaxSlots-1)
	}
	if target >= 0 {
		active := hs.Header.Slots[target].Active
		if c.Op == OpAddSlot && active || c.Op != OpAddSlot && !active {
			return -1, &SlotStateError{Slot: target, InUse: active}
		}
	}
	opts := c.Unlock
	opts.Slot = -1
	if c.Op == OpChangeSlot {
		opts.Slot = target
	}
	pass, err := c.Passphrase()
	if err != nil {
		return -1, err
	}
	key, slot, err := hs.UnlockWith(pass, opts)
	clear(pass)
	if err != nil {
		return -1, err
	}
	defer clear(key)

	if c.Op == OpRemoveSlot {
		if target >= 0 {
			slot = target
		}
		if len(hs.Header.ActiveSlots()) == 1 && !c.AllowLast {
			return slot, ErrLastSlot
		}
		return slot, RemoveSlot(dev, hs, slot)
	}
	newPass, kdf, err := c.New()
	defer clear(newPass)
	if err != nil {
		return -1, err
	}
	if c.Op == OpAddSlot {
		return AddSlot(dev, hs, key, newPass, kdf, target)
	}
	return slot, ChangeSlot(dev, hs, key, slot, newPass, kdf)
}
