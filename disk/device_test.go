package disk

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xtsctl/xtsctl/sector"
	"github.com/xtsctl/xtsctl/xts"
)

func testKey() []byte {
	k := make([]byte, 64)
	for i := range k {
		k[i] = byte(i*7 + 3)
	}
	return k
}

// TestExtentDevice builds an image by hand, extent by extent, with
// xts.Cipher and the tweak rule written out, and reads and writes it
// through ExtentDevice and the byte-level adapters.
func TestExtentDevice(t *testing.T) {
	const ss = 1024
	key := testKey()
	c, err := xts.NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	// Plaintext device: 8 sectors of crypt (image byte 65536, tweaks from
	// 1000, plain64), 2 zero sectors, 4 clear sectors (image byte 4096),
	// 6 sectors of crypt (image byte 16384, large-sector tweaks from 40).
	l := Layout{SectorSize: ss, Cipher: XTSPlain64, KeyBits: 512, Extents: []Extent{
		{Offset: 0, Length: 8 * ss, Kind: Crypt, Source: 65536, Sector: sector.Params{Size: ss, IVOffset: 1000}},
		{Offset: 8 * ss, Length: 2 * ss, Kind: Zero},
		{Offset: 10 * ss, Length: 4 * ss, Kind: Clear, Source: 4096},
		{Offset: 14 * ss, Length: 6 * ss, Kind: Crypt, Source: 16384, Sector: sector.Params{Size: ss, IVMode: sector.Plain64LargeSectors, IVOffset: 80}},
	}}
	l.Size = 20 * ss
	img := make([]byte, 65536+8*ss)
	plain := make([]byte, l.Size)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range plain {
		plain[i] = byte(rng.Uint32())
	}
	clear(plain[8*ss : 10*ss])
	for i := range 8 {
		c.Encrypt(img[65536+i*ss:65536+(i+1)*ss], plain[i*ss:(i+1)*ss], 1000+uint64(i)*2)
	}
	copy(img[4096:], plain[10*ss:14*ss])
	for i := range 6 {
		c.Encrypt(img[16384+i*ss:16384+(i+1)*ss], plain[(14+i)*ss:(15+i)*ss], 40+uint64(i))
	}
	path := filepath.Join(t.TempDir(), "img")
	if err := os.WriteFile(path, img, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewDevice(f, l, key, AttachOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, l.Size)
	if err := d.ReadSectors(got, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, plain) {
		t.Fatal("whole device differs from the plaintext made by hand")
	}
	r := NewReaderAt(d)
	for range 200 {
		off := rng.Int64N(l.Size)
		n := rng.IntN(int(l.Size-off)) + 1
		buf := make([]byte, n)
		if m, err := r.ReadAt(buf, off); err != nil || m != n || !bytes.Equal(buf, plain[off:off+int64(n)]) {
			t.Fatalf("ReadAt(%d bytes at %d) = %d, %v, or wrong bytes", n, off, m, err)
		}
	}
	// Writes across extent borders; the zero extent refuses them.
	w := NewWriterAt(d)
	patch := bytes.Repeat([]byte{0xa5}, 3*ss+100)
	if _, err := w.WriteAt(patch, 11*ss+7); err != nil {
		t.Fatal(err)
	}
	copy(plain[11*ss+7:], patch)
	if _, err := w.WriteAt([]byte{1}, 9*ss); err == nil || !strings.Contains(err.Error(), "metadata") {
		t.Fatalf("write into a zero extent: %v", err)
	}
	if err := d.ReadSectors(got, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, plain) {
		t.Fatal("device differs after writes across extents")
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	// What landed in the image is what encrypting by hand gives.
	img2, _ := os.ReadFile(path)
	want := make([]byte, ss)
	for i := range 6 {
		c.Encrypt(want, plain[(14+i)*ss:(15+i)*ss], 40+uint64(i))
		if !bytes.Equal(img2[16384+i*ss:16384+(i+1)*ss], want) {
			t.Fatalf("sector %d of the last extent is not what encryption by hand gives", i)
		}
	}
}

func TestLayoutCheck(t *testing.T) {
	p := sector.Params{Size: 512}
	good := func() Layout { return SingleExtent(4096, 8192, p, XTSPlain64, 512) }
	for _, tc := range []struct {
		name string
		edit func(*Layout)
		want string
	}{
		{"past the image", func(l *Layout) { l.Extents[0].Source = 1 << 20 }, "past the end"},
		{"negative source", func(l *Layout) { l.Extents[0].Source = -512 }, "past the end"},
		{"overflowing length", func(l *Layout) { l.Extents[0].Length = 1<<63 - 511; l.Size = l.Extents[0].Length }, "whole"},
		{"partial sector", func(l *Layout) { l.Extents[0].Length = 1000; l.Size = 1000 }, "whole"},
		{"gap", func(l *Layout) { l.Extents[0].Offset = 512 }, "starts at"},
		{"short of size", func(l *Layout) { l.Size = 16384 }, "hold"},
		{"bad sector size", func(l *Layout) { l.SectorSize = 768 }, "sector"},
		{"mixed sector sizes", func(l *Layout) { l.Extents[0].Sector.Size = 4096 }, "sectors in a device"},
		{"unknown kind", func(l *Layout) { l.Extents[0].Kind = "linear" }, "unknown kind"},
		{"empty", func(l *Layout) { l.Extents = nil }, "no data"},
	} {
		l := good()
		if err := l.Check(65536); err != nil {
			t.Fatalf("good layout: %v", err)
		}
		tc.edit(&l)
		if err := l.Check(65536); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Check = %v, want an error with %q", tc.name, err, tc.want)
		}
	}
}

// TestDecryptStream: the streaming decryption of every format without a
// Decrypter gives what the device reads, across extents and chunks.
func TestDecryptStream(t *testing.T) {
	const ss = 512
	key := testKey()
	rng := rand.New(rand.NewPCG(7, 8))
	// Extents whose borders fall inside stream chunks: 3 MiB - 1 KiB of
	// crypt, 5 zero sectors, 1 MiB + 3 sectors of crypt with other tweaks.
	n1, n2 := int64(3<<20-1024), int64(1<<20+3*ss)
	img := make([]byte, 8192+n1+n2)
	for i := range img {
		img[i] = byte(rng.Uint32())
	}
	l := Layout{SectorSize: ss, Cipher: XTSPlain64, KeyBits: 512, Extents: []Extent{
		{Offset: 0, Length: n1, Kind: Crypt, Source: 8192, Sector: sector.Params{Size: ss, IVOffset: 99}},
		{Offset: n1, Length: 5 * ss, Kind: Zero},
		{Offset: n1 + 5*ss, Length: n2, Kind: Crypt, Source: 8192 + n1, Sector: sector.Params{Size: ss}},
	}}
	l.Size = n1 + 5*ss + n2
	path := filepath.Join(t.TempDir(), "img")
	if err := os.WriteFile(path, img, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d, err := NewDevice(f, l, key, AttachOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	want := make([]byte, l.Size)
	if err := d.ReadSectors(want, 0); err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	var progress int64
	res, err := Decrypt(context.Background(), f, &Unlocked{Format: "test", Layout: l, Key: key}, &got, DecryptOptions{Progress: func(n int64) { progress = n }})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want) || res.Bytes != l.Size || progress != l.Size {
		t.Fatalf("stream decryption differs from the device's reads (%d of %d bytes, progress %d)", res.Bytes, l.Size, progress)
	}
}
