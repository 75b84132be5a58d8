//go:build linux

package blockdev

import (
	"bytes"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xtsctl/xtsctl/disk"
	"github.com/xtsctl/xtsctl/xts"
)

// TestPlainDevice checks what the FUSE server serves for a plain image
// (the layout plain mode unlocks from cryptsetup's options, through
// disk.Attach over openBacking) against the xts package directly: what
// it writes is the ciphertext of the plaintext at the right tweaks and
// offset, nothing else in the image changes, and it reads it back.
func TestPlainDevice(t *testing.T) {
	key := make([]byte, 64)
	rand.Read(key)
	c, err := xts.NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	// --sector-size 4096 --iv-large-sectors --skip 16 --offset 3
	opts := plainOptions(4096, 3, 16, true)
	path := filepath.Join(t.TempDir(), "img")
	if err := os.WriteFile(path, make([]byte, 3*512+8*4096), 0o600); err != nil {
		t.Fatal(err)
	}
	u := unlocked(t, path, "plain", opts, keyFile(key))
	b, err := openBacking(path, false)
	if err != nil {
		t.Fatal(err)
	}
	s, err := disk.Attach(b, u, disk.AttachOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.(*disk.ExtentDevice); !ok {
		t.Fatalf("a plain image is served by %T, not the generic extent device", s)
	}
	if s.Sectors() != 8 || s.SectorSize() != 4096 {
		t.Fatalf("%d sectors of %d bytes, want 8 of 4096", s.Sectors(), s.SectorSize())
	}
	plain := make([]byte, 2*4096)
	rand.Read(plain)
	buf := bytes.Clone(plain)
	if err := s.WriteSectors(buf, 5); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf, plain) {
		t.Error("WriteSectors changed the buffer it was given")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	img, _ := os.ReadFile(path)
	for i := range 2 {
		want := make([]byte, 4096)
		// iv_large_sectors with skip 16: tweak = 16/8 + sector number.
		c.Encrypt(want, plain[i*4096:(i+1)*4096], uint64(2+5+i))
		at := 3*512 + (5+i)*4096
		if !bytes.Equal(img[at:at+4096], want) {
			t.Fatalf("sector %d on disk is not the XTS ciphertext at tweak %d", 5+i, 2+5+i)
		}
	}
	untouched := append(bytes.Clone(img[:3*512+5*4096]), img[3*512+7*4096:]...)
	if !bytes.Equal(untouched, make([]byte, len(untouched))) {
		t.Error("the device wrote outside the two sectors it was asked to")
	}

	b, err = openBacking(path, true)
	if err != nil {
		t.Fatal(err)
	}
	s, err = disk.Attach(b, u, disk.AttachOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got := make([]byte, len(plain))
	if err := s.ReadSectors(got, 5); err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("ReadSectors: err %v, equal %v", err, bytes.Equal(got, plain))
	}
}

// TestPlainRefusesSizes: an image that holds no whole sectors after the
// offset is refused by plain mode's unlock, and a layout made for a
// larger image is refused by Open and by the device over the short one.
func TestPlainRefusesSizes(t *testing.T) {
	opts := plainOptions(4096, 8, 0, false) // the data starts at byte 4096
	key := make([]byte, 64)
	rand.Read(key)
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	os.WriteFile(good, make([]byte, 2*4096), 0o600)
	u := unlocked(t, good, "plain", opts, keyFile(key))
	for _, c := range []struct {
		size int
		want string
	}{
		{0, "nothing after the offset"},
		{4096, "nothing after the offset"},
		{4096 + 512, "not a whole number of 4096-byte sectors"},
	} {
		path := filepath.Join(dir, "img")
		os.WriteFile(path, make([]byte, c.size), 0o600)
		if _, err := tryUnlock(t, path, "plain", &disk.Request{Slot: -1, Options: opts}, keyFile(key)); kindOf(err) != KindInput || !strings.Contains(err.Error(), c.want) {
			t.Errorf("a %d-byte image with a 4096-byte offset unlocked: %v, want an input error with %q", c.size, err, c.want)
		}
		if err := checkUnlocked(&Request{Unlocked: u, Path: path, Image: openFile(t, path)}); kindOf(err) != KindInput || !strings.Contains(err.Error(), "past the end") {
			t.Errorf("the layout of a larger image over %d bytes: %v", c.size, err)
		}
		b, err := openBacking(path, true)
		if err != nil {
			t.Fatal(err)
		}
		if d, err := disk.Attach(b, u, disk.AttachOptions{ReadOnly: true}); err == nil || !strings.Contains(err.Error(), "past the end") {
			t.Errorf("served the layout of a larger image from %d bytes: %v", c.size, err)
			if d != nil {
				d.Close()
			}
		}
	}
}
