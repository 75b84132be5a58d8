//go:build linux

package blockdev

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xtsctl/xtsctl/disk"
	"github.com/xtsctl/xtsctl/luks"
)

// TestLUKSDevice: what the FUSE server serves for a LUKS image (the
// layout the LUKS format unlocks, through disk.Attach over openBacking)
// reads the plaintext package luks encrypted, sector by sector, and what
// it writes package luks decrypts; the header and the keyslots area stay
// as they were.
func TestLUKSDevice(t *testing.T) {
	for _, opt := range []luks.FormatOptions{
		{},
		{SectorSize: 512, KeySize: 32, DataOffset: 1 << 20},
		{SectorSize: 2048, DataOffset: 2 << 20},
	} {
		path := filepath.Join(t.TempDir(), "img")
		h, key, plain := luksImage(t, path, 256<<10, opt)
		before, _ := os.ReadFile(path)
		u := unlocked(t, path, "luks", nil, passphrase(luksPass))
		if !bytes.Equal(u.Key, key) {
			t.Fatal("the LUKS format unlocks another key than package luks made")
		}
		req := &Request{Unlocked: u, Path: path, Image: openFile(t, path)}
		if err := checkUnlocked(req); err != nil {
			t.Fatal(err)
		}
		l := u.Layout
		if len(l.Extents) != 1 {
			t.Fatalf("layout of %d extents for one data segment", len(l.Extents))
		}
		e := l.Extents[0]
		if e.Kind != disk.Crypt || e.Source != int64(h.Segment.Offset) || e.Length != 256<<10 || e.Sector != h.SectorParams() ||
			l.Cipher != h.Cipher || l.KeyBits != 8*h.KeySize || l.SectorSize != h.SectorParams().Size {
			t.Fatalf("layout %+v for header segment %+v", l, h.Segment)
		}
		b, err := openBacking(path, false)
		if err != nil {
			t.Fatal(err)
		}
		d, err := disk.Attach(b, u, disk.AttachOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := d.(*disk.ExtentDevice); !ok {
			t.Fatalf("a LUKS image is served by %T, not the generic extent device", d)
		}
		ss := d.SectorSize()
		if d.Sectors() != uint64(len(plain)/ss) {
			t.Fatalf("%d sectors, want %d", d.Sectors(), len(plain)/ss)
		}
		got := make([]byte, len(plain))
		if err := d.ReadSectors(got, 0); err != nil || !bytes.Equal(got, plain) {
			t.Fatalf("ReadSectors: %v, equal %v", err, bytes.Equal(got, plain))
		}
		part := make([]byte, 3*ss)
		rand.Read(part)
		if err := d.WriteSectors(part, 7); err != nil {
			t.Fatal(err)
		}
		copy(plain[7*ss:], part)
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		after, _ := os.ReadFile(path)
		if !bytes.Equal(after[:h.Segment.Offset], before[:h.Segment.Offset]) {
			t.Fatal("the device wrote before the data segment")
		}
		var out bytes.Buffer
		if _, err := h.Decrypt(context.Background(), key, bytes.NewReader(after), int64(len(after)), &out, nil); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out.Bytes(), plain) {
			t.Fatal("package luks does not decrypt what the device wrote")
		}
	}
}

// TestCheckUnlocked: Open refuses, before any backend is picked, what
// cannot be served from the image it was handed: nothing unlocked, data
// the format unlocked but cannot serve, a layout that runs past the
// image (a LUKS header whose data device is too short), and a layout
// that can only be read, opened read-write. Each is refused with the
// kind the command line maps to its exit code; the same requests that
// fit are accepted.
func TestCheckUnlocked(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "img")
	luksImage(t, path, 64<<10, luks.FormatOptions{})
	u := unlocked(t, path, "luks", nil, passphrase(luksPass))
	short := filepath.Join(dir, "short")
	os.WriteFile(short, make([]byte, 4<<20), 0o600)

	// The header alone, without its data: cryptsetup's --test-passphrase
	// unlocks it, but it has nothing to serve.
	headerOnly := filepath.Join(dir, "header-only")
	img, _ := os.ReadFile(path)
	os.WriteFile(headerOnly, img[:luks.DefaultDataOffset], 0o600)
	tu, err := tryUnlock(t, headerOnly, "luks", &disk.Request{Slot: -1, TestOnly: true}, passphrase(luksPass))
	if err != nil || tu.Unservable == "" {
		t.Fatalf("unlocking a LUKS header without data to test the passphrase: %+v, %v", tu, err)
	}

	readOnly := *u
	readOnly.Layout.ReadOnly = "xtsctl does not write this format"
	shortKey := *u
	shortKey.Key = u.Key[:32]
	for _, c := range []struct {
		name     string
		req      Request
		kind     Kind
		want     string
		sentinel error
	}{
		{"nothing unlocked", Request{Path: path, Image: openFile(t, path)}, KindUsage, "nothing unlocked", nil},
		{"unservable", Request{Unlocked: tu, Path: headerOnly, Image: openFile(t, headerOnly)}, KindInput, tu.Unservable, disk.ErrUnsupported},
		{"data device too short", Request{Unlocked: u, Path: short, Image: openFile(t, short)}, KindInput, "past the end of the 4194304-byte image", nil},
		{"read-only layout, read-write", Request{Unlocked: &readOnly, Path: path, Image: openFile(t, path)}, KindUsage, "served read-only: xtsctl does not write this format", nil},
		{"short key", Request{Unlocked: &shortKey, Path: path, Image: openFile(t, path)}, KindKey, "a 32-byte key for a 512-bit cipher key", nil},
	} {
		err := checkUnlocked(&c.req)
		if kindOf(err) != c.kind || err == nil || !strings.Contains(err.Error(), c.want) || c.sentinel != nil && !errors.Is(err, c.sentinel) {
			t.Errorf("%s: %v (kind %v), want kind %v and %q", c.name, err, kindOf(err), c.kind, c.want)
		}
		// Open refuses it the same way, before any backend.
		c.req.Name, c.req.Backend = "refused", "no such backend"
		if _, err2 := Open(context.Background(), &c.req, Options{}); kindOf(err2) != c.kind || err2 == nil || err2.Error() != err.Error() {
			t.Errorf("%s: Open: %v (kind %v), want what checkUnlocked said", c.name, err2, kindOf(err2))
		}
	}
	if h := hintsOf(checkUnlocked(&Request{Unlocked: &readOnly, Path: path, Image: openFile(t, path)})); len(h) != 1 || !strings.Contains(h[0], "--readonly") {
		t.Errorf("hints for a read-only layout opened read-write: %q", h)
	}
	for _, ok := range []Request{
		{Unlocked: u, Path: path, Image: openFile(t, path)},
		{Unlocked: &readOnly, Path: path, Image: openFile(t, path), ReadOnly: true},
	} {
		if err := checkUnlocked(&ok); err != nil {
			t.Errorf("read-only %v: %v", ok.ReadOnly, err)
		}
	}
}
