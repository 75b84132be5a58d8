package inplace

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/xtsctl/xtsctl/internal/testhooks"
	"github.com/xtsctl/xtsctl/plain"
	"github.com/xtsctl/xtsctl/sector"
)

// A plain image has no header and no room of its own: a plain run keeps its
// anchor, records and (in journal mode) two zones of converted data in a
// journal file beside it (docs/INPLACE.md, "Plain images"). The journal
// stays when the run ends, truncated to its records, the newest of which
// says the run finished: the target itself cannot tell, and the same
// command run again must not convert it again.

// JournalFile is an open journal.
type JournalFile interface {
	Device
	// Truncate sets its size (a finished run drops its data slots).
	Truncate(size int64) error
	Close() error
}

// Journal is the journal file of a plain run.
type Journal interface {
	// Open opens the journal and locks it against every other run; an
	// error wrapping fs.ErrNotExist says there is none.
	Open() (JournalFile, error)
	// Create makes a new journal of size bytes, locked; init writes its
	// first content. Open finds it only once that content is durable.
	// With replace, it takes the place of the journal the caller has
	// open (and locked); without, it fails if a journal appeared
	// meanwhile (another run started).
	Create(size int64, init func(Device) error, replace bool) (JournalFile, error)
	// Name names the journal in messages.
	Name() string
}

// Journal file layout: the anchor, the two records, a reserved block, then
// the data slots (journal mode). A finished run's journal is cut to
// journalData bytes.
const (
	journalRecords = blockSize
	journalData    = 4 * blockSize
)

// finishedSampleMax is how much of the target each of a finished record's
// two samples covers.
const finishedSampleMax = 64 << 10

// MismatchError: the interrupted run (or, Finished, the finished run its
// journal records) was started with other parameters.
type MismatchError struct {
	What     string
	Finished bool
}

func (e *MismatchError) Error() string {
	if e.Finished {
		return "the finished in-place run its journal records " + e.What
	}
	return "the interrupted in-place run " + e.What
}

// DirectionError: the target holds an interrupted run of the other
// direction (or kind), which only its own command finishes.
type DirectionError struct {
	Kind      Kind
	Direction Direction
}

func (e *DirectionError) Error() string {
	return fmt.Sprintf("an in-place %s (%s) of this target was interrupted: only xtsctl %s --in-place can finish it", e.Direction, e.Kind, e.Direction.Verb())
}

// FinishedError: the journal records a finished run that forbids this one
// (nothing was changed).
type FinishedError struct {
	Journal   string
	Direction Direction // of the finished run
	// OtherKey: its records do not authenticate with this key; otherwise
	// the run was of this direction and the target changed since.
	OtherKey bool
}

func (e *FinishedError) Error() string {
	if e.OtherKey {
		return fmt.Sprintf("its journal %s records a finished in-place %s of it with a different key", e.Journal, e.Direction)
	}
	return fmt.Sprintf("its journal %s records a finished in-place %s, and it is not what that run left (it changed since, or the journal is another target's): it is not converted again", e.Journal, e.Direction)
}

// ConvertedError: a new run's target already looks converted (the guess
// of the guards, which Options.Force skips).
type ConvertedError struct {
	Direction Direction // of the run refused
	What      string    // what was recognised
	At        int64     // where
}

func (e *ConvertedError) Error() string {
	if e.Direction == Encrypt {
		return fmt.Sprintf("it looks encrypted with this key already: its data at byte %d decrypts to %s", e.At, e.What)
	}
	return fmt.Sprintf("it looks decrypted already: it holds %s at byte %d, and decrypting it with this key gives nothing recognisable", e.What, e.At)
}

// EncryptPlain encrypts the target in place as cryptsetup plain mode
// with the parameters p: the result is byte for byte what
// plain.Encrypt writes for the target's old content (p.Offset × 512
// zero bytes, then the ciphertext; an image grows by that much, a block
// device needs that much room at its end, given as room: the data is the
// device but its last room bytes). An interrupted run, found by its
// journal, is resumed; a finished one is not run again.
func EncryptPlain(ctx context.Context, t Target, j Journal, p plain.Mapping, room int64, key []byte, opts Options) (*Result, error) {
	return runPlain(ctx, t, j, p, room, key, Encrypt, opts)
}

// DecryptPlain decrypts the target in place: the result is what
// plain.Decrypt writes (the plaintext of the data after the offset,
// at the start; an image shrinks by the offset, a block device keeps its
// size and its last p.Offset × 512 bytes are zeroed).
func DecryptPlain(ctx context.Context, t Target, j Journal, p plain.Mapping, key []byte, opts Options) (*Result, error) {
	return runPlain(ctx, t, j, p, 0, key, Decrypt, opts)
}

func runPlain(ctx context.Context, t Target, j Journal, p plain.Mapping, room int64, key []byte, dir Direction, opts Options) (*Result, error) {
	if err := p.Check(); err != nil {
		return nil, err
	}
	codec, err := sector.NewCodecKey(key, p.Sector)
	if err != nil {
		return nil, err
	}
	defer codec.Wipe()
	codec.SetWorkers(1) // the engine's workers are the parallelism
	keys := newRunKeys(key)
	defer keys.wipe()
	fn := codec.Encrypt
	if dir == Decrypt {
		fn = codec.Decrypt
	}
	ss := int64(p.Sector.Size)
	e := &engine{t: t, keys: keys, workers: opts.workers(), tr: transform{
		work:   func(_ int, buf []byte, x int64) { fn(buf, buf, uint64(x/ss)) },
		workTo: func(dst, src []byte, x int64) { fn(dst, src, uint64(x/ss)) },
	}}

	res := &Result{}
	jf, err := j.Open()
	defer func() {
		if jf != nil {
			jf.Close()
		}
	}()
	var old JournalFile // a finished run's journal, which the new run replaces
	switch {
	case err == nil:
		finished, err := loadPlain(e, jf, j.Name(), p, dir)
		switch {
		case err != nil:
			return nil, err
		case finished && e.a.Direction == dir:
			return alreadyPlain(e, jf, j.Name())
		case finished:
			// The other direction starts anew, on the target the run
			// left: its size tells one that a run started since (and
			// grew or shrank) from it, which an older copy of the
			// journal put back would hide. Its content may have changed
			// (written through open): the guards below judge that.
			if size, err := t.Size(); err != nil {
				return nil, &ReadError{Err: err}
			} else if size != e.a.FinalSize {
				return nil, &FinishedError{Journal: j.Name(), Direction: e.a.Direction}
			}
			old = jf
		default:
			if err := resumePlain(e); err != nil {
				return nil, err
			}
			res.Resumed, res.ResumedAt = true, e.done()
		}
	case errors.Is(err, fs.ErrNotExist):
		step("no journal")
	default:
		return nil, err
	}
	if !res.Resumed {
		if !opts.Force {
			if err := guardPlain(t, p, dir, codec); err != nil {
				return nil, err
			}
		}
		*e = engine{t: t, keys: keys, workers: opts.workers(), tr: e.tr}
		nj, err := startPlain(e, j, p, room, dir, old != nil)
		if err != nil {
			return nil, err
		}
		if old != nil {
			old.Close() // its lock goes with it: the new journal, locked, is in its place
		}
		jf = nj
	}
	res.Length = e.a.Length
	e.progress = opts.progress("converting", e.a.Length)
	if err := e.run(ctx); err != nil {
		return res, err
	}
	step("converted")
	// Finish: what lies outside the data. Each step may be repeated.
	a := e.a
	switch {
	case dir == Encrypt && a.Dest > 0:
		if err := zero(t, 0, a.Dest); err != nil {
			return res, err
		}
	case dir == Decrypt && a.Source > 0 && t.Resizable():
		if err := t.Truncate(a.FinalSize); err != nil {
			return res, &WriteError{Err: err}
		}
	case dir == Decrypt && a.Source > 0:
		if err := zero(t, a.Length, a.Source); err != nil {
			return res, err
		}
	}
	if err := syncDev(t); err != nil {
		return res, err
	}
	step("finished")
	if a.Version >= 2 {
		// The journal now says the run is over, for good: the same
		// command run again finds it and converts nothing.
		r, err := e.finishedRecord()
		if err != nil {
			return res, err
		}
		if err := e.writeRecord(r); err != nil {
			return res, err
		}
		step("recorded")
	}
	if err := shrinkJournal(jf); err != nil {
		return res, err
	}
	step("end")
	return res, nil
}

// shrinkJournal cuts a finished run's journal to its records (its data
// slots are not needed any more), durably.
func shrinkJournal(jf JournalFile) error {
	b := make([]byte, 1)
	if n, _ := jf.ReadAt(b, journalData); n == 0 {
		return nil // already
	}
	if err := jf.Truncate(journalData); err != nil {
		return &WriteError{Err: fmt.Errorf("cannot shrink the journal: %w", err)}
	}
	return syncDev(jf)
}

// finishedRecord is the record that ends a plain run: Next is every zone,
// and two samples of the target as the run left it, its start and the end
// of the data, with its size (the anchor's), tell a target that is still
// what the run left from one that changed since.
func (e *engine) finishedRecord() (record, error) {
	r := record{Next: e.g.zones(), Finished: true}
	end := e.a.Dest + e.a.Length
	r.SampleOff, r.SampleLen = 0, min(finishedSampleMax, end)
	r.EndLen = min(finishedSampleMax, e.a.Length)
	r.EndOff = end - r.EndLen
	var err error
	if r.SampleMAC, err = e.sampleMAC(r.SampleOff, r.SampleLen); err != nil {
		return r, err
	}
	r.EndMAC, err = e.sampleMAC(r.EndOff, r.EndLen)
	return r, err
}

// alreadyPlain answers a run of the direction its journal records as
// finished: nothing to do if the target is what that run left, refused
// otherwise. Nothing is converted either way.
func alreadyPlain(e *engine, jf JournalFile, name string) (*Result, error) {
	size, err := e.t.Size()
	if err != nil {
		return nil, &ReadError{Err: err}
	}
	if size != e.a.FinalSize || e.checkSample() != nil {
		return nil, &FinishedError{Journal: name, Direction: e.a.Direction}
	}
	// A run stopped after its finished record, before it cut the journal.
	if err := shrinkJournal(jf); err != nil {
		return nil, err
	}
	return &Result{AlreadyDone: true, Length: e.a.Length}, nil
}

// startPlain begins a new run: the guards first, then the journal,
// durably (replacing a finished run's, with replace), then (an image that
// grows) the new size.
func startPlain(e *engine, j Journal, p plain.Mapping, room int64, dir Direction, replace bool) (JournalFile, error) {
	size, err := e.t.Size()
	if err != nil {
		return nil, &ReadError{Err: err}
	}
	off, ss := p.OffsetBytes(), int64(p.Sector.Size)
	a := &anchor{Version: newRunVersion, Kind: KindPlain, Direction: dir, SectorSize: uint32(ss), IVMode: uint32(p.Sector.IVMode),
		IVOffset: p.Sector.IVOffset, Offset: p.Offset, OrigSize: size, Records: journalRecords, DataSlots: journalData}
	if a.RunID, err = newRunID(); err != nil {
		return nil, err
	}
	if dir == Encrypt {
		a.Dest = off
		switch {
		case room < 0 || room > size:
			return nil, fmt.Errorf("the room to leave (%d bytes) is not within the target's %d bytes", room, size)
		case !e.t.Resizable() && room < off:
			return nil, &NeedRoomError{What: "the offset", Need: off, Have: room}
		case e.t.Resizable() && room > 0:
			return nil, ErrRoomOnImage
		}
		a.FinalSize = size
		if e.t.Resizable() {
			a.FinalSize = size + off
		}
	} else {
		a.Source = off
		a.FinalSize = size
		if e.t.Resizable() {
			a.FinalSize = size - off
		}
	}
	if a.Length, err = plainLength(size, room, p, dir); err != nil {
		return nil, err
	}
	a.Mode, a.Zone = chooseMode(off, a.Length)
	if err := a.check(); err != nil {
		return nil, fmt.Errorf("inplace: %w", err)
	}
	ab := a.marshal()
	_, asum, _ := parseAnchor(ab)
	e.a, e.asum, e.g = a, asum, geometryOf(a)
	jsize := int64(journalData)
	if a.Mode == modeJournal {
		jsize += 2 * a.Zone
	}
	jf, err := j.Create(jsize, func(d Device) error {
		e.rdev = d
		if err := writeAt(d, ab, 0); err != nil {
			return err
		}
		return e.writeFirstRecord()
	}, replace)
	var we *WriteError
	var be *BusyError
	if err != nil && !errors.As(err, &we) && !errors.As(err, &be) {
		err = &WriteError{Err: err}
	}
	if err != nil {
		return nil, err
	}
	e.rdev = jf
	if a.FinalSize > size {
		if err := e.t.Truncate(a.FinalSize); err != nil {
			jf.Close()
			return nil, &WriteError{Err: err}
		}
		if err := syncDev(e.t); err != nil {
			jf.Close()
			return nil, err
		}
	}
	return jf, nil
}

// loadPlain reads the run a journal describes and checks that it is a
// plain run with p's parameters (and, a finished one of the other
// direction aside, of dir) whose records authenticate with the key:
// finished says it is over.
func loadPlain(e *engine, jf JournalFile, name string, p plain.Mapping, dir Direction) (finished bool, err error) {
	b := make([]byte, anchorSize)
	if err := readAt(jf, b, 0); err != nil {
		return false, fmt.Errorf("cannot read the journal: %w", err)
	}
	a, asum, err := parseAnchor(b)
	if err != nil {
		if errors.Is(err, errNoAnchor) {
			return false, errors.New("the journal is not an xtsctl in-place journal")
		}
		return false, err
	}
	if a.Kind != KindPlain {
		return false, &DirectionError{Kind: a.Kind, Direction: a.Direction}
	}
	if a.Records != journalRecords || a.DataSlots != journalData {
		return false, errors.New("the journal's anchor is invalid")
	}
	// Without the key, only the records' checksums say whether the run
	// finished: enough to choose the message, never to act on.
	st := statusOf(jf, a, asum)
	if st.Direction != dir && !st.Finished {
		return false, &DirectionError{Kind: a.Kind, Direction: a.Direction}
	}
	if !st.sameParams(p) {
		return false, &MismatchError{What: "used " + st.params(), Finished: st.Finished}
	}
	e.a, e.asum, e.g, e.rdev = a, asum, geometryOf(a), jf
	if err := e.loadRecords(); err != nil {
		if errors.Is(err, ErrWrongKey) && st.Finished {
			return false, &FinishedError{Journal: name, Direction: a.Direction, OtherKey: true}
		}
		return false, err
	}
	if e.rec.Finished {
		return true, nil
	}
	if a.Direction != dir {
		return false, &DirectionError{Kind: a.Kind, Direction: a.Direction}
	}
	return false, nil
}

// resumePlain checks that the interrupted run loadPlain found is on this
// target, as the run left it.
func resumePlain(e *engine) error {
	a := e.a
	// The target's size: what the run made it, or, before the run grew it
	// (its first step after the journal), what it was.
	size, err := e.t.Size()
	if err != nil {
		return &ReadError{Err: err}
	}
	grow := false
	switch {
	case size == a.FinalSize:
	case size == a.OrigSize && e.t.Resizable() && a.FinalSize > a.OrigSize && e.rec.Next == 0 && !e.rec.HasData:
		grow = true
	case size == a.OrigSize && e.t.Resizable() && a.FinalSize < a.OrigSize:
		// A decryption shrinks the image only at its very end.
	default:
		return fmt.Errorf("%w: it is %d bytes, the run left %d", ErrNotThisTarget, size, a.FinalSize)
	}
	if err := e.checkSample(); err != nil {
		return err
	}
	if err := e.checkAhead(); err != nil {
		return err
	}
	if grow {
		if err := e.t.Truncate(a.FinalSize); err != nil {
			return &WriteError{Err: err}
		}
	}
	return nil
}

// guardPlain guesses, from the data, whether a new plain run's target is
// already converted, and refuses it if so: an encryption whose target's
// start (or where an encryption with this offset put the data) decrypts
// with the key to something recognisable; a decryption whose target holds
// something recognisable where the data starts (or at 0) while decrypting
// it gives nothing recognisable. It never decides anything else, and
// --force skips it.
func guardPlain(t Target, p plain.Mapping, dir Direction, codec *sector.Codec) error {
	size, err := t.Size()
	if err != nil {
		return &ReadError{Err: err}
	}
	ss, off := int64(p.Sector.Size), p.OffsetBytes()
	read := func(at int64) []byte {
		n := min(signatureBytes, size-at) / ss * ss
		if at < 0 || n <= 0 {
			return nil
		}
		b := make([]byte, n)
		if readAt(t, b, at) != nil {
			return nil
		}
		return b
	}
	decrypted := func(b []byte) string {
		if b == nil {
			return ""
		}
		d := make([]byte, len(b))
		codec.Decrypt(d, b, 0)
		return recognise(d)
	}
	if dir == Encrypt {
		places := []int64{0}
		if off > 0 {
			places = append(places, off)
		}
		for _, at := range places {
			if what := decrypted(read(at)); what != "" {
				return &ConvertedError{Direction: Encrypt, What: what, At: at}
			}
		}
		return nil
	}
	data := read(off)
	if decrypted(data) != "" {
		return nil
	}
	if what := recognise(data); what != "" && data != nil {
		return &ConvertedError{Direction: Decrypt, What: what, At: off}
	}
	if off > 0 {
		if what := recognise(read(0)); what != "" {
			return &ConvertedError{Direction: Decrypt, What: what, At: 0}
		}
	}
	return nil
}

// step marks a moment of a run for the tests (testhooks.InPlaceStep).
func step(name string) {
	if f := testhooks.InPlaceStep; f != nil {
		f(name)
	}
}
