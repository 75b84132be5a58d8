package safefile

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"testing/iotest"
	"time"

	"golang.org/x/sys/unix"
)

// blockingPipe is a pipe in blocking mode, as a shell hands standard input
// and output to a command: read(2) and write(2) on it wait in the kernel,
// where nothing in the process can wake them.
func blockingPipe(t *testing.T) (r, w *os.File) {
	t.Helper()
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	return os.NewFile(uintptr(fds[0]), "pipe-r"), os.NewFile(uintptr(fds[1]), "pipe-w")
}

var errSignal = errors.New("interrupted by a test")

// stopWhileStalled runs call, checks that it is still waiting a moment
// later (the stream stalls), ends the context and wants call to return
// the context's cause.
func stopWhileStalled(t *testing.T, cancel context.CancelCauseFunc, call func() (int, error)) {
	t.Helper()
	ended := make(chan error, 1)
	go func() {
		_, err := call()
		ended <- err
	}()
	select {
	case err := <-ended:
		t.Fatalf("the call on a stalled stream ended (%v) before the context did", err)
	case <-time.After(50 * time.Millisecond):
	}
	cancel(errSignal)
	select {
	case err := <-ended:
		if !errors.Is(err, errSignal) {
			t.Fatalf("after the context ended: %v, want its cause", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the call on a stalled stream still waits after its context ended")
	}
}

// TestStopStalledOutput: a write to standard output, or any pipe, whose
// reader stopped reading returns when the command's context ends, so that
// SIGHUP or SIGTERM still ends the command.
func TestStopStalledOutput(t *testing.T) {
	r, w := blockingPipe(t)
	defer r.Close()
	defer w.Close()
	ctx, cancel := context.WithCancelCause(context.Background())
	out, err := CreateOutput(ctx, fmt.Sprintf("/proc/self/fd/%d", w.Fd()), nil, false)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Abort()
	big := make([]byte, 4<<20) // far more than a pipe holds
	stopWhileStalled(t, cancel, func() (int, error) { return out.Write(big) })
	if _, err := out.Write(big[:1]); !errors.Is(err, errSignal) {
		t.Errorf("a write after the context ended: %v, want its cause", err)
	}
	r.Close() // the abandoned write ends with EPIPE
}

// TestStopStalledInput: a read of standard input, or of a named pipe,
// whose writer went silent returns when the context ends.
func TestStopStalledInput(t *testing.T) {
	for _, asFile := range []bool{false, true} {
		r, w := blockingPipe(t)
		in := &Input{Stream: r, Name: "standard input", Size: -1}
		if asFile {
			in = &Input{File: r, Name: "a named pipe", Size: -1}
		}
		ctx, cancel := context.WithCancelCause(context.Background())
		in.Stop(ctx)
		stopWhileStalled(t, cancel, func() (int, error) { return in.Read(make([]byte, 1<<20)) })
		w.Close() // the abandoned read ends at end of file
		r.Close()
	}
}

// TestStopLeavesFilesAlone: writes to a file, which never stall, are not
// cut off by the context (the command stops between them, and drops the
// file); nor are writes to a regular file standard output points to.
func TestStopLeavesFilesAlone(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errSignal)
	out, err := CreateOutput(ctx, filepath.Join(dir, "out"), nil, false)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Abort()
	if _, err := out.Write([]byte("data")); err != nil {
		t.Errorf("a file output's write after the context ended: %v", err)
	}
	f, err := os.Create(filepath.Join(dir, "redirected"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	red, err := CreateOutput(ctx, fmt.Sprintf("/proc/self/fd/%d", f.Fd()), nil, false)
	if err != nil {
		t.Fatal(err)
	}
	defer red.Abort()
	if _, err := red.Write([]byte("data")); err != nil {
		t.Errorf("a redirected file's write after the context ended: %v", err)
	}
}

// TestStopWaitingForPipe: opening a named pipe nobody opened the other
// end of (open(2) waits in the kernel for it), as an input or an output,
// returns when the context ends.
func TestStopWaitingForPipe(t *testing.T) {
	for _, output := range []bool{false, true} {
		// A pipe of its own each: the abandoned open of one end would
		// let the other open at once.
		fifo := filepath.Join(t.TempDir(), "fifo")
		if err := unix.Mkfifo(fifo, 0o600); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancelCause(context.Background())
		stopWhileStalled(t, cancel, func() (int, error) {
			if output {
				_, err := CreateOutput(ctx, fifo, nil, false)
				return 0, err
			}
			_, err := OpenStreamInput(ctx, fifo)
			return 0, err
		})
		// The abandoned open ends once the other end comes, and closes
		// what it opened.
		flag := os.O_WRONLY
		if output {
			flag = os.O_RDONLY
		}
		if f, err := os.OpenFile(fifo, flag, 0); err == nil {
			f.Close()
		}
	}
}

// TestStopReadFills: a stream bound to a context reads until the buffer
// is full (one goroutine per buffer, not per pipe-sized piece), gives
// what is left at the end, then io.EOF, as io.Reader wants.
func TestStopReadFills(t *testing.T) {
	data := []byte("0123456789")
	in := &Input{Stream: iotest.OneByteReader(bytes.NewReader(data)), Name: "standard input", Size: -1}
	in.Stop(context.Background())
	p := make([]byte, 8)
	if n, err := in.Read(p); n != 8 || err != nil || !bytes.Equal(p, data[:8]) {
		t.Fatalf("first read: %d, %v, %q; want the 8 bytes asked for", n, err, p[:n])
	}
	if n, err := in.Read(p); n != 2 || err != nil || !bytes.Equal(p[:2], data[8:]) {
		t.Fatalf("second read: %d, %v, %q; want the last 2 bytes", n, err, p[:n])
	}
	if n, err := in.Read(p); n != 0 || err != io.EOF {
		t.Fatalf("at the end: %d, %v; want io.EOF", n, err)
	}
}
