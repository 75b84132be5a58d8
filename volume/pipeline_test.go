package volume

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestRunChunks: every chunk is worked on once, commits come in order with
// the right offsets and lengths, and the buffers carry work's result to
// commit.
func TestRunChunks(t *testing.T) {
	for _, size := range []int64{1, chunkSize - 1, chunkSize, 5*chunkSize + 512} {
		for _, workers := range []int{1, 2, 5} {
			var next int64
			var works atomic.Int64
			err := runChunks(context.Background(), size, workers, func(_ int, buf []byte, off int64) error {
				works.Add(1)
				buf[0] = byte(off / chunkSize)
				time.Sleep(time.Duration(off/chunkSize%3) * time.Millisecond) // finish out of order
				return nil
			}, func(_ int, buf []byte, off int64) error {
				if off != next || int64(len(buf)) != min(chunkSize, size-off) || buf[0] != byte(off/chunkSize) {
					t.Fatalf("size %d: commit at %d (want %d), %d bytes, tag %d", size, off, next, len(buf), buf[0])
				}
				next += int64(len(buf))
				return nil
			})
			if err != nil || next != size || works.Load() != (size+chunkSize-1)/chunkSize {
				t.Fatalf("size %d, %d workers: err %v, committed %d, works %d", size, workers, err, next, works.Load())
			}
		}
	}
}

func TestRunChunksStops(t *testing.T) {
	boom := errors.New("boom")
	size := int64(20 * chunkSize)
	var commits atomic.Int64
	err := runChunks(context.Background(), size, 2, func(_ int, _ []byte, off int64) error {
		if off == 3*chunkSize {
			return boom
		}
		return nil
	}, func(int, []byte, int64) error { commits.Add(1); return nil })
	if !errors.Is(err, boom) || commits.Load() > 3 {
		t.Fatalf("work error: %v after %d commits", err, commits.Load())
	}
	err = runChunks(context.Background(), size, 2, func(int, []byte, int64) error { return nil },
		func(_ int, _ []byte, off int64) error {
			if off == 2*chunkSize {
				return boom
			}
			return nil
		})
	if !errors.Is(err, boom) {
		t.Fatalf("commit error: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	err = runChunks(ctx, size, 2, func(int, []byte, int64) error { cancel(); return nil },
		func(int, []byte, int64) error { return nil })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}

// shrinking is an input that ends before the size it was announced with.
type shrinking struct{ *bytes.Reader }

// TestCreateShortInput: an input that ends early is named, as a ReadError.
func TestCreateShortInput(t *testing.T) {
	in := shrinking{bytes.NewReader(make([]byte, 3*chunkSize+100))}
	_, _, err := Create(context.Background(), &memDevice{}, in, 4*chunkSize, CreateOptions{TagSize: 32, Passphrase: testPass}, nil)
	var re *ReadError
	if !errors.As(err, &re) || !strings.Contains(err.Error(), "input ended after 3145828 bytes, expected 4194304") {
		t.Fatalf("err = %v", err)
	}
}
