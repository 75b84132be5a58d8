package volume

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sync"
)

// ReadError reports that the input could not be read, or ended early.
type ReadError struct{ Err error }

func (e *ReadError) Error() string { return e.Err.Error() }
func (e *ReadError) Unwrap() error { return e.Err }

// WriteError reports that the output could not be written (for example a
// full disk).
type WriteError struct{ Err error }

func (e *WriteError) Error() string {
	// The output is usually a temporary file whose name means nothing to
	// the user: report the cause without it.
	var pe *fs.PathError
	if errors.As(e.Err, &pe) {
		return "cannot write output: " + pe.Err.Error()
	}
	return "cannot write output: " + e.Err.Error()
}
func (e *WriteError) Unwrap() error { return e.Err }

// Transform works on one chunk of whole sectors in place; first is the
// number of the chunk's first sector, counted from the start of the data.
type Transform func(buf []byte, first uint64) error

// Stream sizes: chunks are large so that reads, writes and the parallel
// sector codec each get big runs; inFlight chunks bound the memory used
// (16 MiB) whatever the image size.
const (
	streamChunk    = 4 << 20
	streamInFlight = 4
)

// Stream reads size bytes from r, applies fn to each chunk and writes the
// result to w, in order. Reading, transforming and writing overlap. progress,
// if not nil, is called with the number of bytes written so far. Stream
// returns when ctx is cancelled, or at the first error. Its buffers are wiped
// before it returns: they held plaintext.
func Stream(ctx context.Context, w io.Writer, r io.Reader, size int64, sectorSize int, fn Transform, progress func(done int64)) error {
	if size%int64(sectorSize) != 0 {
		return fmt.Errorf("volume: stream of %d bytes is not a whole number of %d-byte sectors", size, sectorSize)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	type job struct {
		buf   []byte
		first uint64
	}
	bufs := make([][]byte, streamInFlight)
	free := make(chan []byte, streamInFlight)
	for i := range bufs {
		bufs[i] = make([]byte, min(streamChunk, max(size, 1)))
		free <- bufs[i]
	}
	defer func() {
		for _, b := range bufs {
			clear(b)
		}
	}()
	toWork := make(chan job, streamInFlight)
	toWrite := make(chan job, streamInFlight)

	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // reader
		defer wg.Done()
		defer close(toWork)
		for off := int64(0); off < size; {
			var buf []byte
			select {
			case buf = <-free:
			case <-ctx.Done():
				return
			}
			n := int(min(int64(len(buf)), size-off))
			if got, err := io.ReadFull(r, buf[:n]); err != nil {
				if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
					err = fmt.Errorf("input ended after %d bytes, expected %d (did it shrink while being read?)", off+int64(got), size)
				} else {
					err = fmt.Errorf("cannot read input: %w", err)
				}
				cancel(&ReadError{err})
				return
			}
			select {
			case toWork <- job{buf[:n], uint64(off / int64(sectorSize))}:
			case <-ctx.Done():
				return
			}
			off += int64(n)
		}
	}()
	go func() { // transformer
		defer wg.Done()
		defer close(toWrite)
		for j := range toWork {
			if err := fn(j.buf, j.first); err != nil {
				cancel(err)
				return
			}
			select {
			case toWrite <- j:
			case <-ctx.Done():
				return
			}
		}
	}()

	var done int64
	for j := range toWrite {
		if ctx.Err() != nil {
			break
		}
		if _, err := w.Write(j.buf); err != nil {
			cancel(&WriteError{err})
			break
		}
		done += int64(len(j.buf))
		if progress != nil {
			progress(done)
		}
		free <- j.buf[:cap(j.buf)]
	}
	cancel(nil) // release the other stages if the writer stopped early
	for range toWrite {
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	if done != size {
		if err := context.Cause(ctx); err != nil {
			return err
		}
		return ctx.Err()
	}
	return nil
}
