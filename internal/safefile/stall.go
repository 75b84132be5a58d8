package safefile

import (
	"context"
	"io"
	"os"
)

// A stream can stall: a pipe whose reader stops reading, or whose writer
// stops writing, holds write(2) or read(2) for as long as that lasts. Go
// leaves standard input and output in blocking mode (its poller does not
// take descriptors it inherits blocking), so nothing in the process can
// wake such a call, and a command whose context a signal ended would wait
// for it forever: a dropped ssh connection (SIGHUP) or a SIGTERM left
// xtsctl hanging on a stalled pipe. A stream bound to a context (by
// OpenStreamInput and CreateOutput, or Input.Stop) makes each call on a
// goroutine of its own, and the caller stops waiting when the context
// ends: the command cleans up and exits, and the abandoned call ends with
// the process.
//
// An abandoned call may still read (Write) or fill (Read) its buffer, and
// the stream is no longer usable; the error says the run is over (the
// context's cause), and the command stops.
type stall struct{ ctx context.Context }

func (s stall) do(call func() (int, error)) (int, error) {
	if s.ctx == nil {
		return call()
	}
	if err := context.Cause(s.ctx); err != nil {
		return 0, err
	}
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := call()
		done <- result{n, err}
	}()
	select {
	case r := <-done:
		return r.n, r.err
	case <-s.ctx.Done():
		return 0, context.Cause(s.ctx)
	}
}

// fill reads r into p as do runs a call. Bound to a context, it reads
// until p is full (or the stream ends or fails) in one call: a pipe gives
// at most what it holds (64 KiB) per read(2), and a goroutine for each of
// those cost a stream of 1 MiB reads a fifth of its speed.
func (s stall) fill(r io.Reader, p []byte) (int, error) {
	if s.ctx == nil {
		return r.Read(p)
	}
	return s.do(func() (int, error) {
		n := 0
		for n < len(p) {
			k, err := r.Read(p[n:])
			n += k
			if err == io.EOF && n > 0 {
				return n, nil // the next read ends again
			}
			if err != nil || k == 0 {
				return n, err
			}
		}
		return n, nil
	})
}

// openPipe opens path, which may be a named pipe: open(2) of one waits for
// the other end (a writer, to read; a reader, to write), as long as that
// takes, in the kernel. It runs on a goroutine of its own, and the caller
// stops waiting when ctx ends (a pipe opened after that is closed).
func openPipe(ctx context.Context, path string, flag int) (*os.File, error) {
	if ctx == nil {
		return os.OpenFile(path, flag, 0)
	}
	type result struct {
		f   *os.File
		err error
	}
	done := make(chan result, 1)
	go func() {
		f, err := os.OpenFile(path, flag, 0)
		done <- result{f, err}
	}()
	select {
	case r := <-done:
		return r.f, r.err
	case <-ctx.Done():
		go func() {
			if r := <-done; r.f != nil {
				r.f.Close()
			}
		}()
		return nil, context.Cause(ctx)
	}
}
