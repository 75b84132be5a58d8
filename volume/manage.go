package volume

import (
	"errors"
	"fmt"
)

// Key slot and header management. Each function writes the whole header
// with writeHeader (both copies, one at a time, each synced), so a crash
// leaves the volume opening with the old header or the new one.

// ErrSlotsFull: all MaxSlots key slots are in use.
var ErrSlotsFull = fmt.Errorf("all %d key slots are in use", MaxSlots)

// ActiveSlots lists the slots in use.
func (h *Header) ActiveSlots() []int {
	var s []int
	for i := range h.Slots {
		if h.Slots[i].Active {
			s = append(s, i)
		}
	}
	return s
}

// AddSlot wraps key (the master key, from Unlock) under passphrase in
// slot (or the first free slot, if slot is -1) and writes the header; it
// returns the slot number.
func AddSlot(dev Device, hs *Headers, key, passphrase []byte, kdf KDFParams, slot int) (int, error) {
	h := *hs.Header
	free := -1
	for i := range h.Slots {
		if !h.Slots[i].Active && !hs.isDamaged(i) && (slot < 0 || i == slot) {
			free = i
			break
		}
	}
	if free < 0 && slot >= 0 {
		return -1, fmt.Errorf("key slot %d is in use or damaged", slot)
	}
	if free < 0 {
		return -1, ErrSlotsFull
	}
	return free, replaceSlot(dev, hs, &h, key, free, passphrase, kdf)
}

// ChangeSlot replaces the passphrase of slot (the one Unlock opened) with
// passphrase, in place, and writes the header.
func ChangeSlot(dev Device, hs *Headers, key []byte, slot int, passphrase []byte, kdf KDFParams) error {
	h := *hs.Header
	return replaceSlot(dev, hs, &h, key, slot, passphrase, kdf)
}

func replaceSlot(dev Device, hs *Headers, h *Header, key []byte, slot int, passphrase []byte, kdf KDFParams) error {
	if len(passphrase) == 0 {
		return errors.New("empty passphrase")
	}
	s, err := newSlot(passphrase, key, h.UUID, slot, kdf)
	if err != nil {
		return err
	}
	h.Slots[slot] = s
	if h.MAC, err = h.computeMAC(key); err != nil {
		return err
	}
	return commit(dev, hs, h)
}

// RemoveSlot empties slot and writes the header. It needs no key: the MAC
// does not cover the slots, which authenticate themselves.
func RemoveSlot(dev Device, hs *Headers, slot int) error {
	h := *hs.Header
	if slot < 0 || slot >= MaxSlots || !h.Slots[slot].Active {
		return fmt.Errorf("key slot %d is not in use", slot)
	}
	h.Slots[slot] = KeySlot{}
	return commit(dev, hs, &h)
}

// commit writes h and makes it the header in use.
func commit(dev Device, hs *Headers, h *Header) error {
	if err := writeHeader(dev, hs, h); err != nil {
		return err
	}
	hs.Header = h
	hs.Primary.Generation, hs.Secondary.Generation = h.Generation, h.Generation
	hs.Damaged = nil
	return nil
}

func (hs *Headers) isDamaged(slot int) bool {
	for _, d := range hs.Damaged {
		if d == slot {
			return true
		}
	}
	return false
}

// Backup returns the header in use as one header copy (CopySize bytes): a
// header backup file. It holds the wrapped master key: anyone with the
// backup and a passphrase it knows can decrypt the volume, even after that
// passphrase is removed from the volume.
func (hs *Headers) Backup() ([]byte, error) {
	return hs.Header.MarshalBinary()
}

// SlotRollback says what restoring backup does to the key slots of cur:
// back lists the slots whose passphrases it brings back (removed or
// changed since the backup), gone those it removes (added since). Both
// are empty when the backup is of another volume or unreadable (Restore
// refuses those, naming why).
func SlotRollback(cur *Header, backup []byte) (back, gone []int) {
	old, err := ParseHeader(backup)
	if err != nil || old.UUID != cur.UUID {
		return nil, nil
	}
	for i := range old.Slots {
		o, c := old.Slots[i], cur.Slots[i]
		switch {
		case o.Active && (!c.Active || o.Salt != c.Salt):
			back = append(back, i)
		case !o.Active && c.Active:
			gone = append(gone, i)
		}
	}
	return back, gone
}

// RestoreError explains why a header backup does not fit a volume.
// OtherVolume says the only objection is the UUID (which force overrides).
type RestoreError struct {
	Reason      string
	OtherVolume bool
}

func (e *RestoreError) Error() string { return "the backup does not fit this volume: " + e.Reason }

// Restore writes the header backup to both copies of the volume on dev
// (size bytes). current is what ReadHeaders found (nil if it found no
// header). Unless force is set, the backup must belong to the same volume
// (same UUID) and be of its format version or newer. The backup must describe a volume that fits the device.
func Restore(dev Device, size int64, current *Headers, backup []byte, force bool) (*Header, error) {
	h, err := ParseHeader(backup)
	if err != nil {
		return nil, fmt.Errorf("invalid header backup: %w", err)
	}
	if h.Size > size {
		return nil, &RestoreError{Reason: fmt.Sprintf("it describes a %d-byte volume, the image has %d bytes", h.Size, size)}
	}
	hs := current
	if hs == nil {
		hs = &Headers{Header: h}
	} else if hs.Header.UUID != h.UUID && !force {
		return nil, &RestoreError{Reason: fmt.Sprintf("its UUID is %s, the volume's is %s", h.UUIDString(), hs.Header.UUIDString()), OtherVolume: true}
	} else if h.Version < hs.Header.Version && !force {
		// A backup from before the volume was upgraded: its version cannot
		// read the state area the volume has now.
		return nil, &RestoreError{Reason: fmt.Sprintf("it is format version %d and the volume was upgraded to version %d since; take a new backup", h.Version, hs.Header.Version)}
	}
	if err := commit(dev, hs, h); err != nil {
		return nil, err
	}
	return h, nil
}
