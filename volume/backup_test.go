package volume

import (
	"slices"
	"testing"
)

// TestSlotRollback: what a header restore brings back and removes is read
// from the two headers' slots, by salt (a changed passphrase is a new salt).
func TestSlotRollback(t *testing.T) {
	dev, _ := newTestVolume(t, make([]byte, 64<<10), 4096, 32, 64)
	v := mustOpen(t, dev, true)
	master := v.MasterKey()
	v.Close()
	hs, err := ReadHeaders(dev, dev.size())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := AddSlot(dev, hs, master, []byte("second"), testKDF, 2); err != nil {
		t.Fatal(err)
	}
	backup, _ := hs.Backup() // slots 0 and 2

	if back, gone := SlotRollback(hs.Header, backup); back != nil || gone != nil {
		t.Errorf("restoring the current header: back %v gone %v, want none", back, gone)
	}
	// Since the backup: slot 0 changed, slot 2 removed, slot 5 added.
	if err := ChangeSlot(dev, hs, master, 0, []byte("changed"), testKDF); err != nil {
		t.Fatal(err)
	}
	if err := RemoveSlot(dev, hs, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := AddSlot(dev, hs, master, []byte("added"), testKDF, 5); err != nil {
		t.Fatal(err)
	}
	back, gone := SlotRollback(hs.Header, backup)
	if !slices.Equal(back, []int{0, 2}) || !slices.Equal(gone, []int{5}) {
		t.Errorf("back %v gone %v, want [0 2] and [5]", back, gone)
	}

	other, _ := newTestVolume(t, make([]byte, 64<<10), 4096, 32, 64)
	ohs, _ := ReadHeaders(other, other.size())
	if back, gone := SlotRollback(ohs.Header, backup); back != nil || gone != nil {
		t.Errorf("a backup of another volume: back %v gone %v, want none (Restore refuses it)", back, gone)
	}
	if back, gone := SlotRollback(hs.Header, backup[:100]); back != nil || gone != nil {
		t.Errorf("a damaged backup: back %v gone %v, want none", back, gone)
	}
}
