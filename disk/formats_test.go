package disk_test

// The formats registered by xtsctl's own packages, through the layer: each
// image made by the format's own writer (or by hand, for plain) is
// detected, checked, unlocked and read back through the generic path, and
// must give the plaintext it was made from.

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xtsctl/xtsctl/disk"
	"github.com/xtsctl/xtsctl/luks"
	"github.com/xtsctl/xtsctl/luks/luksimage"
	"github.com/xtsctl/xtsctl/plain"
	"github.com/xtsctl/xtsctl/sector"
	"github.com/xtsctl/xtsctl/volume"
)

func randomBytes(n int, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

func writeFile(t *testing.T, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "img")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// readAll unlocks the image at path as format name and reads its whole
// plaintext through disk.Attach.
func readAll(t *testing.T, path, name string, opt disk.Options, sec *disk.Secret) []byte {
	t.Helper()
	img, err := disk.OpenImage(path, disk.ImageOptions{Access: disk.Read})
	if err != nil {
		t.Fatal(err)
	}
	defer img.Close()
	f, ok := disk.Lookup(name)
	if !ok {
		t.Fatalf("format %s is not registered", name)
	}
	h, err := f.Open(img, opt)
	if err != nil {
		t.Fatal(err)
	}
	req := &disk.Request{Slot: -1, ReadOnly: true, Options: opt}
	if _, err := h.Check(req); err != nil {
		t.Fatal(err)
	}
	u, err := h.Unlock(context.Background(), req, sec)
	if err != nil {
		t.Fatal(err)
	}
	defer u.Wipe()
	b, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	d, err := disk.Attach(b, u, disk.AttachOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	r := disk.NewReaderAt(d)
	out := make([]byte, r.Size())
	if _, err := r.ReadAt(out, 0); err != nil && err != io.EOF {
		t.Fatal(err)
	}
	return out
}

func TestDetect(t *testing.T) {
	pt := randomBytes(1<<20, 1)
	vol := makeVolume(t, pt, "pw")
	lk := makeLUKS(t, pt, "pw")
	for _, tc := range []struct {
		path string
		want string
	}{{vol, volume.FormatName}, {lk, luksimage.FormatName}, {writeFile(t, pt), ""}} {
		f, _ := os.Open(tc.path)
		size, _ := f.Seek(0, io.SeekEnd)
		found := disk.Detect(f, size)
		f.Close()
		switch {
		case tc.want == "" && len(found) != 0:
			t.Errorf("random bytes detected as %s", disk.Describe(found))
		case tc.want != "" && (len(found) != 1 || found[0].Info().Name != tc.want):
			t.Errorf("%s: detected %v, want %s", tc.path, found, tc.want)
		}
	}
}

func makeVolume(t *testing.T, pt []byte, pass string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "vol")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_, _, err = volume.Create(context.Background(), f, bytes.NewReader(pt), int64(len(pt)), volume.CreateOptions{
		SectorSize: 4096, TagSize: 32, Passphrase: []byte(pass), KDF: volume.KDFParams{Time: 1, MemoryKiB: 64, Threads: 1},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return path
}

func makeLUKS(t *testing.T, pt []byte, pass string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "luks")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	o := luks.FormatOptions{SectorSize: 512, DataOffset: 1 << 20, DigestIterations: 1000,
		Keyslot: luks.KeyslotOptions{Argon2: &luks.Argon2Params{Time: 4, MemoryKiB: 1024, Threads: 1}}}
	if err := f.Truncate(o.ImageSize(int64(len(pt)))); err != nil {
		t.Fatal(err)
	}
	if _, err := luks.Create(context.Background(), f, o.ImageSize(int64(len(pt))), []byte(pass), o, bytes.NewReader(pt), nil); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestVolumeThroughLayer(t *testing.T) {
	pt := randomBytes(1<<20, 2)
	path := makeVolume(t, pt, "correct horse")
	if got := readAll(t, path, volume.FormatName, nil, &disk.Secret{Passphrase: []byte("correct horse")}); !bytes.Equal(got, pt) {
		t.Fatal("volume read through the layer differs from its plaintext")
	}
	img, _ := disk.OpenImage(path, disk.ImageOptions{})
	defer img.Close()
	h, err := volume.Format.Open(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.Unlock(context.Background(), &disk.Request{Slot: -1}, &disk.Secret{Passphrase: []byte("wrong")})
	if !errors.Is(err, disk.ErrWrongSecret) || disk.KindOf(err) != disk.KindKey {
		t.Fatalf("wrong passphrase: %v (kind %v)", err, disk.KindOf(err))
	}
	if _, err := h.Check(&disk.Request{Slot: 3}); disk.KindOf(err) != disk.KindUsage {
		t.Fatalf("an empty slot asked for: %v, want a usage error before any prompt", err)
	}
}

func TestLUKSThroughLayer(t *testing.T) {
	pt := randomBytes(1<<20, 3)
	path := makeLUKS(t, pt, "pw")
	if got := readAll(t, path, "luks2", nil, &disk.Secret{Passphrase: []byte("pw")}); !bytes.Equal(got, pt) {
		t.Fatal("LUKS2 read through the layer differs from its plaintext")
	}
	if got := readAll(t, path, "luks", nil, &disk.Secret{KeyFiles: [][]byte{[]byte("pw")}}); !bytes.Equal(got, pt) {
		t.Fatal("LUKS2 unlocked by key file differs from its plaintext")
	}
}

func TestPlainThroughLayer(t *testing.T) {
	key := randomBytes(64, 4)
	pt := randomBytes(64<<10, 5)
	p := sector.Params{Size: 1024, IVMode: sector.Plain64LargeSectors, IVOffset: 16}
	c, err := sector.NewCodecKey(key, p)
	if err != nil {
		t.Fatal(err)
	}
	img := make([]byte, 8*512+len(pt))
	c.Encrypt(img[8*512:], pt, 0)
	path := writeFile(t, img)
	opt := disk.Options{plain.OptSectorSize: "1024", plain.OptIVLargeSectors: "true", plain.OptSkip: "16", plain.OptOffset: "8"}
	if got := readAll(t, path, plain.FormatName, opt, &disk.Secret{KeyFiles: [][]byte{key}}); !bytes.Equal(got, pt) {
		t.Fatal("plain image read through the layer differs from its plaintext")
	}
}

// Pick goes by the header, refuses a --type the header contradicts
// (naming what the image is) unless forced, and falls back only where no
// header is recognised.
func TestPick(t *testing.T) {
	pt := randomBytes(1<<20, 21)
	vol := makeVolume(t, pt, "pw")
	pick := func(path string, o disk.PickOptions) (disk.Format, error) {
		img, err := disk.OpenImage(path, disk.ImageOptions{Access: disk.Inspect})
		if err != nil {
			t.Fatal(err)
		}
		defer img.Close()
		return disk.Pick(img, o)
	}
	if f, err := pick(vol, disk.PickOptions{Fallback: plain.FormatName}); err != nil || f.Info().Name != volume.FormatName {
		t.Errorf("a volume picked as %v, %v", f, err)
	}
	_, err := pick(vol, disk.PickOptions{Type: "luks2"})
	if disk.KindOf(err) != disk.KindInput || !strings.Contains(err.Error(), "is an xtsctl volume, not a LUKS image") {
		t.Errorf("--type luks2 on a volume: %v (kind %v)", err, disk.KindOf(err))
	}
	if f, err := pick(vol, disk.PickOptions{Type: "luks2", Force: true}); err != nil || f.Info().Name != luksimage.FormatName {
		t.Errorf("--type luks2 --force on a volume: %v, %v", f, err)
	}
	if _, err := pick(vol, disk.PickOptions{Type: "no-such-format"}); disk.KindOf(err) != disk.KindUsage {
		t.Errorf("an unknown type: %v", err)
	}
	noise := writeFile(t, pt)
	if f, err := pick(noise, disk.PickOptions{Fallback: plain.FormatName}); err != nil || f.Info().Name != plain.FormatName {
		t.Errorf("no header, fallback plain: %v, %v", f, err)
	}
	if _, err := pick(noise, disk.PickOptions{}); !errors.Is(err, disk.ErrNotFormat) {
		t.Errorf("no header, no fallback: %v, want ErrNotFormat", err)
	}
}
