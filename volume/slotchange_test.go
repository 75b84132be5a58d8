package volume

import (
	"errors"
	"slices"
	"testing"
)

// slotCall records which callbacks ChangeSlots called, in order.
type slotCall struct {
	calls []string
	pass  []byte // what Passphrase returns (a copy: ChangeSlots wipes it)
	new   []byte // what New returns
}

func (s *slotCall) change(op SlotOp, slot int) SlotChange {
	return SlotChange{
		Op: op, Slot: slot, Unlock: UnlockOptions{Limits: DefaultKDFLimits()},
		Passphrase: func() ([]byte, error) {
			s.calls = append(s.calls, "passphrase")
			return slices.Clone(s.pass), nil
		},
		New: func() ([]byte, KDFParams, error) {
			s.calls = append(s.calls, "new")
			return slices.Clone(s.new), testKDF, nil
		},
	}
}

func readHeadersT(t *testing.T, dev *memDevice) *Headers {
	t.Helper()
	hs, err := ReadHeaders(dev, dev.size())
	if err != nil {
		t.Fatal(err)
	}
	return hs
}

// opens reports which slot pass opens on dev, or -1.
func opens(t *testing.T, dev *memDevice, pass []byte) int {
	t.Helper()
	_, slot, err := readHeadersT(t, dev).Unlock(pass)
	if err != nil {
		return -1
	}
	return slot
}

// TestChangeSlots: add, change and remove with and without a picked slot,
// as cryptsetup's --key-slot; each result is checked by unlocking the
// headers as read back from the device.
func TestChangeSlots(t *testing.T) {
	dev, _ := newTestVolume(t, make([]byte, 64<<10), 4096, 32, 64)
	second, third := []byte("second passphrase"), []byte("third passphrase")

	// Add to the first free slot, then to a picked one.
	s := &slotCall{pass: testPass, new: second}
	n, err := ChangeSlots(dev, readHeadersT(t, dev), s.change(OpAddSlot, -1))
	if err != nil || n != 1 || opens(t, dev, second) != 1 || opens(t, dev, testPass) != 0 {
		t.Fatalf("add: slot %d, %v", n, err)
	}
	if !slices.Equal(s.calls, []string{"passphrase", "new"}) {
		t.Fatalf("add called %v", s.calls)
	}
	s = &slotCall{pass: second, new: third}
	if n, err := ChangeSlots(dev, readHeadersT(t, dev), s.change(OpAddSlot, 5)); err != nil || n != 5 || opens(t, dev, third) != 5 {
		t.Fatalf("add to slot 5: slot %d, %v", n, err)
	}

	// Change: the passphrase given names the slot; with a picked slot the
	// passphrase must be that slot's.
	s = &slotCall{pass: third, new: []byte("fifth")}
	if _, err := ChangeSlots(dev, readHeadersT(t, dev), s.change(OpChangeSlot, 1)); !errors.Is(err, ErrWrongPassphrase) {
		t.Fatalf("change slot 1 with slot 5's passphrase: %v", err)
	}
	if !slices.Equal(s.calls, []string{"passphrase"}) {
		t.Fatalf("a failed unlock went on to %v", s.calls)
	}
	if n, err := ChangeSlots(dev, readHeadersT(t, dev), s.change(OpChangeSlot, -1)); err != nil || n != 5 ||
		opens(t, dev, []byte("fifth")) != 5 || opens(t, dev, third) != -1 {
		t.Fatalf("change: slot %d, %v", n, err)
	}

	// Remove a picked slot with another slot's passphrase (luksKillSlot),
	// then the slot a passphrase opens.
	s = &slotCall{pass: testPass}
	if n, err := ChangeSlots(dev, readHeadersT(t, dev), s.change(OpRemoveSlot, 5)); err != nil || n != 5 || opens(t, dev, []byte("fifth")) != -1 {
		t.Fatalf("remove slot 5: slot %d, %v", n, err)
	}
	if !slices.Equal(s.calls, []string{"passphrase"}) {
		t.Fatalf("remove called %v", s.calls)
	}
	s = &slotCall{pass: second}
	if n, err := ChangeSlots(dev, readHeadersT(t, dev), s.change(OpRemoveSlot, -1)); err != nil || n != 1 || opens(t, dev, second) != -1 {
		t.Fatalf("remove: slot %d, %v", n, err)
	}
	if got := readHeadersT(t, dev).Header.ActiveSlots(); !slices.Equal(got, []int{0}) {
		t.Fatalf("slots left %v", got)
	}

	// The last slot goes only with AllowLast.
	s = &slotCall{pass: testPass}
	c := s.change(OpRemoveSlot, -1)
	if n, err := ChangeSlots(dev, readHeadersT(t, dev), c); !errors.Is(err, ErrLastSlot) || n != 0 || opens(t, dev, testPass) != 0 {
		t.Fatalf("removing the last slot: slot %d, %v", n, err)
	}
	c.AllowLast = true
	if n, err := ChangeSlots(dev, readHeadersT(t, dev), c); err != nil || n != 0 {
		t.Fatalf("removing the last slot with AllowLast: slot %d, %v", n, err)
	}
	if got := readHeadersT(t, dev).Header.ActiveSlots(); len(got) != 0 {
		t.Fatalf("slots left %v", got)
	}
}

// TestChangeSlotsRefusesBeforeAsking: a picked slot in the wrong state,
// or out of range, is refused without calling Passphrase; a callback's
// error stops the change and is returned as it is.
func TestChangeSlotsRefusesBeforeAsking(t *testing.T) {
	dev, _ := newTestVolume(t, make([]byte, 64<<10), 4096, 32, 64)
	before := dev.clone()
	for _, tc := range []struct {
		op    SlotOp
		slot  int
		inUse bool
	}{
		{OpAddSlot, 0, true},
		{OpChangeSlot, 3, false},
		{OpRemoveSlot, 7, false},
	} {
		s := &slotCall{pass: testPass, new: []byte("new")}
		_, err := ChangeSlots(dev, readHeadersT(t, dev), s.change(tc.op, tc.slot))
		var se *SlotStateError
		if !errors.As(err, &se) || se.Slot != tc.slot || se.InUse != tc.inUse || len(s.calls) != 0 {
			t.Errorf("op %d slot %d: %v, callbacks %v", tc.op, tc.slot, err, s.calls)
		}
	}
	for _, slot := range []int{-2, MaxSlots} {
		s := &slotCall{pass: testPass}
		if _, err := ChangeSlots(dev, readHeadersT(t, dev), s.change(OpRemoveSlot, slot)); err == nil || len(s.calls) != 0 {
			t.Errorf("slot %d: %v, callbacks %v", slot, err, s.calls)
		}
	}

	stop := errors.New("no terminal")
	s := &slotCall{pass: testPass}
	c := s.change(OpAddSlot, -1)
	c.New = func() ([]byte, KDFParams, error) { return nil, KDFParams{}, stop }
	if _, err := ChangeSlots(dev, readHeadersT(t, dev), c); err != stop {
		t.Fatalf("New's error: %v", err)
	}
	c.Passphrase = func() ([]byte, error) { return nil, stop }
	if _, err := ChangeSlots(dev, readHeadersT(t, dev), c); err != stop {
		t.Fatalf("Passphrase's error: %v", err)
	}
	if !slices.Equal(dev.b, before.b) {
		t.Fatal("a refused change wrote to the device")
	}
}

// TestChangeSlotsFull: adding to a volume whose slots are all in use is
// ErrSlotsFull, and nothing is written.
func TestChangeSlotsFull(t *testing.T) {
	dev, _ := newTestVolume(t, make([]byte, 64<<10), 4096, 32, 64)
	for i := 1; i < MaxSlots; i++ {
		s := &slotCall{pass: testPass, new: []byte{'p', byte('0' + i)}}
		if n, err := ChangeSlots(dev, readHeadersT(t, dev), s.change(OpAddSlot, -1)); err != nil || n != i {
			t.Fatalf("add %d: slot %d, %v", i, n, err)
		}
	}
	before := dev.clone()
	s := &slotCall{pass: testPass, new: []byte("one too many")}
	if _, err := ChangeSlots(dev, readHeadersT(t, dev), s.change(OpAddSlot, -1)); !errors.Is(err, ErrSlotsFull) {
		t.Fatalf("add to a full volume: %v", err)
	}
	if !slices.Equal(dev.b, before.b) {
		t.Fatal("a refused add wrote to the device")
	}
}
