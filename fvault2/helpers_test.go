package fvault2

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xtsctl/xtsctl/disk"
	"github.com/xtsctl/xtsctl/xts"
)

// The sample's values: cryptsetup's fvault2-compat-test and
// testdata/README.md.
const (
	samplePass       = "heslo123"
	sampleLVOffset   = 67108864
	sampleLVSize     = 167772160
	sampleLVSHA256   = "2c662e36c0f7e2f5583e6a939bbcbdc660805692d0fccaa45ad4052beb3b8e18"
	sampleFSUUID     = "de124d8a-2164-394e-924f-8e28db0a09cb"
	samplePVUUID     = "fc52bfae-5a1f-4f9b-b3a6-f33303a0e401"
	sampleFamilyUUID = "33a76caa-1481-4bc5-8d04-1ac1707c19c0"
	sampleIterations = 204222
	sampleSalt       = "2c249edb6663d6fbcc7905b7a4d72752"
	sampleSize       = 536829952
	sampleEncFirst   = 2049 // the encrypted metadata's first block
)

// sampleImage extracts the sample into a temporary directory and returns
// its path: every test gets its own copy to change.
func sampleImage(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("tar", "xJSf", filepath.Join("testdata", "fvault2.tar.xz"), "-C", dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("extracting the sample: %v\n%s", err, out)
	}
	return filepath.Join(dir, "fvault2", "fvault2-small.img")
}

func openImage(t testing.TB, path string) *disk.Image {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	return &disk.Image{Path: path, File: f, Size: fi.Size()}
}

func openHeader(t testing.TB, path string) *header {
	t.Helper()
	h, err := Format{}.Open(openImage(t, path), nil)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return h.(*header)
}

func req() *disk.Request { return &disk.Request{Slot: -1, ReadOnly: true} }

func unlock(t testing.TB, h disk.Header, r *disk.Request, pass string) (*disk.Unlocked, error) {
	t.Helper()
	if _, err := h.Check(r); err != nil {
		return nil, err
	}
	return h.Unlock(context.Background(), r, &disk.Secret{Passphrase: []byte(pass)})
}

// decryptAll reads the unlocked device through disk.NewDevice and
// disk.NewReaderAt, in 1 MiB reads, and returns its SHA-256 (and the
// bytes, if keep).
func decryptAll(t testing.TB, path string, u *disk.Unlocked, keep bool) (string, []byte) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	d, err := disk.NewDevice(f, u.Layout, u.Key, disk.AttachOptions{ReadOnly: true})
	if err != nil {
		f.Close()
		t.Fatalf("NewDevice: %v", err)
	}
	defer d.Close()
	r := disk.NewReaderAt(d)
	h := sha256.New()
	var all bytes.Buffer
	buf := make([]byte, 1<<20)
	for off := int64(0); off < r.Size(); {
		n, err := r.ReadAt(buf, off)
		if err != nil && !(errors.Is(err, io.EOF) && off+int64(n) == r.Size()) {
			t.Fatalf("ReadAt(%d): %v", off, err)
		}
		h.Write(buf[:n])
		if keep {
			all.Write(buf[:n])
		}
		off += int64(n)
	}
	return hex.EncodeToString(h.Sum(nil)), all.Bytes()
}

// The image surgery below changes the sample the way an attacker (or a
// different Mac) could, keeping every checksum right.

// metadataCipher is the sample's metadata key (key data ‖ PV UUID).
func metadataCipher(t testing.TB, img []byte) *xts.Cipher {
	t.Helper()
	key := append(bytes.Clone(img[176:192]), img[304:320]...)
	c, err := xts.NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// editBlock decrypts encrypted metadata block i of the image at path,
// lets edit change it, fixes its checksum, encrypts it back.
func editBlock(t testing.TB, path string, i int, edit func(b []byte)) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	hdr := make([]byte, 512)
	if _, err := f.ReadAt(hdr, 0); err != nil {
		t.Fatal(err)
	}
	c := metadataCipher(t, hdr)
	off := int64(sampleEncFirst*4096 + i*mdBlockSize)
	b := make([]byte, mdBlockSize)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	c.Decrypt(b, b, uint64(i))
	edit(b)
	setChecksum(b)
	c.Encrypt(b, b, uint64(i))
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// editXML replaces old with new in the plist of a 0x0019 or 0x001a
// block, keeping the size field right.
func editXML(t testing.TB, path string, i int, old, new string) {
	t.Helper()
	editBlock(t, path, i, func(b []byte) {
		offAt := 112
		if le16(b[10:]) == typeLVInfo {
			offAt = 128
		}
		off, size := le32(b[offAt:]), le32(b[offAt+4:])
		x := string(b[off : off+size])
		if !strings.Contains(x, old) {
			t.Fatalf("block %d's plist has no %q", i, old)
		}
		x = strings.Replace(x, old, new, 1)
		clear(b[off:])
		copy(b[off:], x)
		binary.LittleEndian.PutUint32(b[offAt+4:], uint32(len(x)))
		if offAt == 112 { // the 0x0019 block's compressed/uncompressed sizes
			binary.LittleEndian.PutUint32(b[104:], uint32(len(x)))
			binary.LittleEndian.PutUint32(b[108:], uint32(len(x)))
		}
	})
}

// setChecksum writes the seed and CRC-32C of a CoreStorage structure.
func setChecksum(b []byte) {
	binary.LittleEndian.PutUint32(b[4:], 0xFFFFFFFF)
	binary.LittleEndian.PutUint32(b, ^crc32.Update(0, castagnoli, b[8:]))
}

// wrapKey is RFC 3394 §2.2.1 (index-based), the inverse of unwrapKey:
// the tests wrap keys with it.
func wrapKey(kek, key []byte) []byte {
	n := len(key) / 8
	out := make([]byte, 8*(n+1))
	copy(out[8:], key)
	a := kwIV
	b := make([]byte, 16)
	blk := aesBlock(kek)
	for j := 0; j <= 5; j++ {
		for i := 1; i <= n; i++ {
			copy(b[:8], a[:])
			copy(b[8:], out[8*i:8*(i+1)])
			blk.Encrypt(b, b)
			binary.BigEndian.PutUint64(a[:], binary.BigEndian.Uint64(b[:8])^uint64(n*j+i))
			copy(out[8*i:8*(i+1)], b[8:])
		}
	}
	copy(out, a[:])
	return out
}

func mustHex(s string) []byte {
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		panic(err)
	}
	return b
}

func writeFile(t testing.TB, path string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func needTool(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s is not installed (scripts/install-deps.sh installs it)", name)
	}
	return p
}
