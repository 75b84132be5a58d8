//go:build linux

package blockdev

import (
	"bytes"
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xtsctl/xtsctl/luks"
	"github.com/xtsctl/xtsctl/sector"
	"github.com/xtsctl/xtsctl/xts"
)

// luksImage formats a LUKS2 image at path with package luks (cheap KDF
// costs), holding data bytes of random plaintext after a dataOffset of
// header (0: cryptsetup's 16 MiB), and returns the header, the volume key
// and the plaintext.
func luksImage(t testing.TB, path string, data int64, opt luks.FormatOptions) (*luks.Header, []byte, []byte) {
	t.Helper()
	opt.Keyslot.Argon2 = &luks.Argon2Params{Time: 4, MemoryKiB: 32, Threads: 1}
	opt.DigestIterations = 1000
	size := opt.ImageSize(data)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	h, key, err := luks.Format(f, size, []byte("luks in blockdev"), opt)
	if err != nil {
		t.Fatal(err)
	}
	plain := make([]byte, data)
	rand.Read(plain)
	if _, err := h.Encrypt(context.Background(), key, bytes.NewReader(plain), f, size, nil); err != nil {
		t.Fatal(err)
	}
	return h, key, plain
}

// TestLUKSStore: the store the FUSE server makes for a LUKS image (the
// segment checkLUKS finds, the codec of its sector parameters) reads the
// plaintext package luks encrypted, sector by sector, and what it writes
// package luks decrypts; the header and the keyslots area stay as they were.
func TestLUKSStore(t *testing.T) {
	for _, opt := range []luks.FormatOptions{
		{},
		{SectorSize: 512, KeySize: 32, DataOffset: 1 << 20},
		{SectorSize: 2048, DataOffset: 2 << 20},
	} {
		path := filepath.Join(t.TempDir(), "img")
		h, key, plain := luksImage(t, path, 256<<10, opt)
		before, _ := os.ReadFile(path)
		req := &Request{Type: TypeLUKS, LUKS: h, Key: key, Path: path, Image: openFile(t, path)}
		if err := checkLUKS(req); err != nil {
			t.Fatal(err)
		}
		seg := *req.segment
		if seg.Offset != int64(h.Segment.Offset) || seg.Length != 256<<10 || seg.Sector != h.SectorParams() {
			t.Fatalf("segment %+v for header segment %+v", seg, h.Segment)
		}
		c, err := xts.NewCipher(key)
		if err != nil {
			t.Fatal(err)
		}
		codec, err := sector.NewCodec(c, seg.Sector)
		if err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		s, err := newSegmentStore(f, seg, codec)
		if err != nil {
			t.Fatal(err)
		}
		ss := s.SectorSize()
		if s.Sectors() != uint64(len(plain)/ss) {
			t.Fatalf("%d sectors, want %d", s.Sectors(), len(plain)/ss)
		}
		got := make([]byte, len(plain))
		if err := s.ReadSectors(got, 0); err != nil || !bytes.Equal(got, plain) {
			t.Fatalf("ReadSectors: %v, equal %v", err, bytes.Equal(got, plain))
		}
		part := make([]byte, 3*ss)
		rand.Read(part)
		if err := s.WriteSectors(part, 7); err != nil {
			t.Fatal(err)
		}
		copy(plain[7*ss:], part)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		after, _ := os.ReadFile(path)
		if !bytes.Equal(after[:h.Segment.Offset], before[:h.Segment.Offset]) {
			t.Fatal("the store wrote before the data segment")
		}
		var out bytes.Buffer
		if _, err := h.Decrypt(context.Background(), key, bytes.NewReader(after), int64(len(after)), &out, nil); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out.Bytes(), plain) {
			t.Fatal("package luks does not decrypt what the store wrote")
		}
	}
}

// TestCheckLUKS: a request whose header is missing, whose key has the
// wrong size, or whose image ends before the segment is refused with the
// kind the command line maps to its exit code.
func TestCheckLUKS(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "img")
	h, key, _ := luksImage(t, path, 64<<10, luks.FormatOptions{})
	short := filepath.Join(dir, "short")
	os.WriteFile(short, make([]byte, 4<<20), 0o600)
	for _, c := range []struct {
		name string
		req  Request
		kind Kind
		want string
	}{
		{"no header", Request{Type: TypeLUKS, Key: key, Path: path, Image: openFile(t, path)}, KindUsage, "without its header"},
		{"short key", Request{Type: TypeLUKS, LUKS: h, Key: key[:32], Path: path, Image: openFile(t, path)}, KindKey, "32-byte key for a 64-byte"},
		{"data device too short", Request{Type: TypeLUKS, LUKS: h, Key: key, Path: short, Image: openFile(t, short)}, KindInput, "beyond the"},
	} {
		err := checkLUKS(&c.req)
		if kindOf(err) != c.kind || err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v (kind %d), want kind %d and %q", c.name, err, kindOf(err), c.kind, c.want)
		}
	}
}
