package main

import (
	"bytes"
	"crypto/rand"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
	"unsafe"
)

// TestImageShrinksWhileOpen truncates the image under a served plain
// volume: reads of the part that is gone fail with EIO (never zeros that a
// filesystem would take for data), reads of the rest still return what was
// written, and close still works and leaves nothing behind.
func TestImageShrinksWhileOpen(t *testing.T) {
	skipUnlessServing(t)
	dir := servingEnv(t)
	img, flags := plainImage(t, dir, 8<<20)
	dev := strings.TrimSpace(mustRun(t, args("open", "--backend", "fuse", flags, img, "shrink")...).stdout)

	data := make([]byte, 8<<20)
	rand.Read(data)
	f, err := os.OpenFile(dev, os.O_RDWR|syscall.O_DIRECT, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := alignedBuffer(1 << 20)
	for off := 0; off < len(data); off += len(buf) {
		copy(buf, data[off:])
		if _, err := f.WriteAt(buf, int64(off)); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}

	if err := os.Truncate(img, 4<<20); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ReadAt(buf, 6<<20); !errors.Is(err, syscall.EIO) {
		t.Errorf("read past the new end of the image: %v, want EIO", err)
	}
	if _, err := f.ReadAt(buf, 1<<20); err != nil {
		t.Fatalf("read before the new end: %v", err)
	}
	if !bytes.Equal(buf, data[1<<20:2<<20]) {
		t.Error("data before the new end changed")
	}
	f.Close()
	mustRun(t, "close", "shrink")
}

// alignedBuffer returns n bytes aligned for O_DIRECT.
func alignedBuffer(n int) []byte {
	b := make([]byte, n+4096)
	off := 4096 - int(uintptrOf(b)%4096)
	return b[off%4096 : off%4096+n]
}

func uintptrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(&b[0])) }
