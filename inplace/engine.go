package inplace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sync"

	"github.com/xtsctl/xtsctl/blake2b"
	"github.com/xtsctl/xtsctl/internal/stream"
)

// Device is what a run reads and writes: the target, or the journal file.
type Device interface {
	io.ReaderAt
	io.WriterAt
	Sync() error
}

// Target is the image file or block device converted in place.
type Target interface {
	Device
	// Size is the current size in bytes.
	Size() (int64, error)
	// Resizable: an image file, which Truncate grows and shrinks; a block
	// device has a fixed size.
	Resizable() bool
	Truncate(size int64) error
}

const (
	chunk = stream.ChunkSize
	// maxZone bounds a zone: in shift mode, the data between two records.
	maxZone = 64 << 20
	// sampleMax is how much of the target a record's sample covers.
	sampleMax = 4 << 10
	// pieceSize is the unit of the journal data's MAC (keyed BLAKE2b tags,
	// many at a time).
	pieceSize = 4096
)

// journalZone is the zone size in journal mode: each zone costs two syncs
// and the journal holds two of them. A variable for tests.
var journalZone int64 = defaultJournalZone

const defaultJournalZone = 16 << 20

// geometry places a run's data: logical byte x of the length bytes is at
// src+x in the target before the run and at dst+x after. Zones are taken
// in the order that never overwrites data not yet read: from the end when
// the data moves up, from the start otherwise.
type geometry struct {
	length, src, dst, zone int64
}

func (g geometry) backward() bool { return g.dst > g.src }
func (g geometry) zones() int64   { return (g.length + g.zone - 1) / g.zone }

// span is the logical range of zone k.
func (g geometry) span(k int64) (lo, hi int64) {
	if g.backward() {
		hi = g.length - k*g.zone
		return max(0, hi-g.zone), hi
	}
	lo = k * g.zone
	return lo, min(g.length, lo+g.zone)
}

// remaining is how many bytes the zones from k on hold.
func (g geometry) remaining(k int64) int64 { return max(0, g.length-k*g.zone) }

// logical maps a chunk of stream.Run over the zones from k0 (at off, n bytes
// long, in processing order) to its logical offset.
func (g geometry) logical(k0, off int64, n int) int64 {
	if g.backward() {
		return g.length - k0*g.zone - off - int64(n)
	}
	return k0*g.zone + off
}

// chunks lists the logical spans of zone k's chunks as stream.Run cuts them
// (only the very last chunk of the data is short), in logical order.
func (g geometry) chunks(k int64) [][2]int64 {
	var out [][2]int64
	rem := g.remaining(k)
	for off := int64(0); off < min(g.zone, rem); off += chunk {
		n := min(chunk, rem-off)
		x := g.logical(k, off, int(n))
		out = append(out, [2]int64{x, x + n})
	}
	slices.SortFunc(out, func(a, b [2]int64) int { return int(a[0] - b[0]) })
	return out
}

// transform is what a run does to the data, chunk by chunk.
type transform struct {
	// read fills buf with the data at logical offset x (by default, read
	// from the target at src+x) and does what must come before ordered.
	read func(slot int, buf []byte, x int64) error
	// ordered, if set, sees the chunks in logical order (forward runs only).
	ordered func(buf []byte)
	// work converts buf in place, in parallel (shift mode).
	work func(slot int, buf []byte, x int64)
	// workTo converts src into dst, in parallel (journal mode).
	workTo func(dst, src []byte, x int64)
	// written, if set, runs in order after buf was written in place.
	written func(slot int, buf []byte, x int64) error
	// seal, if set, returns what a record must carry once the zones
	// before next are done (volume decryption: the digest's state).
	seal func(next int64) ([]byte, error)
}

// engine runs the zones of a run whose records are known.
type engine struct {
	g        geometry
	a        *anchor
	asum     [32]byte
	keys     *runKeys
	t        Target
	rdev     Device // holds the records (the journal file, or the target)
	rec      record // the record in force
	tr       transform
	workers  int
	progress func(done int64)
	// ahead computes the ahead MACs of the records to come, zone after
	// zone, while the zones before them are converted (startAhead).
	ahead *aheadPipe
}

// WriteError and ReadError name which side of a run failed.
type (
	ReadError  struct{ Err error }
	WriteError struct{ Err error }
)

func (e *ReadError) Error() string  { return "cannot read: " + e.Err.Error() }
func (e *ReadError) Unwrap() error  { return e.Err }
func (e *WriteError) Error() string { return "cannot write: " + e.Err.Error() }
func (e *WriteError) Unwrap() error { return e.Err }

func writeAt(d Device, b []byte, off int64) error {
	if _, err := d.WriteAt(b, off); err != nil {
		return &WriteError{Err: err}
	}
	return nil
}

func syncDev(d Device) error {
	if err := d.Sync(); err != nil {
		return &WriteError{Err: fmt.Errorf("sync: %w", err)}
	}
	return nil
}

func readAt(d io.ReaderAt, b []byte, off int64) error {
	n, err := d.ReadAt(b, off)
	if n == len(b) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = fmt.Errorf("%d bytes at byte %d: the image ends first", len(b), off)
	}
	return &ReadError{Err: err}
}

// writeRecord writes r as the next record (sequence + 1, into the other
// slot) and syncs the device holding it.
func (e *engine) writeRecord(r record) error {
	r.Sequence = e.rec.Sequence + 1
	if r.Sequence >= maxSequence {
		return errors.New("inplace: record sequence exhausted")
	}
	b, err := r.marshal(e.a, e.asum, e.keys)
	if err != nil {
		return err
	}
	if err := writeAt(e.rdev, b, e.a.Records+int64(r.Sequence%2)*blockSize); err != nil {
		return err
	}
	if err := syncDev(e.rdev); err != nil {
		return err
	}
	e.rec = r
	step("record")
	return nil
}

// sampleOf returns the sample a record at (next, hasData) carries: part of
// the target that the run finished writing, or has not touched yet, and
// that nothing changes while the record is in force. A target that is not
// what the run left fails it.
func (e *engine) sampleOf(next int64, hasData bool) (off, n int64) {
	g, z := e.g, e.g.zones()
	var lo, hi, base int64
	switch {
	case next > 0:
		// The zone before next is converted and in place.
		lo, hi = g.span(next - 1)
		base = g.dst
	case !hasData:
		// Nothing is written yet: the first zone's source is intact.
		lo, hi = g.span(0)
		base = g.src
	case z > 1:
		// Zone 0 is in the journal (and maybe half in place): the source
		// of zone 1 is intact until zone 1 is written.
		lo, hi = g.span(1)
		base = g.src
	default:
		return 0, 0
	}
	return base + lo, min(hi-lo, sampleMax)
}

func (e *engine) sampleMAC(off, n int64) ([macSize]byte, error) {
	b := make([]byte, n)
	if err := readAt(e.t, b, off); err != nil {
		return [macSize]byte{}, err
	}
	var hdr [16]byte
	put64(hdr[:], 0, uint64(off))
	put64(hdr[:], 8, uint64(n))
	return e.keys.mac(e.keys.sample, hdr[:], b), nil
}

// aheadOf is the part of the target that a record at (next, hasData)
// carries the ahead MAC of: the whole source of the first zone the run has
// not written any of, nor made any write that covers (zone next in shift
// mode, whose destination never covers its own source; zone next + 1 when
// zone next is in the journal and may be partly in place). While the
// record is in force nothing writes there; every later zone's write that
// covers source not yet converted covers this zone's first (zones are
// written in order, each after the previous one is durable), so a target
// that went on further than the record does not match it.
func (e *engine) aheadOf(next int64, hasData bool) (off, n int64) {
	k := next
	if hasData {
		k++
	}
	if e.a.Version < 2 || k >= e.g.zones() {
		return 0, 0
	}
	lo, hi := e.g.span(k)
	return e.g.src + lo, hi - lo
}

// aheadMAC authenticates n bytes of the target at off: keyed tags of its
// 4 KiB pieces (many at a time, numbered by position), then one MAC over
// them with the sample key.
func (e *engine) aheadMAC(off, n int64) ([macSize]byte, error) {
	return e.aheadMACBuf(off, n, make([]byte, min(n, chunk)))
}

// aheadMACBuf is aheadMAC reading through buf (at least a chunk, or n).
func (e *engine) aheadMACBuf(off, n int64, buf []byte) ([macSize]byte, error) {
	h, _ := blake2b.New256(e.keys.sample)
	var hdr [24]byte
	copy(hdr[:], "ahead\x00\x00\x00")
	put64(hdr[:], 8, uint64(off))
	put64(hdr[:], 16, uint64(n))
	h.Write(hdr[:])
	defer clear(buf)
	tags := make([]byte, chunk/pieceSize*16)
	for pos := int64(0); pos < n; {
		b := buf[:min(int64(len(buf)), n-pos)]
		if err := readAt(e.t, b, off+pos); err != nil {
			return [macSize]byte{}, err
		}
		full := len(b) / pieceSize * pieceSize
		tg := tags[:full/pieceSize*16]
		blake2b.SumSectors(tg, 16, e.keys.sample, uint64((off+pos)/pieceSize), b[:full], pieceSize)
		h.Write(tg)
		h.Write(b[full:])
		pos += int64(len(b))
	}
	var mac [macSize]byte
	h.Sum(mac[:0])
	return mac, nil
}

// aheadPipe computes the ahead MACs of zones next, next + 1, ... in order,
// on a goroutine of its own, at most two zones ahead of the records that
// take them. The source of zone j is not written before record j (j - 1
// with data, journal mode) is in force: every zone converted before it
// writes elsewhere (a zone's destination never covers the source of a
// later zone). So its MAC may be computed any time before that record,
// while earlier zones are converted.
type aheadPipe struct {
	next    int64 // the zone of the next result
	results chan aheadResult
	stop    chan struct{}
	done    chan struct{}
}

type aheadResult struct {
	mac [macSize]byte
	err error
}

// startAhead starts computing the ahead MACs from zone from on.
func (e *engine) startAhead(from int64) {
	e.stopAhead()
	if e.a.Version < 2 || from >= e.g.zones() {
		return
	}
	p := &aheadPipe{next: from, results: make(chan aheadResult, 1), stop: make(chan struct{}), done: make(chan struct{})}
	e.ahead = p
	go func() {
		defer close(p.done)
		buf := make([]byte, min(e.g.zone, chunk))
		for k := from; k < e.g.zones(); k++ {
			lo, hi := e.g.span(k)
			var r aheadResult
			r.mac, r.err = e.aheadMACBuf(e.g.src+lo, hi-lo, buf)
			select {
			case p.results <- r:
			case <-p.stop:
				return
			}
			if r.err != nil {
				return
			}
		}
	}()
}

// stopAhead ends the goroutine of startAhead, if any: a run never returns
// while it reads the target.
func (e *engine) stopAhead() {
	if p := e.ahead; p != nil {
		close(p.stop)
		<-p.done
		e.ahead = nil
	}
}

// aheadFor is the ahead MAC of the record (next, hasData): from the pipe
// when it is the zone the pipe has next, computed now otherwise.
func (e *engine) aheadFor(next int64, hasData bool) (off, n int64, mac [macSize]byte, err error) {
	off, n = e.aheadOf(next, hasData)
	if n == 0 {
		return 0, 0, mac, nil
	}
	k := next
	if hasData {
		k++
	}
	if p := e.ahead; p != nil && p.next == k {
		r := <-p.results
		p.next++
		return off, n, r.mac, r.err
	}
	mac, err = e.aheadMAC(off, n)
	return off, n, mac, err
}

// ErrRolledBack: the record in force is not the newest the run wrote (an
// older copy of the records or journal was put back, or the newest record
// destroyed): the data went on further than it says, and resuming from it
// would convert converted data again.
var ErrRolledBack = errors.New("the in-place run's records are older than its data: the target was converted further than the record in force says (an older copy of the journal or of the run's records was put back, or the newest record destroyed); resuming would convert data twice")

// checkAhead compares the target with the record in force's ahead MAC.
func (e *engine) checkAhead() error {
	r := e.rec
	off, n := e.aheadOf(r.Next, r.HasData)
	if r.AheadOff != off || r.AheadLen != n {
		// parseRecord and loadRecords only accept records that say the
		// expected place; a version-1 record has none.
		return fmt.Errorf("inplace: record ahead at %d+%d, want %d+%d", r.AheadOff, r.AheadLen, off, n)
	}
	if n == 0 {
		return nil
	}
	mac, err := e.aheadMAC(off, n)
	if err != nil {
		return fmt.Errorf("%w (%v)", ErrRolledBack, err)
	}
	if mac != r.AheadMAC {
		return fmt.Errorf("%w: bytes %d to %d are not what the run left there", ErrRolledBack, off, off+n)
	}
	return nil
}

// newRecord builds the record for (next, hasData), with its sample and
// ahead MAC.
func (e *engine) newRecord(next int64, hasData bool) (record, error) {
	r := record{Next: next, HasData: hasData}
	r.SampleOff, r.SampleLen = e.sampleOf(next, hasData)
	if r.SampleLen > 0 {
		mac, err := e.sampleMAC(r.SampleOff, r.SampleLen)
		if err != nil {
			return r, err
		}
		r.SampleMAC = mac
	}
	var err error
	if r.AheadOff, r.AheadLen, r.AheadMAC, err = e.aheadFor(next, hasData); err != nil {
		return r, err
	}
	if e.tr.seal != nil && !hasData {
		s, err := e.tr.seal(next)
		if err != nil {
			return r, err
		}
		r.Sealed = s
	}
	return r, nil
}

// ErrNotThisTarget: the target is not what the interrupted run left.
var ErrNotThisTarget = errors.New("the target is not what the interrupted in-place run left: its data differs from what the run wrote (another image, or changed since)")

// checkSample compares the target with the record in force's sample (and
// a finished record's end sample).
func (e *engine) checkSample() error {
	r := e.rec
	limit := int64(sampleMax)
	if r.Finished {
		limit = finishedSampleMax
	}
	end := max(e.a.OrigSize, e.a.FinalSize)
	for _, s := range []struct {
		off, n int64
		mac    [macSize]byte
	}{{r.SampleOff, r.SampleLen, r.SampleMAC}, {r.EndOff, r.EndLen, r.EndMAC}} {
		if s.n == 0 {
			continue
		}
		if s.off < 0 || s.n > limit || s.off+s.n > end {
			return ErrNotThisTarget
		}
		mac, err := e.sampleMAC(s.off, s.n)
		if err != nil {
			return fmt.Errorf("%w (%v)", ErrNotThisTarget, err)
		}
		if mac != s.mac {
			return fmt.Errorf("%w: bytes %d to %d do not match", ErrNotThisTarget, s.off, s.off+s.n)
		}
	}
	return nil
}

// chunkMAC authenticates one chunk of journal data at logical x: keyed
// tags of its 4 KiB pieces (many at a time), then one MAC over them.
func (e *engine) chunkMAC(buf, tags []byte, x int64) [macSize]byte {
	full := len(buf) / pieceSize * pieceSize
	tags = tags[:full/pieceSize*16]
	blake2b.SumSectors(tags, 16, e.keys.data, uint64(x/512), buf[:full], pieceSize)
	var hdr [16]byte
	put64(hdr[:], 0, uint64(x))
	put64(hdr[:], 8, uint64(len(buf)))
	return e.keys.mac(e.keys.data, hdr[:], tags, buf[full:])
}

// zoneMAC authenticates zone k's journal data from its chunks' MACs in
// logical order.
func (e *engine) zoneMAC(k, n int64, macs [][macSize]byte) [macSize]byte {
	var hdr [16]byte
	put64(hdr[:], 0, uint64(k))
	put64(hdr[:], 8, uint64(n))
	parts := [][]byte{hdr[:]}
	for i := range macs {
		parts = append(parts, macs[i][:])
	}
	return e.keys.mac(e.keys.data, parts...)
}

// slotData reads zone k's data slot and checks it against the record's MAC.
func (e *engine) slotData(r *record) ([]byte, error) {
	lo, hi := e.g.span(r.Next)
	if r.DataLen != hi-lo {
		return nil, errors.New("the journal's data slot has the wrong length")
	}
	buf := make([]byte, r.DataLen)
	if err := readAt(e.rdev, buf, e.a.DataSlots+(r.Next%2)*e.g.zone); err != nil {
		return nil, err
	}
	var macs [][macSize]byte
	tags := make([]byte, chunk/pieceSize*16)
	for _, c := range e.g.chunks(r.Next) {
		macs = append(macs, e.chunkMAC(buf[c[0]-lo:c[1]-lo], tags, c[0]))
	}
	if e.zoneMAC(r.Next, r.DataLen, macs) != r.DataMAC {
		return nil, errors.New("the journal's data slot does not match its record")
	}
	return buf, nil
}

// run converts every zone from the record in force on, leaving a record
// that says all are done (Next == zones, no data).
func (e *engine) run(ctx context.Context) error {
	defer e.stopAhead()
	g, z := e.g, e.g.zones()
	k0 := e.rec.Next
	if e.rec.HasData {
		// Zone k0 is in the journal and may be partly in place: finish it.
		buf, err := e.slotData(&e.rec)
		if err != nil {
			return err
		}
		lo, _ := g.span(k0)
		if err := writeAt(e.t, buf, g.dst+lo); err != nil {
			return err
		}
		clear(buf)
		if err := syncDev(e.t); err != nil {
			return err
		}
		k0++
	}
	done := func(k int64) int64 { return g.length - g.remaining(k) }
	if e.progress != nil {
		e.progress(done(k0))
	}
	if k0 < z {
		// The first record this run writes is k0 + 1 (shift mode) or
		// (k0, has data): both carry zone k0 + 1's ahead MAC.
		e.startAhead(k0 + 1)
		var err error
		if e.a.Mode == modeJournal {
			err = e.runJournal(ctx, k0)
		} else {
			err = e.runShift(ctx, k0)
		}
		if err != nil {
			return err
		}
	}
	if e.rec.Next != z || e.rec.HasData {
		// Journal mode ends with the last zone written in place: say so.
		if err := syncDev(e.t); err != nil {
			return err
		}
		r, err := e.newRecord(z, false)
		if err != nil {
			return err
		}
		if err := e.writeRecord(r); err != nil {
			return err
		}
	}
	return nil
}

func (e *engine) read(slot int, buf []byte, x int64) error {
	if e.tr.read != nil {
		return e.tr.read(slot, buf, x)
	}
	return readAt(e.t, buf, e.g.src+x)
}

// runShift: each zone is written in place (its destination holds only
// data already converted and recorded), synced, then recorded done.
func (e *engine) runShift(ctx context.Context, k0 int64) error {
	g := e.g
	return stream.Run(ctx, g.remaining(k0), e.workers, stream.Stages{
		Load: loadAll(func(slot int, buf []byte, off int64) error {
			return e.read(slot, buf, g.logical(k0, off, len(buf)))
		}),
		Ordered: e.tr.ordered,
		Work: func(slot int, buf []byte, off int64) error {
			if e.tr.work != nil {
				e.tr.work(slot, buf, g.logical(k0, off, len(buf)))
			}
			return nil
		},
		Commit: func(slot int, buf []byte, off int64) error {
			x := g.logical(k0, off, len(buf))
			if err := writeAt(e.t, buf, g.dst+x); err != nil {
				return err
			}
			if e.tr.written != nil {
				if err := e.tr.written(slot, buf, x); err != nil {
					return err
				}
			}
			end := off + int64(len(buf))
			if e.progress != nil {
				e.progress(g.length - g.remaining(k0) + end)
			}
			if end%g.zone != 0 && end != g.remaining(k0) {
				return nil
			}
			// The zone is complete: durable, then recorded.
			k := k0 + (end-1)/g.zone
			if err := syncDev(e.t); err != nil {
				return err
			}
			r, err := e.newRecord(k+1, false)
			if err != nil {
				return err
			}
			return e.writeRecord(r)
		},
	})
}

// runJournal: each zone is converted into a data slot of the journal,
// which is synced with a record naming it before the zone is written in
// place (by a goroutine, while the next zone is converted into the other
// slot). A crash leaves the zone in the journal, from which it is
// rewritten.
//
// The chunks are converted straight into one of two zone buffers (from
// which the journal and then the target are written): the buffer of zone
// k is free once zone k-2 is written in place. Fewer than a zone's chunks
// are ever in flight, so a chunk waiting for its buffer waits only for a
// write that has started, or that never will once the run failed: the
// first error of any stage wakes it (else a failed write in place would
// leave a chunk of zone k+2 waiting for ever).
func (e *engine) runJournal(ctx context.Context, k0 int64) error {
	g := e.g
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	slots := stream.Slots(e.workers)
	tags := make([][]byte, slots)
	macs := make([][macSize]byte, slots)
	for i := range tags {
		tags[i] = make([]byte, chunk/pieceSize*16)
	}
	var zbuf [2][]byte
	for i := range zbuf {
		zbuf[i] = make([]byte, min(g.zone, g.length))
	}
	defer func() {
		for _, b := range zbuf {
			clear(b)
		}
	}()
	// ready[i] is the zone that zbuf[i] may hold now.
	var (
		zmu   sync.Mutex
		zcond = sync.NewCond(&zmu)
		ready = [2]int64{k0, k0 + 1}
	)
	if k0%2 == 1 {
		ready = [2]int64{k0 + 1, k0}
	}
	failed := false
	defer context.AfterFunc(ctx, func() {
		zmu.Lock()
		failed = true
		zcond.Broadcast()
		zmu.Unlock()
	})()
	claim := func(k int64) error {
		zmu.Lock()
		defer zmu.Unlock()
		for ready[k%2] != k && !failed {
			zcond.Wait()
		}
		if failed {
			return context.Cause(ctx)
		}
		return nil
	}
	// stopOnError ends the run at the first error of a stage, which the
	// run returns (rather than the cancellation that woke a claim).
	var firstErr error
	var errOnce sync.Once
	stopOnError := func(err error) error {
		if err != nil {
			errOnce.Do(func() { firstErr = err })
			stop()
		}
		return err
	}
	release := func(k int64) {
		zmu.Lock()
		ready[k%2] = k + 2
		zcond.Broadcast()
		zmu.Unlock()
	}
	// zoneBuf is where the chunk of zone k at logical x, n bytes, goes.
	zoneBuf := func(k, x int64, n int) []byte {
		lo, _ := g.span(k)
		return zbuf[k%2][x-lo : x-lo+int64(n)]
	}
	type zoneMACs struct {
		x   []int64
		mac [][macSize]byte
	}
	var cur zoneMACs
	// writer writes a zone in place; its result comes back on written.
	var written chan error
	wait := func() error {
		if written == nil {
			return nil
		}
		err := <-written
		written = nil
		return err
	}
	commit := func(slot int, buf []byte, off int64) error {
		x, k := g.logical(k0, off, len(buf)), k0+off/g.zone
		lo, hi := g.span(k)
		if err := writeAt(e.rdev, zoneBuf(k, x, len(buf)), e.a.DataSlots+(k%2)*g.zone+x-lo); err != nil {
			return err
		}
		cur.x = append(cur.x, x)
		cur.mac = append(cur.mac, macs[slot])
		end := off + int64(len(buf))
		if e.progress != nil {
			e.progress(g.length - g.remaining(k0) + end)
		}
		if end%g.zone != 0 && end != g.remaining(k0) {
			return nil
		}
		// Zone k is in its slot. The previous zone must be in place
		// (durably) before a record says it is done.
		if err := wait(); err != nil {
			return err
		}
		if err := syncDev(e.t); err != nil {
			return err
		}
		ordered := make([][macSize]byte, len(cur.x))
		idx := make([]int, len(cur.x))
		for i := range idx {
			idx[i] = i
		}
		slices.SortFunc(idx, func(a, b int) int { return int(cur.x[a] - cur.x[b]) })
		for i, j := range idx {
			ordered[i] = cur.mac[j]
		}
		cur = zoneMACs{}
		r, err := e.newRecord(k, true)
		if err != nil {
			return err
		}
		r.DataLen, r.DataMAC = hi-lo, e.zoneMAC(k, hi-lo, ordered)
		if err := e.writeRecord(r); err != nil {
			return err
		}
		// In place, while the next zone fills the other buffer.
		data := zbuf[k%2][:hi-lo]
		written = make(chan error, 1)
		go func(ch chan error) {
			err := writeAt(e.t, data, g.dst+lo)
			release(k)
			ch <- err
		}(written)
		return nil
	}
	err := stream.Run(ctx, g.remaining(k0), e.workers, stream.Stages{
		Load: loadAll(func(slot int, buf []byte, off int64) error {
			return stopOnError(e.read(slot, buf, g.logical(k0, off, len(buf))))
		}),
		Work: func(slot int, buf []byte, off int64) error {
			x, k := g.logical(k0, off, len(buf)), k0+off/g.zone
			if err := claim(k); err != nil {
				return err
			}
			dst := zoneBuf(k, x, len(buf))
			e.tr.workTo(dst, buf, x)
			macs[slot] = e.chunkMAC(dst, tags[slot], x)
			return nil
		},
		Commit: func(slot int, buf []byte, off int64) error {
			return stopOnError(commit(slot, buf, off))
		},
	})
	if werr := wait(); err == nil {
		err = werr
	}
	if firstErr != nil {
		return firstErr
	}
	return err
}

// defaultWorkers is how many goroutines convert at once.
func defaultWorkers() int { return runtime.GOMAXPROCS(0) }

// loadAll makes a load that fills its whole buffer a stream.Stages.Load
// (the size of an in-place run is always known).
func loadAll(f func(slot int, buf []byte, off int64) error) func(int, []byte, int64) (int, error) {
	return func(slot int, buf []byte, off int64) (int, error) { return len(buf), f(slot, buf, off) }
}
