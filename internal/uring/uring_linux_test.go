package uring

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// newRing locks the test to its thread (the ring is single-issuer) and
// returns a ring closed at the end of the test.
func newRing(t *testing.T, entries uint32) *Ring {
	t.Helper()
	runtime.LockOSThread()
	t.Cleanup(runtime.UnlockOSThread)
	r, err := New(entries)
	if errors.Is(err, ErrUnsupported) {
		t.Skipf("io_uring: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func reap(t *testing.T, r *Ring, want int) []CQE {
	t.Helper()
	var got []CQE
	for len(got) < want {
		if _, err := r.Enter(uint32(want - len(got))); err != nil {
			t.Fatal(err)
		}
		r.Completions(func(c CQE) { got = append(got, c) })
	}
	return got
}

func TestSQEIs128Bytes(t *testing.T) {
	if n := unsafe.Sizeof(SQE{}); n != sqeSize {
		t.Fatalf("SQE is %d bytes, want %d", n, sqeSize)
	}
	if off := unsafe.Offsetof(SQE{}.UserData); off != 32 {
		t.Fatalf("UserData at %d, want 32 (struct io_uring_sqe)", off)
	}
	if off := unsafe.Offsetof(SQE{}.Cmd); off != 48 {
		t.Fatalf("Cmd at %d, want 48 (struct io_uring_sqe)", off)
	}
}

func TestNopCompletesWithUserData(t *testing.T) {
	r := newRing(t, 8)
	for i := range 3 {
		s := r.NextSQE()
		s.Opcode = OpNop
		s.UserData = uint64(100 + i)
	}
	got := reap(t, r, 3)
	for i, c := range got {
		if c.UserData != uint64(100+i) || c.Res != 0 {
			t.Errorf("completion %d: user data %d, res %d; want %d, 0", i, c.UserData, c.Res, 100+i)
		}
	}
}

func TestReadAndWriteAtOffsets(t *testing.T) {
	r := newRing(t, 8)
	path := filepath.Join(t.TempDir(), "f")
	content := bytes.Repeat([]byte("0123456789abcdef"), 512) // 8 KiB
	if err := os.WriteFile(path, content, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	buf := make([]byte, 100)
	s := r.NextSQE()
	s.Opcode, s.Fd, s.Off = OpRead, int32(f.Fd()), 1000
	s.Addr, s.Len, s.UserData = uint64(uintptr(unsafe.Pointer(&buf[0]))), uint32(len(buf)), 1
	patch := []byte("PATCHED")
	s = r.NextSQE()
	s.Opcode, s.Fd, s.Off = OpWrite, int32(f.Fd()), 5000
	s.Addr, s.Len, s.UserData = uint64(uintptr(unsafe.Pointer(&patch[0]))), uint32(len(patch)), 2
	for _, c := range reap(t, r, 2) {
		want := map[uint64]int32{1: int32(len(buf)), 2: int32(len(patch))}[c.UserData]
		if c.Res != want {
			t.Errorf("op %d: res %d, want %d", c.UserData, c.Res, want)
		}
	}
	runtime.KeepAlive(patch)
	if !bytes.Equal(buf, content[1000:1100]) {
		t.Errorf("read at 1000 returned %q, want %q", buf, content[1000:1100])
	}
	got, _ := os.ReadFile(path)
	copy(content[5000:], patch)
	if !bytes.Equal(got, content) {
		t.Errorf("file after the write at 5000 differs")
	}
}

func TestErrorsAreNegativeErrno(t *testing.T) {
	r := newRing(t, 8)
	var b [8]byte
	s := r.NextSQE()
	s.Opcode, s.Fd = OpRead, -1
	s.Addr, s.Len = uint64(uintptr(unsafe.Pointer(&b[0]))), 8
	if c := reap(t, r, 1)[0]; c.Res != -int32(unix.EBADF) {
		t.Fatalf("read of fd -1: res %d, want -EBADF", c.Res)
	}
}

func TestFullQueueWaitsForSubmit(t *testing.T) {
	r := newRing(t, 4)
	n := 0
	for r.NextSQE() != nil {
		n++
		if n > 64 {
			t.Fatal("NextSQE never reports a full queue")
		}
	}
	if n < 4 {
		t.Fatalf("only %d entries before full, asked for 4", n)
	}
	if _, err := r.Enter(0); err != nil { // entries are zeroed NOPs
		t.Fatal(err)
	}
	if r.NextSQE() == nil {
		t.Fatal("queue still full after submitting")
	}
	reap(t, r, n+1)
}
