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

// chunkStages is what runChunks does with every chunk. Each stage but
// ordered gets the buffer's number (for per-buffer scratch space, below
// workers × buffersPerWorker), the buffer sliced to the chunk's length, and
// the chunk's offset.
type chunkStages struct {
	// load fills the buffer (reading, and whatever must come before
	// ordered); the workers run it in parallel.
	load func(slot int, buf []byte, off int64) error
	// ordered, if not nil, sees every chunk after load, in order, on a
	// goroutine of its own. It must not change buf. The end-to-end digest,
	// one sequential BLAKE2b stream, runs there while the workers load,
	// transform and commit the chunks around it.
	ordered func(buf []byte)
	// work, if not nil, runs in parallel after ordered: encrypting in
	// place, which has to wait until the plaintext is hashed.
	work func(slot int, buf []byte, off int64) error
	// commit sees the chunks in order, one at a time, after work (writing
	// a sequential output, reporting progress).
	commit func(slot int, buf []byte, off int64) error
}

// runChunks processes size bytes in chunks of chunkSize (the last one may
// be shorter) on workers goroutines, plus one for the ordered stage. A
// worker takes the next chunk and carries it through load, ordered (handing
// it to the ordered goroutine and sleeping until it is done) and work.
// Whichever worker then finds the next chunk to commit ready commits it, and
// every ready one after it, while the others keep working. Buffers are wiped
// at the end. The first error, or the cancellation of ctx, stops every
// goroutine.
//
// Compared with a pipeline of stages on their own goroutines (read,
// transform, write), a chunk is read, encrypted and tagged on one core, and
// no core waits for another unless all its buffers are queued. The ordered
// stage is the one sequential part: while it hashes a chunk, the worker
// that loaded it sleeps and leaves its core to the ordered goroutine and the
// other workers, which load the next chunks and finish (work, commit) the
// ones already hashed. At most workers × buffersPerWorker chunks are ever in
// memory, and the ordered goroutine never holds one of its own.
func runChunks(ctx context.Context, size int64, workers int, st chunkStages) error {
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

	var wg sync.WaitGroup
	// Chunk i hands its buffer to the ordered goroutine through toOrdered[i %
	// slots] and learns it is done through ordered[i % slots]. Chunks are
	// taken in order and each holds a buffer until it is committed, so chunk
	// i + slots is taken only after chunk i is committed: no two chunks in
	// flight share a place, and a send never blocks.
	var toOrdered []chan []byte
	var ordered []chan struct{}
	if st.ordered != nil {
		toOrdered = make([]chan []byte, slots)
		ordered = make([]chan struct{}, slots)
		for i := range slots {
			toOrdered[i] = make(chan []byte, 1)
			ordered[i] = make(chan struct{}, 1)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range n {
				var buf []byte
				select {
				case buf = <-toOrdered[i%int64(slots)]:
				case <-ctx.Done():
					return
				}
				st.ordered(buf)
				ordered[i%int64(slots)] <- struct{}{}
			}
		}()
	}

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
			err := st.commit(d.slot, d.buf, off)
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

	// process carries chunk i through load, ordered and work; false means
	// runChunks is stopping.
	process := func(slot int, i int64) bool {
		off := i * chunkSize
		buf := bufs[slot][:min(chunkSize, size-off)]
		if err := st.load(slot, buf, off); err != nil {
			cancel(err)
			return false
		}
		if st.ordered != nil {
			k := i % int64(slots)
			toOrdered[k] <- buf
			select {
			case <-ordered[k]:
			case <-ctx.Done():
				return false
			}
		}
		if st.work != nil {
			if err := st.work(slot, buf, off); err != nil {
				cancel(err)
				return false
			}
		}
		mu.Lock()
		ready[i] = done{slot, buf}
		mu.Unlock()
		return true
	}

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
				if !process(slot, i) {
					return
				}
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
