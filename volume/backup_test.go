package volume

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
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

func TestReadBackup(t *testing.T) {
	dir := t.TempDir()
	dev, _ := newTestVolume(t, make([]byte, 64<<10), 4096, 32, 64)
	hs, _ := ReadHeaders(dev, dev.size())
	b, _ := hs.Backup()
	good := filepath.Join(dir, "good")
	os.WriteFile(good, b, 0o600)
	got, err := ReadBackup(good)
	if err != nil || !slices.Equal(got, b) {
		t.Fatalf("ReadBackup of a backup: %v", err)
	}
	long := filepath.Join(dir, "long")
	os.WriteFile(long, append(b, 0), 0o600)
	for path, want := range map[string]string{
		filepath.Join(dir, "missing"): "does not exist",
		long:                          "not a header backup: 8193 bytes",
		dir:                           "cannot read header backup",
	} {
		if _, err := ReadBackup(path); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ReadBackup(%s) = %v, want an error saying %q", path, err, want)
		}
	}
}
