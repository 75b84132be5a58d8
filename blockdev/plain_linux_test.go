package blockdev

import (
	"bytes"
	"crypto/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/xtsctl/xtsctl/sector"
	"github.com/xtsctl/xtsctl/volume"
	"github.com/xtsctl/xtsctl/xts"
)

// TestPlainStore checks plainStore against the xts package directly: what
// it writes is the ciphertext of the plaintext at the right tweaks and
// offset, and it reads it back.
func TestPlainStore(t *testing.T) {
	key := make([]byte, 64)
	rand.Read(key)
	c, err := xts.NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	p := volume.Plain{Sector: sector.Params{Size: 4096, IVMode: sector.Plain64LargeSectors, IVOffset: 16}, Offset: 3}
	codec, err := sector.NewCodec(c, p.Sector)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "img")
	if err := os.WriteFile(path, make([]byte, 3*512+8*4096), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	s, err := newPlainStore(f, p, codec)
	if err != nil {
		t.Fatal(err)
	}
	if s.Sectors() != 8 {
		t.Fatalf("Sectors() = %d, want 8", s.Sectors())
	}
	plain := make([]byte, 2*4096)
	rand.Read(plain)
	if err := s.WriteSectors(bytes.Clone(plain), 5); err != nil {
		t.Fatal(err)
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
	f, _ = os.Open(path)
	s, err = newPlainStore(f, p, codec)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got := make([]byte, len(plain))
	if err := s.ReadSectors(got, 5); err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("ReadSectors: err %v, equal %v", err, bytes.Equal(got, plain))
	}
}

func TestPlainStoreRejectsSizes(t *testing.T) {
	p := volume.Plain{Sector: sector.Params{Size: 4096}, Offset: 8}
	for _, size := range []int{0, 4096, 4096 + 512} {
		path := filepath.Join(t.TempDir(), "img")
		os.WriteFile(path, make([]byte, size), 0o600)
		f, _ := os.Open(path)
		if _, err := newPlainStore(f, p, nil); err == nil {
			t.Errorf("a %d-byte image with a 4096-byte offset was accepted", size)
		}
		f.Close()
	}
}
