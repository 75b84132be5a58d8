package volume

import (
	"context"
	"sync"
)

// chunkSize is the unit of work of runChunks: small enough that a chunk
// stays in a core's cache from its read to its write, large enough that the
// system calls and the hand-off between workers are a small part of it.
const chunkSize = 1 << 20

// runChunks processes size bytes in chunks of chunkSize (the last one may
// be shorter) on workers goroutines. Each worker takes the next chunk, runs
// work on it (the bulk: reading, hashing,
// encrypting, all in parallel with the other workers), then waits for its
// turn and runs commit, which sees the chunks in order, one at a time
// (writing a sequential output, feeding the digest's root, reporting
// progress). Both get the worker's number, its buffer sliced to the
// chunk's length, and the chunk's offset; buffers are wiped at the end. The first error, or the cancellation of ctx,
// stops every worker.
//
// Compared with a pipeline of stages (read, transform, write) on their own
// goroutines, a worker carries its chunk from end to end: no hand-off
// between cores per stage, and the data stays in the cache of the core that
// read it.
func runChunks(ctx context.Context, size int64, workers int, work, commit func(worker int, buf []byte, off int64) error) error {
	n := (size + chunkSize - 1) / chunkSize
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		mu      sync.Mutex
		turn    = sync.NewCond(&mu)
		next    int64 // next chunk to take
		current int64 // next chunk to commit
	)
	fail := func(err error) {
		mu.Lock()
		cancel(err)
		turn.Broadcast()
		mu.Unlock()
	}
	// Cancellation from outside must also wake the workers waiting for
	// their turn.
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		turn.Broadcast()
		mu.Unlock()
	})
	defer stop()

	var wg sync.WaitGroup
	for w := range int(max(1, min(int64(workers), n))) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			full := make([]byte, min(chunkSize, size))
			defer clear(full)
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= n || ctx.Err() != nil {
					return
				}
				off := i * chunkSize
				buf := full[:min(chunkSize, size-off)]
				if err := work(w, buf, off); err != nil {
					fail(err)
					return
				}
				mu.Lock()
				for current != i && ctx.Err() == nil {
					turn.Wait()
				}
				mu.Unlock()
				if ctx.Err() != nil {
					return
				}
				err := commit(w, buf, off)
				mu.Lock()
				current++
				turn.Broadcast()
				mu.Unlock()
				if err != nil {
					fail(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	return context.Cause(ctx)
}
