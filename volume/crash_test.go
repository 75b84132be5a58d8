package volume

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// logDevice records the writes and syncs an operation makes, so that a test
// can rebuild what a crash at any moment could leave on the disk.
type logDevice struct {
	*memDevice
	log []logEntry
}

type logEntry struct {
	off  int64
	data []byte // nil for a sync
}

func (d *logDevice) WriteAt(p []byte, off int64) (int, error) {
	d.log = append(d.log, logEntry{off: off, data: bytes.Clone(p)})
	return d.memDevice.WriteAt(p, off)
}

func (d *logDevice) Sync() error {
	d.log = append(d.log, logEntry{})
	return d.memDevice.Sync()
}

// crashImages returns disk images a crash after the first n log entries
// may leave: everything up to the last sync is durable; of the writes after
// it, any subset of 512-byte sectors may have reached the disk. It returns
// several subsets: none, all, each prefix and suffix, and random ones.
func crashImages(before []byte, log []logEntry, n int, r *rand.Rand) [][]byte {
	durable := bytes.Clone(before)
	var pending []logEntry
	for _, e := range log[:n] {
		if e.data == nil {
			for _, w := range pending {
				copy(durable[w.off:], w.data)
			}
			pending = nil
		} else {
			pending = append(pending, e)
		}
	}
	type sec struct {
		off  int64
		data []byte
	}
	var secs []sec
	for _, w := range pending {
		for i := 0; i < len(w.data); i += 512 {
			secs = append(secs, sec{w.off + int64(i), w.data[i:min(i+512, len(w.data))]})
		}
	}
	apply := func(keep func(i int) bool) []byte {
		img := bytes.Clone(durable)
		for i, s := range secs {
			if keep(i) {
				copy(img[s.off:], s.data)
			}
		}
		return img
	}
	imgs := [][]byte{apply(func(int) bool { return false })}
	for k := 1; k <= len(secs); k++ {
		imgs = append(imgs, apply(func(i int) bool { return i < k }), apply(func(i int) bool { return i >= len(secs)-k }))
	}
	for range 24 {
		if len(secs) == 0 {
			break
		}
		imgs = append(imgs, apply(func(int) bool { return r.IntN(2) == 0 }))
	}
	return imgs
}

// TestHeaderUpdatesAreCrashSafe: a crash at any point of changing a
// passphrase, adding one, removing one or restoring a header backup leaves
// a volume that opens with the old passphrase or the new one, and gives the
// right master key.
func TestHeaderUpdatesAreCrashSafe(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	base, _ := newTestVolume(t, make([]byte, 64<<10), 4096, 32, 64)
	v := mustOpen(t, base, true)
	masterKey := v.MasterKey()
	v.Close()
	oldPass, newPass := testPass, []byte("a new passphrase")

	// A backup taken with a different passphrase in slot 3 only: restoring
	// it swaps two disjoint slot sets, the hardest case for torn writes.
	withOther := base.clone()
	hs, _ := ReadHeaders(withOther, withOther.size())
	if _, err := AddSlot(withOther, hs, masterKey, newPass, testKDF, -1); err != nil {
		t.Fatal(err)
	}
	hs.Header.Slots[3], hs.Header.Slots[1] = hs.Header.Slots[1], KeySlot{}
	// Re-wrap for slot 3 (the slot index is bound into the wrapping).
	if err := ChangeSlot(withOther, hs, masterKey, 3, newPass, testKDF); err != nil {
		t.Fatal(err)
	}
	if err := RemoveSlot(withOther, hs, 0); err != nil {
		t.Fatal(err)
	}
	backup, _ := hs.Backup()

	ops := map[string]func(dev Device, hs *Headers) error{
		"change": func(dev Device, hs *Headers) error { return ChangeSlot(dev, hs, masterKey, 0, newPass, testKDF) },
		"add": func(dev Device, hs *Headers) error {
			_, err := AddSlot(dev, hs, masterKey, newPass, testKDF, -1)
			return err
		},
		"remove": func(dev Device, hs *Headers) error { return RemoveSlot(dev, hs, 0) },
		"restore": func(dev Device, hs *Headers) error {
			_, err := Restore(dev, base.size(), hs, backup, false)
			return err
		},
	}
	for name, op := range ops {
		start := base.clone()
		if name == "remove" { // removing needs a second passphrase to keep
			hs, _ := ReadHeaders(start, start.size())
			if _, err := AddSlot(start, hs, masterKey, newPass, testKDF, -1); err != nil {
				t.Fatal(err)
			}
		}
		dev := &logDevice{memDevice: start.clone()}
		hs, err := ReadHeaders(dev, dev.size())
		if err != nil {
			t.Fatal(err)
		}
		if err := op(dev, hs); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		images := 0
		for n := 0; n <= len(dev.log); n++ {
			for _, img := range crashImages(start.b, dev.log, n, r) {
				images++
				d := &memDevice{b: img}
				hs, err := ReadHeaders(d, d.size())
				if err != nil {
					t.Fatalf("%s, crash after %d of %d steps: %v", name, n, len(dev.log), err)
				}
				key, _, errOld := hs.Unlock(oldPass)
				if errOld != nil {
					key, _, err = hs.Unlock(newPass)
					if err != nil {
						t.Fatalf("%s, crash after %d of %d steps: neither passphrase opens (old: %v, new: %v)", name, n, len(dev.log), errOld, err)
					}
				}
				if !bytes.Equal(key, masterKey) {
					t.Fatalf("%s: wrong master key", name)
				}
			}
		}
		t.Logf("%s: %d log entries, %d crash images opened", name, len(dev.log), images)
		// Completed: the new passphrase works (except after remove, where
		// the remaining one does), and both copies agree.
		final := &memDevice{b: dev.b}
		hs, err = ReadHeaders(final, final.size())
		if err != nil || len(hs.Warnings) != 0 {
			t.Fatalf("%s: after completion: %v %v", name, err, hs.Warnings)
		}
		if _, _, err := hs.Unlock(newPass); err != nil {
			t.Fatalf("%s: new passphrase after completion: %v", name, err)
		}
	}
}
