package tcrypt

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"compress/gzip"

	"github.com/xtsctl/xtsctl/disk"
)

// testImage copies testdata/name (decompressing .gz) to a temporary file
// and returns its path, so that no test touches the committed images.
func testImage(t testing.TB, name string) string {
	t.Helper()
	src, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var r io.Reader = src
	if strings.HasSuffix(name, ".gz") {
		r, err = gzip.NewReader(src)
		if err != nil {
			t.Fatal(err)
		}
		name = strings.TrimSuffix(name, ".gz")
	}
	path := filepath.Join(t.TempDir(), name)
	dst, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, r); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func openImage(t testing.TB, path string, writable bool) *disk.Image {
	t.Helper()
	flag := os.O_RDONLY
	if writable {
		flag = os.O_RDWR
	}
	f, err := os.OpenFile(path, flag, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	return &disk.Image{Path: path, File: f, Size: fi.Size(), Writable: writable}
}

func keyfile(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// unlockImage opens img with opts and the secret.
func unlockImage(t testing.TB, img *disk.Image, opts disk.Options, sec *disk.Secret) (disk.Header, *disk.Unlocked, error) {
	t.Helper()
	h, err := Format.Open(img, opts)
	if err != nil {
		return nil, nil, err
	}
	req := &disk.Request{Slot: -1, Options: opts}
	if _, err := h.Check(req); err != nil {
		return h, nil, err
	}
	u, err := h.Unlock(context.Background(), req, sec)
	return h, u, err
}

// fatSerial reads the volume serial number from a FAT boot sector, as
// blkid prints it (XXXX-XXXX), after checking that the sector is one.
func fatSerial(boot []byte) (string, error) {
	if len(boot) < 512 || boot[510] != 0x55 || boot[511] != 0xAA {
		return "", fmt.Errorf("no boot sector signature")
	}
	bps := binary.LittleEndian.Uint16(boot[11:])
	if bps != 512 && bps != 1024 && bps != 2048 && bps != 4096 {
		return "", fmt.Errorf("bytes per sector %d", bps)
	}
	off := 0x26 // FAT12/16 extended BPB
	if binary.LittleEndian.Uint16(boot[0x16:]) == 0 {
		off = 0x42 // FAT32
	}
	if boot[off] != 0x29 && boot[off] != 0x28 {
		return "", fmt.Errorf("no extended boot signature")
	}
	fsType := string(boot[off+0x10 : off+0x18])
	if !strings.HasPrefix(fsType, "FAT") {
		return "", fmt.Errorf("file system type %q", fsType)
	}
	s := binary.LittleEndian.Uint32(boot[off+1:])
	return fmt.Sprintf("%04X-%04X", s>>16, s&0xffff), nil
}

// plaintext reads the whole unlocked device through disk.NewDevice and
// disk.NewReaderAt.
func plaintext(t testing.TB, path string, u *disk.Unlocked) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	d, err := disk.NewDevice(f, u.Layout, u.Key, disk.AttachOptions{ReadOnly: true})
	if err != nil {
		f.Close()
		t.Fatal(err)
	}
	defer d.Close()
	r := disk.NewReaderAt(d)
	buf := make([]byte, r.Size())
	if n, err := r.ReadAt(buf, 0); err != nil || n != len(buf) {
		t.Fatalf("reading the plaintext: %d bytes, %v", n, err)
	}
	return buf
}

// blkidUUID runs blkid -p on a file holding plain, if blkid exists.
func blkidUUID(t testing.TB, plain []byte) (string, bool) {
	t.Helper()
	if _, err := exec.LookPath("blkid"); err != nil {
		return "", false
	}
	p := filepath.Join(t.TempDir(), "plain")
	if err := os.WriteFile(p, plain, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("blkid", "-p", "-o", "value", "-s", "UUID", p).Output()
	if err != nil {
		t.Fatalf("blkid -p: %v", err)
	}
	return string(bytes.TrimSpace(out)), true
}
