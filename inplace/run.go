package inplace

import (
	"crypto/rand"
	"errors"
	"fmt"

	"github.com/xtsctl/xtsctl/internal/bytesize"
)

// Options are what every run takes besides its target and key.
type Options struct {
	// Progress, if set, is told how far each phase got: "hashing" or
	// "checking" (a pass that reads only), "kdf" (a new volume's key
	// derivation: done is 0 and total the data's length), then
	// "converting".
	Progress func(phase string, done, total int64)
	// Workers is how many goroutines convert at once (0: GOMAXPROCS).
	Workers int
	// NoDigest: a volume decryption does not hash the plaintext (decrypt
	// --digest none); the tags are checked all the same. Once a run of a
	// decryption had it, the rest of that decryption does not either.
	NoDigest bool
	// Force: a new plain run skips the guards that guess from the data
	// whether its target is converted already (ConvertedError).
	Force bool
}

func (o *Options) workers() int {
	if o.Workers > 0 {
		return o.Workers
	}
	return defaultWorkers()
}

func (o *Options) progress(phase string, total int64) func(int64) {
	if o.Progress == nil {
		return nil
	}
	return func(done int64) { o.Progress(phase, done, total) }
}

// Result says what a run did.
type Result struct {
	// Resumed: an interrupted run was continued; ResumedAt is how many
	// bytes of the data it had converted.
	Resumed   bool
	ResumedAt int64
	// AlreadyDone: the interrupted run had converted everything and was
	// only tidying up, or (plain) the journal says the run finished and
	// the target is what it left: nothing was converted.
	AlreadyDone bool
	// Length is the number of bytes of data converted.
	Length int64
}

// errNoRecords: no record of the run authenticates.
var errNoRecords = errors.New("the in-place run's records are damaged: how far it got cannot be trusted")

// loadRecords reads both record slots and makes the usable one with the
// highest sequence number the record in force. A record naming a data slot
// is usable only if the slot matches its MAC (a crash while the slot was
// written leaves the previous record, whose slot is the other one, in
// force).
func (e *engine) loadRecords() error {
	buf := make([]byte, 2*blockSize)
	if err := readAt(e.rdev, buf, e.a.Records); err != nil {
		return err
	}
	var best *record
	wrongKey := false
	for i := range 2 {
		r, err := parseRecord(buf[i*blockSize:(i+1)*blockSize], i, e.a, e.asum, e.keys)
		if errors.Is(err, ErrWrongKey) {
			wrongKey = true
		}
		if err != nil || r == nil {
			continue
		}
		if r.Next < 0 || r.Next > e.g.zones() || r.Next == e.g.zones() && r.HasData || r.HasData && e.a.Mode != modeJournal {
			continue
		}
		// Where its ahead MAC and samples are is not up to the record:
		// it says what the run computes for it.
		if off, n := e.aheadOf(r.Next, r.HasData); !r.Finished && (r.AheadOff != off || r.AheadLen != n) ||
			r.Finished && (r.AheadLen != 0 || r.AheadOff != 0) {
			continue
		}
		if r.Finished && (e.a.Kind != KindPlain || r.Next != e.g.zones() || r.HasData) || !r.Finished && (r.EndOff != 0 || r.EndLen != 0) {
			continue
		}
		if r.HasData {
			b, err := e.slotData(r)
			if err != nil {
				continue
			}
			clear(b)
		}
		if best == nil || r.Sequence > best.Sequence {
			best = r
		}
	}
	if best == nil {
		if wrongKey {
			return ErrWrongKey
		}
		return errNoRecords
	}
	e.rec = *best
	return nil
}

// writeFirstRecord writes record 0 of a new run (slot 0) and clears slot 1.
func (e *engine) writeFirstRecord() error {
	r, err := e.newRecord(0, false)
	if err != nil {
		return err
	}
	b, err := r.marshal(e.a, e.asum, e.keys)
	if err != nil {
		return err
	}
	b = append(b, make([]byte, blockSize)...)
	if err := writeAt(e.rdev, b, e.a.Records); err != nil {
		return err
	}
	e.rec = r
	return nil
}

// done is how many bytes of data the record in force says are converted.
func (e *engine) done() int64 { return e.g.length - e.g.remaining(e.rec.Next) }

func newRunID() ([16]byte, error) {
	var id [16]byte
	_, err := rand.Read(id[:])
	return id, err
}

// geometryOf is the geometry an anchor describes.
func geometryOf(a *anchor) geometry {
	return geometry{length: a.Length, src: a.Source, dst: a.Dest, zone: a.Zone}
}

// chooseMode picks how zones are made safe for data moving by shift bytes:
// without a journal when a zone fits the shift, the zone as large as the
// shift allows; otherwise through the journal.
func chooseMode(shift, length int64) (mode, int64) {
	if shift >= chunk {
		return modeShift, min(shift/chunk*chunk, maxZone)
	}
	return modeJournal, min(journalZone, (length+chunk-1)/chunk*chunk)
}

// NeedRoomError: the target has not the room the run needs.
type NeedRoomError struct {
	Need, Have int64 // bytes beyond the data
	What       string
}

func (e *NeedRoomError) Error() string {
	return fmt.Sprintf("%s needs %d bytes after the data (%s), and has %d", e.What, e.Need, bytesize.Human(e.Need), e.Have)
}

// zero writes n zero bytes at off.
func zero(d Device, off, n int64) error {
	z := make([]byte, min(n, 1<<20))
	for n > 0 {
		k := min(n, int64(len(z)))
		if err := writeAt(d, z[:k], off); err != nil {
			return err
		}
		off += k
		n -= k
	}
	return nil
}
