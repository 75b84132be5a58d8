package bitlk

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/xtsctl/xtsctl/disk"
)

// The Windows-made samples of testdata/README.md.
type sample struct {
	file     string
	method   uint16
	password string
	recovery string
	bek      string // startup key file, in the archive
	sha256   string // of the whole device as Windows sees it
	serial   string // NTFS volume serial
}

var samples = []sample{
	{"bitlk-aes-xts-128.img", 0x8004, "anaconda", "235818-357951-253979-013365-241120-245575-342914-591910", "",
		"674e3a976927fd62f3fc26df2c695cac75b8d364e3b45393717efa971f16db0f", "68844E71844E41B4"},
	{"bitlk-aes-cbc-128.img", 0x8002, "anaconda", "042647-302313-590458-071500-554323-116567-412181-516978", "",
		"04500a8120ba355ed206284e03e26e59b7e1f1832868e1d69bb47023ebd3460f", "F2D4F156D4F11E13"},
	{"bitlk-aes-xts-128-startup-key.img", 0x8004, "", "363770-230505-096371-652674-567006-579150-291038-408111", "4381F759-C4F8-4DE0-BB61-FC33A831BDA5.BEK",
		"bbb68369d8f7badb2c2330349d9d0cf12e68f54eece25e718d2bb13feba23f7a", "27F7B5DB3754A2A9"},
	{"bitlk-aes-cbc-elephant-128.img", 0x8000, "anaconda", "529573-278784-259347-197835-171457-264044-610280-313269", "",
		"b18e4f956295bc0f327e551322261fb9c74ac0d3ce58bf3b806e98474e1619ea", "3ECCF65ACCF60BC1"},
}

var extracted struct {
	once sync.Once
	dir  string
	err  error
}

var tempRoot string

func TestMain(m *testing.M) {
	code := m.Run()
	if tempRoot != "" {
		os.RemoveAll(tempRoot)
	}
	os.Exit(code)
}

// sampleDir extracts testdata/bitlk.tar.xz (sparse) once for the test
// binary and returns the directory holding the images.
func sampleDir(t testing.TB) string {
	t.Helper()
	extracted.once.Do(func() {
		dir, err := os.MkdirTemp("", "bitlk-samples-")
		if err != nil {
			extracted.err = err
			return
		}
		tempRoot = dir
		out, err := exec.Command("tar", "xJSf", "testdata/bitlk.tar.xz", "-C", dir).CombinedOutput()
		if err != nil {
			extracted.err = fmt.Errorf("tar xJSf testdata/bitlk.tar.xz: %v: %s", err, out)
			return
		}
		extracted.dir = filepath.Join(dir, "bitlk")
	})
	if extracted.err != nil {
		t.Fatal(extracted.err)
	}
	return extracted.dir
}

func samplePath(t testing.TB, name string) string {
	return filepath.Join(sampleDir(t), name)
}

// openHeader opens path with the format.
func openHeader(t testing.TB, path string) (*Header, error) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	h, err := Format{}.Open(&disk.Image{Path: path, File: f, Size: fi.Size()}, nil)
	if err != nil {
		return nil, err
	}
	return h.(*Header), nil
}

func mustOpen(t testing.TB, path string) *Header {
	t.Helper()
	h, err := openHeader(t, path)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	return h
}

// request is a read-only unlock request with options.
func request(opts ...string) *disk.Request {
	o := disk.Options{}
	for i := 0; i+1 < len(opts); i += 2 {
		o[opts[i]] = opts[i+1]
	}
	return &disk.Request{Slot: -1, ReadOnly: true, Options: o}
}

// unlock checks and unlocks path with sec.
func unlock(t testing.TB, path string, req *disk.Request, sec *disk.Secret) (*disk.Unlocked, error) {
	t.Helper()
	h, err := openHeader(t, path)
	if err != nil {
		return nil, err
	}
	if _, err := h.Check(req); err != nil {
		return nil, err
	}
	return h.Unlock(context.Background(), req, sec)
}

func mustUnlock(t testing.TB, path string, req *disk.Request, sec *disk.Secret) *disk.Unlocked {
	t.Helper()
	u, err := unlock(t, path, req, sec)
	if err != nil {
		t.Fatalf("unlock %s: %v", filepath.Base(path), err)
	}
	return u
}

// serve serves u from the image at path through the disk layer.
func serve(t testing.TB, path string, u *disk.Unlocked) (*disk.ExtentDevice, *disk.ReaderAt) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	d, err := disk.NewDevice(f, u.Layout, u.Key, disk.AttachOptions{ReadOnly: true})
	if err != nil {
		f.Close()
		t.Fatalf("serve %s: %v", filepath.Base(path), err)
	}
	t.Cleanup(func() { d.Close() })
	return d, disk.NewReaderAt(d)
}

// deviceSHA256 reads the whole device through the layer's ReaderAt.
func deviceSHA256(t testing.TB, r *disk.ReaderAt) string {
	t.Helper()
	h := sha256.New()
	if _, err := io.CopyBuffer(h, io.NewSectionReader(r, 0, r.Size()), make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// ntfsSerial reads the NTFS volume serial from the device's first sector
// as blkid prints it.
func ntfsSerial(t testing.TB, r io.ReaderAt) string {
	t.Helper()
	var b [512]byte
	if _, err := r.ReadAt(b[:], 0); err != nil {
		t.Fatal(err)
	}
	if string(b[3:11]) != "NTFS    " {
		t.Fatalf("the device's first sector is not an NTFS boot sector: % x", b[:16])
	}
	return fmt.Sprintf("%016X", binary.LittleEndian.Uint64(b[0x48:]))
}

// needTool skips the test when a peer is not installed.
func needTool(t testing.TB, name, pkg string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		t.Skipf("%s is not installed (Debian package %s, see scripts/install-deps.sh): skipping the comparison with it", name, pkg)
	}
}
