package volume

import "context"

// ChunkSize is the unit of work of RunChunks.
const ChunkSize = chunkSize

// ChunkStages is what RunChunks does with every chunk (see runChunks): Load
// in parallel (or in order with LoadInOrder), Ordered in order on a
// goroutine of its own, Work in parallel, Commit in order. slot numbers
// the buffer, below Slots(workers), for per-buffer scratch space.
type ChunkStages struct {
	Load        func(slot int, buf []byte, off int64) error
	LoadInOrder bool
	Ordered     func(buf []byte)
	Work        func(slot int, buf []byte, off int64) error
	Commit      func(slot int, buf []byte, off int64) error
}

// Slots is the number of buffers RunChunks uses with that many workers.
func Slots(workers int) int { return max(1, workers) * buffersPerWorker }

// RunChunks is the streaming engine of encrypt and decrypt, for code that
// moves a volume's data itself (package inplace): size bytes (known in
// advance, at least 0) in chunks of ChunkSize, on workers goroutines, with
// the stages of st.
func RunChunks(ctx context.Context, size int64, workers int, st ChunkStages) error {
	return runChunks(ctx, size, workers, chunkStages{
		load: func(slot int, buf []byte, off int64) (int, error) {
			if err := st.Load(slot, buf, off); err != nil {
				return 0, err
			}
			return len(buf), nil
		},
		loadInOrder: st.LoadInOrder,
		ordered:     st.Ordered,
		work:        st.Work,
		commit:      st.Commit,
	})
}
