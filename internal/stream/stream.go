// Package stream is xtsctl's one engine for moving a whole image through
// a transformation: read, hash in order, encrypt or decrypt on every core,
// write in order, in chunks of ChunkSize. volume's encrypt, decrypt and
// verify, plain images, LUKS data segments and in-place conversion all run
// on it.
package stream

import (
	"context"
	"errors"
	"io"
	"math"
	"sync"
	"sync/atomic"
)

// Slots is the number of buffers Run uses with that many workers: the
// bound of the slot numbers the stages get, for per-buffer scratch space.
func Slots(workers int) int { return max(1, workers) * BuffersPerWorker }

// ChunkSize is the unit of work of Run: small enough that a chunk
// stays in a core's cache from its read to its write, large enough that the
// system calls and the hand-offs are a small part of it.
const ChunkSize = 1 << 20

// BuffersPerWorker: a worker that finished a chunk whose turn to commit has
// not come yet starts the next one with another buffer instead of waiting.
const BuffersPerWorker = 3

// Stages is what Run does with every chunk. Each stage but
// Ordered gets the buffer's number (for per-buffer scratch space, below
// workers × BuffersPerWorker), the buffer sliced to the chunk's length, and
// the chunk's offset.
type Stages struct {
	// Load fills the buffer (reading, and whatever must come before
	// Ordered); the workers run it in parallel, or one chunk after the
	// other, in order, with LoadInOrder (reading a sequential input). When
	// the size is not known in advance (Run's size < 0), it fills
	// what it can and returns how much: n < len(buf) or io.EOF ends the
	// input.
	Load        func(slot int, buf []byte, off int64) (n int, err error)
	LoadInOrder bool
	// Ordered, if not nil, sees every chunk after Load, in order, on a
	// goroutine of its own. It must not change buf. The end-to-end digest,
	// one sequential BLAKE2b stream, runs there while the workers load,
	// transform and commit the chunks around it.
	Ordered func(buf []byte)
	// Work, if not nil, runs in parallel after Ordered: encrypting in
	// place, which has to wait until the plaintext is hashed.
	Work func(slot int, buf []byte, off int64) error
	// Commit sees the chunks in order, one at a time, after Work (writing
	// a sequential output, reporting progress).
	Commit func(slot int, buf []byte, off int64) error
}

// Run processes size bytes in chunks of ChunkSize (the last one may
// be shorter) on workers goroutines, plus one for the ordered stage. A
// worker takes the next chunk and loads it; without an ordered stage it
// goes on with work. With one, it hands the chunk to the ordered goroutine
// and takes another task: a chunk the ordered goroutine is done with (work,
// first, since those hold buffers and come next in commit order) or, while
// buffers are free, a new chunk to load. Whichever worker then finds the
// next chunk to commit ready commits it, and every ready one after it,
// while the others keep working. Buffers are wiped at the end. The first
// error, or the cancellation of ctx, stops every goroutine.
//
// Compared with a pipeline of stages on their own goroutines (read,
// transform, write), a chunk is read, encrypted and tagged on one core, and
// no core waits for another unless all buffers are queued. The ordered
// stage is the one sequential part: the workers load ahead of it, as far as
// the buffers allow, so that it always has the next chunk, and finish
// (work, commit) the chunks behind it. At most workers × BuffersPerWorker
// chunks are ever in memory.
//
// A size below zero means the input's size is unknown (a pipe): the loads,
// which must then be in order and without an ordered stage, say where it
// ends; RunCounted returns how many bytes were processed.
func Run(ctx context.Context, size int64, workers int, st Stages) error {
	_, err := RunCounted(ctx, size, workers, st)
	return err
}

// RunCounted is Run, returning the bytes committed: for an input of
// unknown size, how long it was.
func RunCounted(ctx context.Context, size int64, workers int, st Stages) (int64, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	unknown := size < 0
	if unknown && (!st.LoadInOrder || st.Ordered != nil) {
		panic("stream: Run of an unknown size needs LoadInOrder and no Ordered stage")
	}
	n := (size + ChunkSize - 1) / ChunkSize // chunks; with an unknown size, set when the input ends
	bufLen := min(ChunkSize, max(size, 1))
	if unknown {
		n, bufLen = math.MaxInt64, ChunkSize
	}
	workers = int(max(1, min(int64(workers), n)))

	slots := workers * BuffersPerWorker
	bufs := make([][]byte, slots)
	free := make(chan int, slots)
	for i := range bufs {
		bufs[i] = make([]byte, bufLen)
		free <- i
	}
	defer func() {
		for _, b := range bufs {
			clear(b)
		}
	}()
	// chunkBuf is the buffer of chunk i held in slot (all of it, for an
	// unknown size: load says how much it filled).
	chunkBuf := func(slot int, i int64) []byte {
		if unknown {
			return bufs[slot]
		}
		return bufs[slot][:min(ChunkSize, size-i*ChunkSize)]
	}

	type chunk struct {
		slot int
		i    int64
		len  int
	}
	var wg sync.WaitGroup
	// Chunk i reaches the ordered goroutine through toOrdered[i % slots],
	// which then passes it on to the workers through ordered. Chunks are
	// taken in order and each holds a buffer until it is committed, so
	// chunk i + slots is taken only after chunk i is committed: no two
	// chunks in flight share a place in toOrdered, at most slots chunks are
	// in ordered, and no send blocks. ordered is closed after the last
	// chunk.
	var toOrdered []chan chunk
	var ordered chan chunk
	if st.Ordered != nil {
		toOrdered = make([]chan chunk, slots)
		for i := range toOrdered {
			toOrdered[i] = make(chan chunk, 1)
		}
		ordered = make(chan chunk, slots)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range n {
				var c chunk
				select {
				case c = <-toOrdered[i%int64(slots)]:
				case <-ctx.Done():
					return
				}
				st.Ordered(bufs[c.slot][:c.len])
				ordered <- c
			}
			close(ordered)
		}()
	}

	type done struct {
		slot int
		buf  []byte
	}
	var processed atomic.Int64 // bytes committed
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
			off := current * ChunkSize
			mu.Unlock()
			err := st.Commit(d.slot, d.buf, off)
			processed.Add(int64(len(d.buf)))
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
	// finish runs work on a chunk and commits what is ready; false means
	// Run is stopping.
	finish := func(c chunk) bool {
		buf := bufs[c.slot][:c.len]
		if st.Work != nil {
			if err := st.Work(c.slot, buf, c.i*ChunkSize); err != nil {
				cancel(err)
				return false
			}
		}
		mu.Lock()
		ready[c.i] = done{c.slot, buf}
		mu.Unlock()
		commitReady()
		return true
	}
	// With loadInOrder, chunk i is loaded only once chunk i-1 is: loaded
	// counts them, and a worker whose chunk is not next waits on turn
	// (woken when a load finishes, or when Run stops).
	var loaded int64
	turn := sync.NewCond(&mu)
	if st.LoadInOrder {
		stop := context.AfterFunc(ctx, func() {
			mu.Lock()
			turn.Broadcast()
			mu.Unlock()
		})
		defer stop()
	}
	// start takes the next chunk into slot and loads it; it returns false
	// when Run is stopping or no chunk is left.
	start := func(slot int) (chunk, bool) {
		mu.Lock()
		i := next
		next++
		if st.LoadInOrder {
			for i < n && loaded != i && ctx.Err() == nil {
				turn.Wait()
			}
		}
		stop := i >= n || ctx.Err() != nil
		mu.Unlock()
		if stop {
			free <- slot
			return chunk{}, false
		}
		buf := chunkBuf(slot, i)
		got, err := st.Load(slot, buf, i*ChunkSize)
		if unknown && (errors.Is(err, io.EOF) || err == nil && got < len(buf)) {
			// The input ends in this chunk: no chunk after it.
			err = nil
			mu.Lock()
			n = i + 1
			if got == 0 {
				n = i
			}
			mu.Unlock()
		}
		if st.LoadInOrder {
			mu.Lock()
			loaded++
			turn.Broadcast()
			mu.Unlock()
		}
		if err != nil {
			cancel(err)
			return chunk{}, false
		}
		if got == 0 && unknown {
			free <- slot
			return chunk{}, false
		}
		if !unknown {
			got = len(buf)
		}
		return chunk{slot, i, got}, true
	}

	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if st.Ordered == nil {
				for {
					var slot int
					select {
					case slot = <-free:
					case <-ctx.Done():
						return
					}
					c, ok := start(slot)
					if !ok || !finish(c) {
						return
					}
				}
			}
			freeSlots := free // nil once every chunk is taken
			for {
				// Chunks the ordered stage is done with come first.
				select {
				case c, ok := <-ordered:
					if !ok || !finish(c) {
						return
					}
					continue
				default:
				}
				select {
				case c, ok := <-ordered:
					if !ok || !finish(c) {
						return
					}
				case slot := <-freeSlots:
					c, ok := start(slot)
					if !ok {
						if ctx.Err() != nil {
							return
						}
						freeSlots = nil
						continue
					}
					toOrdered[c.i%int64(slots)] <- c
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	wg.Wait()
	// The last chunks may have become ready after their committer left.
	commitReady()
	if err := context.Cause(ctx); err != nil {
		return processed.Load(), err
	}
	if current != n {
		return processed.Load(), context.Canceled
	}
	return processed.Load(), nil
}
