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

// A Device is an image attached as the command line attaches it.
type Device struct {
	disk.Device
	writable bool
	img      *disk.Image
}

// Attach opens the image at path with format f as the command line does
// (the format layer's open, check and unlock, the secret wiped after the
// unlock), attaches it, for writing too unless readOnly (--readonly) or
// the format serves it read-only, and wipes the unlocked key, which the
// device no longer needs.
//
// Before the unlock a garbage collection shrinks the test goroutine's
// shallow stack, so that the key handling starts on a small one, as on a
// busy machine: a stack that then grows while holding a key leaves a copy
// behind, which the memory tests must see.
func Attach(t *testing.T, f disk.Format, path string, opts disk.Options, sec *disk.Secret, readOnly bool) *Device {
	t.Helper()
	access := disk.Write
	if readOnly {
		access = disk.Read
	}
	img, err := disk.OpenImage(path, disk.ImageOptions{Access: access})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { img.Close() })
	h, err := f.Open(img, opts)
	if err != nil {
		t.Fatal(err)
	}
	req := &disk.Request{Slot: -1, ReadOnly: readOnly, Options: opts, KeyFiles: len(sec.KeyFiles)}
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
	d := &Device{writable: !readOnly && u.Layout.ReadOnly == "", img: img}
	flag := os.O_RDONLY
	if d.writable {
		flag = os.O_RDWR
	}
	file, err := os.OpenFile(path, flag, 0)
	if err != nil {
		t.Fatal(err)
	}
	d.Device, err = disk.Attach(file, u, disk.AttachOptions{ReadOnly: !d.writable})
	u.Wipe()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// ReadWrite reads up to 64 KiB of plaintext from the start of d and,
// unless it is read-only, writes it back: both of the cipher's directions
// run, and the image holds what it held.
func (d *Device) ReadWrite(t *testing.T) {
	t.Helper()
	n := min(64<<10, d.Sectors()*uint64(d.SectorSize()))
	buf := make([]byte, n-n%uint64(d.SectorSize()))
	if err := d.ReadSectors(buf, 0); err != nil {
		t.Fatal(err)
	}
	if !d.writable {
		return
	}
	if err := d.WriteSectors(buf, 0); err != nil {
		t.Fatal(err)
	}
}

// Close closes the device and the image.
func (d *Device) Close(t *testing.T) {
	t.Helper()
	if err := d.Device.Close(); err != nil {
		t.Error(err)
	}
	d.img.Close()
}
