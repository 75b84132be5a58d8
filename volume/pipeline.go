package volume

import (
	"context"
	"sync"
)

// chunkSize is the unit of work of runChunks: small enough that a chunk
// stays in a core's cache from its read to its write, large enough that the
// system calls and the hand-offs are a small part of it.
const chunkSize = 1 << 20

// buffersPerWorker: a worker that finished a chunk whose turn to commit has
// not come yet starts the next one with another buffer instead of waiting.
const buffersPerWorker = 3

// runChunks processes size bytes in chunks of chunkSize (the last one may
// be shorter) on workers goroutines. A worker takes the next chunk and runs
// work on it: the bulk (reading, hashing, encrypting), in parallel with the
// other workers. commit then sees the chunks in order, one at a time
// (writing a sequential output, feeding the digest's root, reporting
// progress): whichever worker finds the next chunk to commit ready commits
// it, and every ready one after it, while the others keep working. Both
// calls get the buffer's number (for per-buffer scratch space, below
// workers × buffersPerWorker), the buffer sliced to the chunk's length, and
// the chunk's offset. Buffers are wiped at the end. The first error, or the
// cancellation of ctx, stops every worker.
//
// Compared with a pipeline of stages on their own goroutines (read,
// transform, write), a chunk is read, hashed and encrypted on one core, and
// no core waits for another unless all its buffers are queued for commit.
func runChunks(ctx context.Context, size int64, workers int, work, commit func(slot int, buf []byte, off int64) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	n := (size + chunkSize - 1) / chunkSize
	workers = int(max(1, min(int64(workers), n)))

	slots := workers * buffersPerWorker
	bufs := make([][]byte, slots)
	free := make(chan int, slots)
	for i := range bufs {
		bufs[i] = make([]byte, min(chunkSize, max(size, 1)))
		free <- i
	}
	defer func() {
		for _, b := range bufs {
			clear(b)
		}
	}()

	type done struct {
		slot int
		buf  []byte
	}
	var (
		mu         sync.Mutex
		next       int64 // next chunk to take
		current    int64 // next chunk to commit
		ready      = map[int64]done{}
		committing bool
	)
	// commitReady commits chunks in order for as long as the next one is
	// ready; one worker at a time does it.
	commitReady := func() {
		mu.Lock()
		if committing {
			mu.Unlock()
			return
		}
		committing = true
		for ctx.Err() == nil {
			d, ok := ready[current]
			if !ok {
				break
			}
			delete(ready, current)
			off := current * chunkSize
			mu.Unlock()
			err := commit(d.slot, d.buf, off)
			free <- d.slot
			mu.Lock()
			if err != nil {
				cancel(err)
				break
			}
			current++
		}
		committing = false
		mu.Unlock()
	}

	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				var slot int
				select {
				case slot = <-free:
				case <-ctx.Done():
					return
				}
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= n {
					free <- slot
					return
				}
				off := i * chunkSize
				buf := bufs[slot][:min(chunkSize, size-off)]
				if err := work(slot, buf, off); err != nil {
					cancel(err)
					return
				}
				mu.Lock()
				ready[i] = done{slot, buf}
				mu.Unlock()
				commitReady()
			}
		}()
	}
	wg.Wait()
	// The last chunks may have become ready after their committer left.
	commitReady()
	if err := context.Cause(ctx); err != nil {
		return err
	}
	if current != n {
		return context.Canceled
	}
	return nil
}
