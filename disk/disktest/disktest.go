// Package disktest holds what the formats' tests share: only tests import
// it.
package disktest

import (
	"context"
	"os"
	"runtime"
	"testing"

	"github.com/xtsctl/xtsctl/disk"
)

// Attach opens the image at path with format f as the command line does
// (the format layer's open, check and unlock, the secret wiped after the
// unlock), attaches it read-only and wipes the unlocked key, which the
// device no longer needs. close closes the device and the image.
//
// Before the unlock a garbage collection shrinks the test goroutine's
// shallow stack, so that the key handling starts on a small one, as on a
// busy machine: a stack that then grows while holding a key leaves a copy
// behind, which the memory tests must see.
func Attach(t *testing.T, f disk.Format, path string, opts disk.Options, sec *disk.Secret) (dev disk.Device, close func()) {
	t.Helper()
	img, err := disk.OpenImage(path, disk.ImageOptions{Access: disk.Read})
	if err != nil {
		t.Fatal(err)
	}
	h, err := f.Open(img, opts)
	if err != nil {
		t.Fatal(err)
	}
	req := &disk.Request{Slot: -1, ReadOnly: true, Options: opts, KeyFiles: len(sec.KeyFiles)}
	if _, err := h.Check(req); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.GC()
	u, err := h.Unlock(context.Background(), req, sec)
	sec.Wipe()
	if err != nil {
		t.Fatal(err)
	}
	file, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	dev, err = disk.Attach(file, u, disk.AttachOptions{ReadOnly: true})
	u.Wipe()
	if err != nil {
		t.Fatal(err)
	}
	return dev, func() {
		if err := dev.Close(); err != nil {
			t.Error(err)
		}
		img.Close()
	}
}

// Read reads up to 64 KiB of plaintext from the start of dev.
func Read(t *testing.T, dev disk.Device) {
	t.Helper()
	buf := make([]byte, min(64<<10, dev.Sectors()*uint64(dev.SectorSize())))
	if _, err := disk.NewReaderAt(dev).ReadAt(buf, 0); err != nil {
		t.Fatal(err)
	}
}
