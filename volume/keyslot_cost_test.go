package volume

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// inflateSlot rewrites a slot's Argon2id costs as someone who can write the
// image would: both header copies, every checksum recomputed. The slot no
// longer opens (its costs are bound into the wrapping), but whoever unlocks
// would first run the KDF at those costs.
func inflateSlot(t *testing.T, dev *memDevice, slot int, p KDFParams) {
	t.Helper()
	hs, err := ReadHeaders(dev, dev.size())
	if err != nil {
		t.Fatal(err)
	}
	h := *hs.Header
	h.Slots[slot].KDF = p
	b, err := h.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	dev.WriteAt(b, 0)
	dev.WriteAt(b, h.SecondaryOffset)
}

// TestExpensiveSlotIsNotRun: a slot asking for 4 GiB × 1000 passes × 255
// threads is skipped, not run; the error names it; the passphrase of
// another slot still opens at once.
func TestExpensiveSlotIsNotRun(t *testing.T) {
	dev, _ := newTestVolume(t, make([]byte, 64<<10), 4096, 32, 64)
	v := mustOpen(t, dev, true)
	key := v.MasterKey()
	v.Close()
	hs, _ := ReadHeaders(dev, dev.size())
	other := []byte("the second passphrase")
	if _, err := AddSlot(dev, hs, key, other, testKDF, -1); err != nil {
		t.Fatal(err)
	}
	huge := KDFParams{Time: MaxKDFTime, MemoryKiB: MaxKDFMemoryKiB, Threads: 255}
	inflateSlot(t, dev, 0, huge)

	hs, _ = ReadHeaders(dev, dev.size())
	var ran []int
	opts := UnlockOptions{Slot: -1, Limits: DefaultKDFLimits(), Trying: func(slot int, _ KDFParams) { ran = append(ran, slot) }}
	start := time.Now()
	_, _, err := hs.UnlockWith(testPass, opts)
	var tc *SlotsTooCostlyError
	if !errors.As(err, &tc) || len(tc.Slots) != 1 || tc.Slots[0].Slot != 0 || tc.Slots[0].KDF != huge {
		t.Fatalf("unlock with the passphrase of the inflated slot: %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("refusing took %v: the KDF ran", d)
	}
	want := "key slot 0 asks for Argon2id with 4 GiB × 1000 passes × 255 threads"
	if msg := err.Error(); !strings.Contains(msg, want) {
		t.Errorf("message %q does not name the slot and its costs", msg)
	}
	for _, s := range ran {
		if s == 0 {
			t.Fatal("the inflated slot's KDF ran")
		}
	}
	// The other slot opens.
	if _, slot, err := hs.UnlockWith(other, opts); err != nil || slot != 1 {
		t.Fatalf("the other passphrase: slot %d, %v", slot, err)
	}
	// Limits of this machine's memory: a slot within the format's bounds
	// but above what can be spared is skipped too.
	l := KDFLimits{MaxMemoryKiB: 1 << 10, MaxWork: MaxKDFWork}
	if err := l.Check(KDFParams{Time: 1, MemoryKiB: 2 << 10, Threads: 1}); err == nil {
		t.Error("a slot above the memory limit passed")
	}
	if err := DefaultKDFLimits().Check(KDFParams{Time: 2, MemoryKiB: 64 << 10, Threads: 4}); err != nil {
		t.Errorf("a modest slot was refused: %v", err)
	}
	// A chosen slot: only that one is tried.
	ran = nil
	if _, _, err := hs.UnlockWith(other, UnlockOptions{Slot: 0, Limits: DefaultKDFLimits(), Trying: opts.Trying}); !errors.As(err, &tc) || len(ran) != 0 {
		t.Fatalf("slot 0 chosen: %v, ran %v", err, ran)
	}
	if _, slot, err := hs.UnlockWith(other, UnlockOptions{Slot: 1, Limits: DefaultKDFLimits()}); err != nil || slot != 1 {
		t.Fatalf("slot 1 chosen: slot %d, %v", slot, err)
	}
	if _, _, err := hs.UnlockWith(other, UnlockOptions{Slot: 5, Limits: DefaultKDFLimits()}); !errors.Is(err, ErrNoSuchSlot) {
		t.Fatalf("an empty slot chosen: %v", err)
	}
}

// TestNewSlotCosts: xtsctl never writes a slot it would refuse to unlock.
func TestNewSlotCosts(t *testing.T) {
	old := kdfTestHook // no hook: the costs asked for are used
	kdfTestHook = nil
	defer func() { kdfTestHook = old }()
	_, err := newSlot([]byte("p"), make([]byte, 64), [16]byte{1}, 0, KDFParams{Time: 200, MemoryKiB: 1 << 20, Threads: 1})
	if err == nil {
		t.Fatal("a slot costing 200 GiB·passes was written")
	}
}
