package volume

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestRunChunks: every chunk is loaded once, seen by the ordered stage in
// order after its load and before its work, and committed in order with the
// right offset and length; the buffers carry each stage's result to the
// next.
func TestRunChunks(t *testing.T) {
	for _, size := range []int64{2, chunkSize - 1, chunkSize, 5*chunkSize + 512, 40 * chunkSize} {
		for _, workers := range []int{1, 2, 5} {
			for _, withOrdered := range []bool{false, true} {
				var next, orderedNext int64
				var loads atomic.Int64
				st := chunkStages{
					load: func(_ int, buf []byte, off int64) (int, error) {
						loads.Add(1)
						buf[0] = byte(off / chunkSize)
						buf[len(buf)-1] = 1
						time.Sleep(time.Duration(off/chunkSize%3) * time.Millisecond) // finish out of order
						return len(buf), nil
					},
					work: func(_ int, buf []byte, off int64) error {
						if withOrdered && buf[len(buf)-1] != 2 {
							t.Errorf("size %d: chunk at %d worked on before the ordered stage", size, off)
						}
						buf[len(buf)-1] = 3
						return nil
					},
					commit: func(_ int, buf []byte, off int64) error {
						if off != next || int64(len(buf)) != min(chunkSize, size-off) || buf[0] != byte(off/chunkSize) || buf[len(buf)-1] != 3 {
							t.Fatalf("size %d: commit at %d (want %d), %d bytes, marks %d %d", size, off, next, len(buf), buf[0], buf[len(buf)-1])
						}
						next += int64(len(buf))
						return nil
					},
				}
				if withOrdered {
					st.ordered = func(buf []byte) {
						if buf[0] != byte(orderedNext/chunkSize) || int64(len(buf)) != min(chunkSize, size-orderedNext) || buf[len(buf)-1] != 1 {
							t.Errorf("size %d: ordered stage got chunk %d (%d bytes, mark %d) at %d", size, buf[0], len(buf), buf[len(buf)-1], orderedNext)
						}
						orderedNext += int64(len(buf))
						buf[len(buf)-1] = 2 // the test's own mark; real ordered stages only read
					}
				}
				err := runChunks(context.Background(), size, workers, st)
				if err != nil || next != size || loads.Load() != (size+chunkSize-1)/chunkSize || withOrdered && orderedNext != size {
					t.Fatalf("size %d, %d workers, ordered %v: err %v, committed %d, ordered %d, loads %d",
						size, workers, withOrdered, err, next, orderedNext, loads.Load())
				}
			}
		}
	}
}

// TestRunChunksStops: an error in any stage, or a cancelled context, stops
// runChunks with that error, also with chunks queued for the ordered stage.
func TestRunChunksStops(t *testing.T) {
	boom := errors.New("boom")
	size := int64(20 * chunkSize)
	nop := func(int, []byte, int64) error { return nil }
	failAt := func(at int64) func(int, []byte, int64) error {
		return func(_ int, _ []byte, off int64) error {
			if off == at*chunkSize {
				return boom
			}
			return nil
		}
	}
	for _, ordered := range []func([]byte){nil, func([]byte) { time.Sleep(100 * time.Microsecond) }} {
		var commits atomic.Int64
		countCommit := func(int, []byte, int64) error { commits.Add(1); return nil }
		err := runChunks(context.Background(), size, 2, chunkStages{load: loadOf(failAt(3)), ordered: ordered, commit: countCommit})
		if !errors.Is(err, boom) || commits.Load() > 3 {
			t.Fatalf("load error: %v after %d commits", err, commits.Load())
		}
		commits.Store(0)
		err = runChunks(context.Background(), size, 2, chunkStages{load: loadOf(nop), ordered: ordered, work: failAt(4), commit: countCommit})
		if !errors.Is(err, boom) || commits.Load() > 4 {
			t.Fatalf("work error: %v after %d commits", err, commits.Load())
		}
		err = runChunks(context.Background(), size, 2, chunkStages{load: loadOf(nop), ordered: ordered, commit: failAt(2)})
		if !errors.Is(err, boom) {
			t.Fatalf("commit error: %v", err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		err = runChunks(ctx, size, 2, chunkStages{load: func(_ int, buf []byte, _ int64) (int, error) { cancel(); return len(buf), nil }, ordered: ordered, commit: nop})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled: %v", err)
		}
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

// TestStreamingAllocations: Create, Decrypt and Verify allocate as much for
// 16 chunks as for one (their buffers and scratch space are set up once),
// so nothing is allocated per chunk or per sector, the digest included.
func TestStreamingAllocations(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation counts take a few seconds")
	}
	allocs := func(n int) (create, decrypt, verify float64) {
		plain := randomData(uint64(n), n)
		dev, _ := newTestVolume(t, plain, 4096, 32, 64)
		v := mustOpen(t, dev, true)
		defer v.Close()
		create = testing.AllocsPerRun(2, func() {
			out := &memDevice{b: make([]byte, dev.size())} // zeros, full size: no growth
			Create(context.Background(), out, bytes.NewReader(plain), int64(n), CreateOptions{TagSize: 32, KDF: testKDF, Passphrase: testPass}, nil)
		})
		decrypt = testing.AllocsPerRun(2, func() { v.Decrypt(context.Background(), io.Discard, true, nil) })
		verify = testing.AllocsPerRun(2, func() { v.Verify(context.Background(), nil, nil) })
		return
	}
	c1, d1, v1 := allocs(chunkSize)
	c16, d16, v16 := allocs(16 * chunkSize)
	// A few allocations of slack for the runtime's own (a goroutine's stack
	// growing, a timer); one per chunk would add 15.
	if c16 > c1+4 || d16 > d1+4 || v16 > v1+4 {
		t.Fatalf("allocations for 1 and 16 chunks: Create %v, %v; Decrypt %v, %v; Verify %v, %v", c1, c16, d1, d16, v1, v16)
	}
}

// loadOf makes a stage function a load that fills its whole buffer.
func loadOf(f func(int, []byte, int64) error) func(int, []byte, int64) (int, error) {
	return func(slot int, buf []byte, off int64) (int, error) { return len(buf), f(slot, buf, off) }
}
