package inplace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/xtsctl/xtsctl/plain"
	"github.com/xtsctl/xtsctl/volume"
)

// A command prepares a run before it asks for a key, so that what can be
// refused without one is refused first, and so that it knows which key to
// ask for (a new volume's passphrase, or the interrupted run's):
// PrepareVolume and PreparePlain look at what the target holds and make
// the checks that need no key; the Plan they return then runs with the key.

// Plan is an in-place run prepared on a target, before any key is given.
type Plan struct {
	// Status describes the interrupted run found on the target (nil:
	// none).
	Status *Status
	// Resume: the run continues the interrupted one, with its key.
	// Otherwise it starts: a new run, or again after one that stopped
	// before it converted anything (Status set, not Started), or, plain,
	// where a run of the other direction was interrupted (Status set),
	// which it then refuses with a DirectionError.
	Resume bool

	t       Target
	size    int64
	room    int64
	dir     Direction
	journal Journal
	plain   plain.Mapping
}

// Why a run cannot start; nothing was changed.
var (
	// ErrRoomOnImage: room to leave at the end was given for an image,
	// which grows by what the run needs instead.
	ErrRoomOnImage = errors.New("the room to leave at the end applies to block devices: an image grows")
	// ErrJournalIsTarget: the journal named is the target itself.
	ErrJournalIsTarget = errors.New("the journal cannot be the target itself")
	// ErrJournalRequired: a plain run of a block device has no place
	// for its journal beside it: it must be named, on another device.
	ErrJournalRequired = errors.New("a plain in-place run of a block device needs a journal file on another device")
	// ErrJournalInTarget: a journal was named for a volume's run, which
	// keeps its journal at the end of the target.
	ErrJournalInTarget = errors.New("a volume being converted in place keeps its journal in it")
)

// MaxJournalSize is the most a plain run's journal file takes: its
// anchor and records, and two zones of data in journal mode.
const MaxJournalSize = journalData + 2*defaultJournalZone

// SectorsError: the data to convert is not a whole number of sectors.
type SectorsError struct {
	Kind       Kind
	Length     int64 // bytes of data
	SectorSize int
}

func (e *SectorsError) Error() string {
	return fmt.Sprintf("the data is %d bytes, not a whole number of %d-byte sectors", e.Length, e.SectorSize)
}

// NoDataError: nothing is left to convert after the offset, or before the
// room left at the end.
type NoDataError struct{ Size, Offset int64 }

func (e *NoDataError) Error() string {
	return fmt.Sprintf("nothing to convert: the target is %d bytes, its data would start at byte %d", e.Size, e.Offset)
}

// LayoutError: the volume format cannot hold the data as asked (its size,
// sector size or tags).
type LayoutError struct{ Err error }

func (e *LayoutError) Error() string { return e.Err.Error() }
func (e *LayoutError) Unwrap() error { return e.Err }

// JournalError: the journal of a plain run exists but does not describe
// one.
type JournalError struct {
	Journal string // its name
	Err     error
}

func (e *JournalError) Error() string { return "its journal " + e.Journal + ": " + e.Err.Error() }
func (e *JournalError) Unwrap() error { return e.Err }

// PrepareVolume prepares an in-place run of dir of a volume on the
// target: an encryption into a new volume, with room bytes at the end of a
// block device that hold no data (cryptsetup's --reduce-device-size), or
// a decryption (room 0). It refuses a target holding an interrupted run of
// the other direction, and, for a decryption that does not resume, a
// target that is not a volume or whose header is damaged.
func PrepareVolume(t Target, dir Direction, room int64) (*Plan, error) {
	size, err := t.Size()
	if err != nil {
		return nil, &ReadError{Err: err}
	}
	if t.Resizable() && room != 0 {
		return nil, ErrRoomOnImage
	}
	st, err := Probe(t, size)
	if err != nil {
		return nil, err
	}
	if st != nil && st.Direction != dir {
		return nil, &DirectionError{Kind: st.Kind, Direction: st.Direction}
	}
	if dir == Decrypt && st == nil {
		if _, err := volume.ReadHeaders(t, size); err != nil {
			return nil, err
		}
	}
	return &Plan{Status: st, Resume: st != nil && st.Started, t: t, size: size, room: room, dir: dir}, nil
}

// CheckVolume makes the checks of a new encryption into a volume made with
// create that need no passphrase (the data a whole number of sectors, the
// format's limits, the room at the end of a block device, not a volume
// already) and returns the length of the data it converts.
func (p *Plan) CheckVolume(create volume.CreateOptions) (int64, error) {
	length := p.size - p.room
	if p.Status != nil {
		length = p.Status.Length // starting again: the first start's length
	}
	ss := sectorSizeOf(create)
	if length%int64(ss) != 0 {
		return 0, &SectorsError{Kind: KindVolume, Length: length, SectorSize: ss}
	}
	l, err := volume.NewLayout(length, ss, create.TagSize)
	if err != nil {
		return 0, &LayoutError{err}
	}
	if !p.t.Resizable() && l.Size > p.size {
		return 0, &NeedRoomError{What: "an xtsctl volume", Need: l.Size - length, Have: p.size - length}
	}
	if p.Status == nil {
		if _, err := volume.ReadHeaders(p.t, p.size); !errors.Is(err, volume.ErrNotVolume) {
			return 0, ErrAlreadyVolume
		}
	}
	return length, nil
}

// EncryptVolume starts the encryption into a volume made with create
// (EncryptVolume).
func (p *Plan) EncryptVolume(ctx context.Context, create volume.CreateOptions, opts Options) (*VolumeResult, error) {
	return EncryptVolume(ctx, p.t, create, p.room, opts)
}

// ResumeVolume resumes the interrupted run; unlock opens the volume's
// header (ResumeVolume).
func (p *Plan) ResumeVolume(ctx context.Context, unlock func(*volume.Headers) ([]byte, int, error), opts Options) (*VolumeResult, error) {
	return ResumeVolume(ctx, p.t, unlock, opts)
}

// DecryptVolume starts or resumes the decryption; unlock opens the
// volume's header (DecryptVolume).
func (p *Plan) DecryptVolume(ctx context.Context, unlock func(*volume.Headers) ([]byte, int, error), opts Options) (*VolumeResult, error) {
	return DecryptVolume(ctx, p.t, unlock, opts)
}

// PreparePlain prepares an in-place run of dir of the plain image on the
// target, with p's parameters, its journal j, and (an encryption of a
// block device) room bytes at its end that hold no data. An interrupted
// run is found by its journal, which must describe one; a run its journal
// says finished is not resumed (the same direction then converts nothing,
// the other starts anew); a new run's data must be whole sectors.
func PreparePlain(t Target, j Journal, p plain.Mapping, dir Direction, room int64) (*Plan, error) {
	if t.Resizable() && room != 0 {
		return nil, ErrRoomOnImage
	}
	plan := &Plan{t: t, room: room, dir: dir, journal: j, plain: p}
	jf, err := j.Open()
	switch {
	case err == nil:
		plan.Status, err = ProbeJournal(jf)
		jf.Close()
		if err != nil {
			return nil, &JournalError{Journal: j.Name(), Err: err}
		}
		st := plan.Status
		plan.Resume = st.Direction == dir && !st.Finished
		if (st.Direction == dir || st.Finished) && !st.sameParams(p) {
			return nil, &MismatchError{What: "used " + st.params(), Finished: st.Finished}
		}
		if !st.Finished || st.Direction == dir {
			return plan, nil
		}
	case errors.Is(err, fs.ErrNotExist):
	default:
		return nil, err
	}
	if plan.size, err = t.Size(); err != nil {
		return nil, &ReadError{Err: err}
	}
	if _, err := plainLength(plan.size, room, p, dir); err != nil {
		return nil, err
	}
	return plan, nil
}

// RunPlain runs the plain conversion with key (EncryptPlain or
// DecryptPlain).
func (p *Plan) RunPlain(ctx context.Context, key []byte, opts Options) (*Result, error) {
	if p.dir == Decrypt {
		return DecryptPlain(ctx, p.t, p.journal, p.plain, key, opts)
	}
	return EncryptPlain(ctx, p.t, p.journal, p.plain, p.room, key, opts)
}

// plainLength is the length of the data of a new plain run on a target of
// size bytes: all but the room at its end (an encryption), all after the
// offset (a decryption).
func plainLength(size, room int64, p plain.Mapping, dir Direction) (int64, error) {
	off, ss := p.OffsetBytes(), int64(p.Sector.Size)
	n := size - room
	if dir == Decrypt {
		n = size - off
	}
	switch {
	case n <= 0:
		return 0, &NoDataError{Size: size, Offset: off}
	case n%ss != 0:
		return 0, &SectorsError{Kind: KindPlain, Length: n, SectorSize: int(ss)}
	}
	return n, nil
}

// JournalFor is the journal of a plain run of t: the file at path, which
// must not be t itself, or, with path "", the default beside an image
// file (DefaultJournal). A block device has no default: its journal must
// survive what the device might not, so it goes on another device.
func JournalFor(t *FileTarget, path string) (FileJournal, error) {
	if path != "" {
		if fi, err := os.Stat(path); err == nil {
			if tfi, err := t.Stat(); err == nil && os.SameFile(fi, tfi) {
				return FileJournal{}, ErrJournalIsTarget
			}
		}
		return FileJournal{Path: path}, nil
	}
	if !t.Resizable() {
		return FileJournal{}, ErrJournalRequired
	}
	return FileJournal{Path: DefaultJournal(t.Path)}, nil
}

// Name is the journal's path, for messages.
func (j FileJournal) Name() string { return j.Path }

// Found is an interrupted run as FindRun finds it.
type Found struct {
	*Status
	// Journal is a plain run's journal file ("" for a volume's run).
	Journal string
	// Headers is a volume's header, where it can be read (nil
	// otherwise), and State what its state area says.
	Headers *volume.Headers
	State   volume.State
}

// FindRun describes, without a key, the interrupted run of the image or
// block device r of size bytes, named name: a volume's, whose anchor is
// at its end, or a plain run's, found by its journal (the file journal,
// or with journal "" the default beside an image file, which regular
// says name is). It returns nil if there is none and no journal was
// named. Its errors name the file they are about.
func FindRun(r io.ReaderAt, size int64, name, journal string, regular bool) (*Found, error) {
	st, err := Probe(r, size)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if st != nil {
		if journal != "" {
			return nil, ErrJournalInTarget
		}
		f := &Found{Status: st, Headers: findHeader(r, size, nil)}
		if f.Headers != nil {
			f.State, _ = volume.ReadState(r, f.Headers.Header)
		}
		return f, nil
	}
	named := journal != ""
	if !named && regular {
		journal = DefaultJournal(name)
	}
	if journal == "" {
		return nil, nil
	}
	jf, err := os.Open(journal)
	if errors.Is(err, fs.ErrNotExist) && !named {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cannot read the journal: %w", err)
	}
	defer jf.Close()
	if st, err = ProbeJournal(jf); err != nil {
		return nil, fmt.Errorf("%s: %w", journal, err)
	}
	return &Found{Status: st, Journal: journal}, nil
}

// sectorSizeOf is a new volume's sector size (4096 unless create says).
func sectorSizeOf(create volume.CreateOptions) int {
	if create.SectorSize == 0 {
		return 4096
	}
	return create.SectorSize
}

// UnfinishedError: a plain image has the journal of an in-place run beside
// it that has not finished: part of it is converted, part not, and only
// that run can finish it.
type UnfinishedError struct {
	*Found
	Err error // the journal could not be read as one (Status is nil)
}

func (e *UnfinishedError) Error() string {
	if e.Status == nil {
		return fmt.Sprintf("the in-place journal %s beside it cannot be read (%v): an in-place run of it may have been interrupted, and its data be part plaintext, part ciphertext", e.Journal, e.Err)
	}
	return fmt.Sprintf("an in-place %s of it was interrupted (%s done; its journal %s): its data is part plaintext, part ciphertext until that run is finished", e.Direction, e.Percent(), e.Journal)
}

func (e *UnfinishedError) Unwrap() error { return e.Err }

// CheckPlainImage refuses a plain image file that an in-place run was
// interrupted in the middle of: one with its journal beside it
// (DefaultJournal) that does not say the run finished (or that is not a
// journal at all). A plain image carries no marker of its own; reading
// or writing it as a whole (open, decrypt) would serve or write data half
// of which is the wrong way round.
func CheckPlainImage(image string) error {
	journal := DefaultJournal(image)
	jf, err := os.Open(journal)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return &UnfinishedError{Found: &Found{Journal: journal}, Err: err}
	}
	defer jf.Close()
	st, err := ProbeJournal(jf)
	switch {
	case err != nil:
		return &UnfinishedError{Found: &Found{Journal: journal}, Err: err}
	case st.Finished:
		return nil
	}
	return &UnfinishedError{Found: &Found{Status: st, Journal: journal}}
}
