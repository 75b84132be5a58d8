package inplace

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/xtsctl/xtsctl/sector"
	"github.com/xtsctl/xtsctl/volume"
)

// A plain image has no header and no room of its own: a plain run keeps its
// anchor, records and (in journal mode) two zones of converted data in a
// journal file beside it (docs/INPLACE.md, "Plain images").

// JournalFile is an open journal.
type JournalFile interface {
	Device
	Close() error
}

// Journal is the journal file of a plain run.
type Journal interface {
	// Open opens the journal of an interrupted run; an error wrapping
	// fs.ErrNotExist says there is none.
	Open() (JournalFile, error)
	// Create makes a new journal of size bytes; init writes its first
	// content. Open finds it only once that content is durable.
	Create(size int64, init func(Device) error) (JournalFile, error)
	// Remove deletes the journal, durably.
	Remove() error
	// Name names the journal in messages.
	Name() string
}

// Journal file layout: the anchor, the two records, a reserved block, then
// the data slots (journal mode).
const (
	journalRecords = blockSize
	journalData    = 4 * blockSize
)

// MismatchError: the interrupted run was started with other parameters.
type MismatchError struct{ What string }

func (e *MismatchError) Error() string {
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

// EncryptPlain encrypts the target in place as cryptsetup plain mode
// with the parameters p: the result is byte for byte what
// volume.EncryptPlain writes for the target's old content (p.Offset × 512
// zero bytes, then the ciphertext; an image grows by that much, a block
// device needs that much room at its end, given as room: the data is the
// device but its last room bytes). An interrupted run, found by its
// journal, is resumed.
func EncryptPlain(ctx context.Context, t Target, j Journal, p volume.Plain, room int64, key []byte, opts Options) (*Result, error) {
	return runPlain(ctx, t, j, p, room, key, Encrypt, opts)
}

// DecryptPlain decrypts the target in place: the result is what
// volume.DecryptPlain writes (the plaintext of the data after the offset,
// at the start; an image shrinks by the offset, a block device keeps its
// size and its last p.Offset × 512 bytes are zeroed).
func DecryptPlain(ctx context.Context, t Target, j Journal, p volume.Plain, key []byte, opts Options) (*Result, error) {
	return runPlain(ctx, t, j, p, 0, key, Decrypt, opts)
}

func runPlain(ctx context.Context, t Target, j Journal, p volume.Plain, room int64, key []byte, dir Direction, opts Options) (*Result, error) {
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
	switch {
	case err == nil:
		defer jf.Close()
		if err := resumePlain(e, jf, p, dir); err != nil {
			return nil, err
		}
		res.Resumed, res.ResumedAt = true, e.done()
	case errors.Is(err, fs.ErrNotExist):
		if jf, err = startPlain(e, j, p, room, dir); err != nil {
			return nil, err
		}
		defer jf.Close()
	default:
		return nil, err
	}
	res.Length = e.a.Length
	e.progress = opts.progress("converting", e.a.Length)
	if err := e.run(ctx); err != nil {
		return res, err
	}
	// Finish: what lies outside the data. Each step may be repeated.
	a := e.a
	switch {
	case dir == Encrypt && a.Dest > 0:
		if err := zero(t, 0, a.Dest); err != nil {
			return res, err
		}
	case dir == Decrypt && a.Source > 0 && t.Resizable():
		if err := t.Truncate(a.FinalSize); err != nil {
			return res, &WriteError{err}
		}
	case dir == Decrypt && a.Source > 0:
		if err := zero(t, a.Length, a.Source); err != nil {
			return res, err
		}
	}
	if err := syncDev(t); err != nil {
		return res, err
	}
	if err := j.Remove(); err != nil {
		return res, &WriteError{err}
	}
	return res, nil
}

// startPlain begins a new run: the journal, durably, then (an image that
// grows) the new size.
func startPlain(e *engine, j Journal, p volume.Plain, room int64, dir Direction) (JournalFile, error) {
	size, err := e.t.Size()
	if err != nil {
		return nil, &ReadError{err}
	}
	off, ss := p.OffsetBytes(), int64(p.Sector.Size)
	a := &anchor{Kind: KindPlain, Direction: dir, SectorSize: uint32(ss), IVMode: uint32(p.Sector.IVMode),
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
	})
	var we *WriteError
	if err != nil && !errors.As(err, &we) {
		err = &WriteError{err}
	}
	if err != nil {
		return nil, err
	}
	e.rdev = jf
	if a.FinalSize > size {
		if err := e.t.Truncate(a.FinalSize); err != nil {
			jf.Close()
			return nil, &WriteError{err}
		}
		if err := syncDev(e.t); err != nil {
			jf.Close()
			return nil, err
		}
	}
	return jf, nil
}

// resumePlain loads an interrupted run from its journal and checks that it
// is this run (kind, direction, parameters, key) on this target.
func resumePlain(e *engine, jf JournalFile, p volume.Plain, dir Direction) error {
	b := make([]byte, anchorSize)
	if err := readAt(jf, b, 0); err != nil {
		return fmt.Errorf("cannot read the journal: %w", err)
	}
	a, asum, err := parseAnchor(b)
	if err != nil {
		if errors.Is(err, errNoAnchor) {
			return errors.New("the journal is not an xtsctl in-place journal")
		}
		return err
	}
	if a.Kind != KindPlain || a.Direction != dir {
		return &DirectionError{Kind: a.Kind, Direction: a.Direction}
	}
	if a.Records != journalRecords || a.DataSlots != journalData {
		return errors.New("the journal's anchor is invalid")
	}
	want := fmt.Sprintf("--sector-size %d", a.SectorSize)
	if a.IVMode == uint32(sector.Plain64LargeSectors) {
		want += " --iv-large-sectors"
	}
	want += fmt.Sprintf(" --skip %d --offset %d", a.IVOffset, a.Offset)
	if uint32(p.Sector.Size) != a.SectorSize || uint32(p.Sector.IVMode) != a.IVMode || p.Sector.IVOffset != a.IVOffset || p.Offset != a.Offset {
		return &MismatchError{What: "used " + want}
	}
	e.a, e.asum, e.g, e.rdev = a, asum, geometryOf(a), jf
	if err := e.loadRecords(); err != nil {
		return err
	}
	// The target's size: what the run made it, or, before the run grew it
	// (its first step after the journal), what it was.
	size, err := e.t.Size()
	if err != nil {
		return &ReadError{err}
	}
	switch {
	case size == a.FinalSize:
	case size == a.OrigSize && e.t.Resizable() && a.FinalSize > a.OrigSize && e.rec.Next == 0 && !e.rec.HasData:
		if err := e.t.Truncate(a.FinalSize); err != nil {
			return &WriteError{err}
		}
	case size == a.OrigSize && e.t.Resizable() && a.FinalSize < a.OrigSize:
		// A decryption shrinks the image only at its very end.
	default:
		return fmt.Errorf("%w: it is %d bytes, the run left %d", ErrNotThisTarget, size, a.FinalSize)
	}
	return e.checkSample()
}
