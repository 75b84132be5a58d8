package stream

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// TestRun: every chunk is loaded once, seen by the ordered stage in
// order after its load and before its work, and committed in order with the
// right offset and length; the buffers carry each stage's result to the
// next.
func TestRun(t *testing.T) {
	for _, size := range []int64{2, ChunkSize - 1, ChunkSize, 5*ChunkSize + 512, 40 * ChunkSize} {
		for _, workers := range []int{1, 2, 5} {
			for _, withOrdered := range []bool{false, true} {
				var next, orderedNext int64
				var loads atomic.Int64
				st := Stages{
					Load: func(_ int, buf []byte, off int64) (int, error) {
						loads.Add(1)
						buf[0] = byte(off / ChunkSize)
						buf[len(buf)-1] = 1
						time.Sleep(time.Duration(off/ChunkSize%3) * time.Millisecond) // finish out of order
						return len(buf), nil
					},
					Work: func(_ int, buf []byte, off int64) error {
						if withOrdered && buf[len(buf)-1] != 2 {
							t.Errorf("size %d: chunk at %d worked on before the ordered stage", size, off)
						}
						buf[len(buf)-1] = 3
						return nil
					},
					Commit: func(_ int, buf []byte, off int64) error {
						if off != next || int64(len(buf)) != min(ChunkSize, size-off) || buf[0] != byte(off/ChunkSize) || buf[len(buf)-1] != 3 {
							t.Fatalf("size %d: commit at %d (want %d), %d bytes, marks %d %d", size, off, next, len(buf), buf[0], buf[len(buf)-1])
						}
						next += int64(len(buf))
						return nil
					},
				}
				if withOrdered {
					st.Ordered = func(buf []byte) {
						if buf[0] != byte(orderedNext/ChunkSize) || int64(len(buf)) != min(ChunkSize, size-orderedNext) || buf[len(buf)-1] != 1 {
							t.Errorf("size %d: ordered stage got chunk %d (%d bytes, mark %d) at %d", size, buf[0], len(buf), buf[len(buf)-1], orderedNext)
						}
						orderedNext += int64(len(buf))
						buf[len(buf)-1] = 2 // the test's own mark; real ordered stages only read
					}
				}
				err := Run(context.Background(), size, workers, st)
				if err != nil || next != size || loads.Load() != (size+ChunkSize-1)/ChunkSize || withOrdered && orderedNext != size {
					t.Fatalf("size %d, %d workers, ordered %v: err %v, committed %d, ordered %d, loads %d",
						size, workers, withOrdered, err, next, orderedNext, loads.Load())
				}
			}
		}
	}
}

// TestRunStops: an error in any stage, or a cancelled context, stops
// Run with that error, also with chunks queued for the ordered stage.
func TestRunStops(t *testing.T) {
	boom := errors.New("boom")
	size := int64(20 * ChunkSize)
	nop := func(int, []byte, int64) error { return nil }
	failAt := func(at int64) func(int, []byte, int64) error {
		return func(_ int, _ []byte, off int64) error {
			if off == at*ChunkSize {
				return boom
			}
			return nil
		}
	}
	for _, ordered := range []func([]byte){nil, func([]byte) { time.Sleep(100 * time.Microsecond) }} {
		var commits atomic.Int64
		countCommit := func(int, []byte, int64) error { commits.Add(1); return nil }
		err := Run(context.Background(), size, 2, Stages{Load: loadOf(failAt(3)), Ordered: ordered, Commit: countCommit})
		if !errors.Is(err, boom) || commits.Load() > 3 {
			t.Fatalf("load error: %v after %d commits", err, commits.Load())
		}
		commits.Store(0)
		err = Run(context.Background(), size, 2, Stages{Load: loadOf(nop), Ordered: ordered, Work: failAt(4), Commit: countCommit})
		if !errors.Is(err, boom) || commits.Load() > 4 {
			t.Fatalf("work error: %v after %d commits", err, commits.Load())
		}
		err = Run(context.Background(), size, 2, Stages{Load: loadOf(nop), Ordered: ordered, Commit: failAt(2)})
		if !errors.Is(err, boom) {
			t.Fatalf("commit error: %v", err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		err = Run(ctx, size, 2, Stages{Load: func(_ int, buf []byte, _ int64) (int, error) { cancel(); return len(buf), nil }, Ordered: ordered, Commit: nop})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled: %v", err)
		}
	}
}

// loadOf makes a stage function a load that fills its whole buffer.
func loadOf(f func(int, []byte, int64) error) func(int, []byte, int64) (int, error) {
	return func(slot int, buf []byte, off int64) (int, error) { return len(buf), f(slot, buf, off) }
}

// TestRunLoadInOrder: with LoadInOrder, loads run one at a time in
// chunk order, however many workers there are.
func TestRunLoadInOrder(t *testing.T) {
	for _, workers := range []int{1, 3, 8} {
		var next, active atomic.Int64
		err := Run(context.Background(), 20*ChunkSize+7, workers, Stages{
			LoadInOrder: true,
			Load: func(_ int, buf []byte, off int64) (int, error) {
				if active.Add(1) != 1 {
					t.Error("two loads at once")
				}
				defer active.Add(-1)
				if want := next.Add(1) - 1; off != want*ChunkSize {
					t.Errorf("%d workers: loaded the chunk at %d, want %d", workers, off, want*ChunkSize)
				}
				return len(buf), nil
			},
			Commit: func(int, []byte, int64) error { return nil },
		})
		if err != nil || next.Load() != 21 {
			t.Fatalf("%d workers: %v, %d loads", workers, err, next.Load())
		}
	}
}
