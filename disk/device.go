package disk

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"sync"
	"unsafe"

	"github.com/xtsctl/xtsctl/internal/words"
)

// A Device is an unlocked image's plaintext, in whole sectors: what a
// serving backend exports and what decrypt reads.
type Device interface {
	SectorSize() int
	Sectors() uint64
	// ReadSectors fills buf (whole sectors) with the plaintext of the
	// sectors from first. A format with integrity fails for a sector that
	// does not verify, and buf then holds no plaintext of it.
	ReadSectors(buf []byte, first uint64) error
	// WriteSectors encrypts buf (whole sectors) and writes it from sector
	// first, leaving buf unchanged.
	WriteSectors(buf []byte, first uint64) error
	// Sync makes every completed write durable.
	Sync() error
	// Close syncs, records a clean close where the format keeps state, and
	// releases the image (and wipes the keys).
	Close() error
}

// A Backing is what a Device reads its image through: an *os.File, or a
// wrapper that reads some of it with O_DIRECT.
type Backing interface {
	io.ReaderAt
	io.WriterAt
	Sync() error
	Close() error
}

// AttachOptions say how an unlocked image is served.
type AttachOptions struct {
	ReadOnly bool
	// Recover (formats that check integrity after a crash) accepts what
	// torn sectors hold instead of only reporting them.
	Recover bool
	// Workers is how many cores one request may use (0: all).
	Workers int
	// Warn receives warnings for the user, one line each; nil drops them.
	Warn func(format string, args ...any)
}

// An Attacher is a Format that serves its images itself, because it
// keeps state while they are open (our volume: tags, dirty regions). The
// rest are served by NewDevice.
type Attacher interface {
	Attach(b Backing, u *Unlocked, opt AttachOptions) (Device, error)
}

// Attach serves u from b: through the format's Attacher if it has one,
// else as NewDevice does. It takes ownership of b.
func Attach(b Backing, u *Unlocked, opt AttachOptions) (Device, error) {
	if f, ok := Lookup(u.Format); ok {
		if a, ok := f.(Attacher); ok {
			return a.Attach(b, u, opt)
		}
	}
	if u.Layout.Integrity != "" {
		b.Close()
		return nil, fmt.Errorf("a %s image with %s integrity needs its format to serve it", u.Format, u.Layout.Integrity)
	}
	d, err := NewDevice(b, u.Layout, u.Key, opt)
	if err != nil {
		b.Close()
		return nil, err
	}
	return d, nil
}

// ExtentDevice serves a Layout without integrity: each sector is read
// from its extent and decrypted, or reads as zeros.
type ExtentDevice struct {
	b        Backing
	l        Layout
	codecs   []Codec // by extent; nil for Zero and Clear
	readOnly string  // why writes are refused, "" if they are not
	scratch  sync.Pool
}

// NewDevice serves l (checked against b's size first) with key. The
// caller keeps key; Close wipes the device's own key schedules and
// closes b.
func NewDevice(b Backing, l Layout, key []byte, opt AttachOptions) (*ExtentDevice, error) {
	size, err := backingSize(b)
	if err != nil {
		return nil, err
	}
	if err := l.Check(size); err != nil {
		return nil, WithKind(KindInput, err)
	}
	d := &ExtentDevice{b: b, l: l, codecs: make([]Codec, len(l.Extents)), readOnly: l.ReadOnly}
	if opt.ReadOnly && d.readOnly == "" {
		d.readOnly = "the device is read-only"
	}
	for i, e := range l.Extents {
		if e.Kind != Crypt {
			continue
		}
		c, err := NewCodec(l.Cipher, key, e.Sector)
		if err != nil {
			d.wipe()
			return nil, err
		}
		if opt.Workers > 0 {
			c.SetWorkers(opt.Workers)
		}
		d.codecs[i] = c
	}
	d.scratch.New = func() any { b := AlignedBuffer(scratchSize); return &b }
	return d, nil
}

// scratchSize is the ciphertext buffer kept for reuse: the largest FUSE
// request and then some.
const scratchSize = 1<<20 + 8192

// backingSize finds b's size: block devices report 0 in Stat, so seek.
func backingSize(b Backing) (int64, error) {
	if s, ok := b.(io.Seeker); ok {
		n, err := s.Seek(0, io.SeekEnd)
		if err != nil {
			return 0, fmt.Errorf("cannot size image: %w", err)
		}
		return n, nil
	}
	if f, ok := b.(interface{ Stat() (os.FileInfo, error) }); ok {
		fi, err := f.Stat()
		if err != nil {
			return 0, err
		}
		return fi.Size(), nil
	}
	return 0, errors.New("cannot size image: it can neither seek nor stat")
}

func (d *ExtentDevice) SectorSize() int { return d.l.SectorSize }
func (d *ExtentDevice) Sectors() uint64 { return d.l.Sectors() }

// Layout returns what d serves.
func (d *ExtentDevice) Layout() Layout { return d.l }

func (d *ExtentDevice) getScratch(n int) (buf []byte, put func()) {
	bp := d.scratch.Get().(*[]byte)
	if n > len(*bp) {
		d.scratch.Put(bp)
		return AlignedBuffer(n), func() {}
	}
	return (*bp)[:n], func() { d.scratch.Put(bp) }
}

// span is the part of a request in one extent.
type span struct {
	ext    int
	bufOff int   // into the request's buffer
	n      int   // bytes
	extOff int64 // into the extent
}

// spans cuts n bytes from sector first into the extents they fall in.
func (d *ExtentDevice) spans(first uint64, n int) ([]span, error) {
	ss := int64(d.l.SectorSize)
	if n%int(ss) != 0 {
		return nil, fmt.Errorf("a request of %d bytes is not whole %d-byte sectors", n, ss)
	}
	if first > d.l.Sectors() || uint64(n)/uint64(ss) > d.l.Sectors()-first {
		return nil, fmt.Errorf("sectors %d+%d are past the end of the %d-sector device", first, n/int(ss), d.l.Sectors())
	}
	off := int64(first) * ss
	i := sort.Search(len(d.l.Extents), func(i int) bool {
		e := d.l.Extents[i]
		return e.Offset+e.Length > off
	})
	var out []span
	for done := 0; done < n; i++ {
		e := d.l.Extents[i]
		in := off + int64(done) - e.Offset
		m := int(min(int64(n-done), e.Length-in))
		out = append(out, span{ext: i, bufOff: done, n: m, extOff: in})
		done += m
	}
	return out, nil
}

// ReadSectors reads and decrypts whole sectors.
func (d *ExtentDevice) ReadSectors(buf []byte, first uint64) error {
	spans, err := d.spans(first, len(buf))
	if err != nil {
		return err
	}
	ss := int64(d.l.SectorSize)
	for _, s := range spans {
		e := d.l.Extents[s.ext]
		out := buf[s.bufOff : s.bufOff+s.n]
		switch e.Kind {
		case Zero:
			clear(out)
		case Clear:
			if _, err := d.b.ReadAt(out, e.Source+s.extOff); err != nil {
				return d.ioError("read", first, len(buf), err)
			}
		case Crypt:
			ct, put := d.getScratch(s.n)
			if _, err := d.b.ReadAt(ct, e.Source+s.extOff); err != nil {
				put()
				return d.ioError("read", first, len(buf), err)
			}
			d.codecs[s.ext].Decrypt(out, ct, uint64(s.extOff/ss))
			put()
		}
	}
	return nil
}

// WriteSectors encrypts and writes whole sectors; buf is left as it was.
func (d *ExtentDevice) WriteSectors(buf []byte, first uint64) error {
	if d.readOnly != "" {
		return fmt.Errorf("cannot write: %s", d.readOnly)
	}
	spans, err := d.spans(first, len(buf))
	if err != nil {
		return err
	}
	ss := int64(d.l.SectorSize)
	for _, s := range spans {
		e := d.l.Extents[s.ext]
		in := buf[s.bufOff : s.bufOff+s.n]
		switch e.Kind {
		case Zero:
			return fmt.Errorf("cannot write sectors %d-%d: they hold the format's metadata", first, first+uint64(len(buf))/uint64(ss)-1)
		case Clear:
			if _, err := d.b.WriteAt(in, e.Source+s.extOff); err != nil {
				return d.ioError("write", first, len(buf), err)
			}
		case Crypt:
			ct, put := d.getScratch(s.n)
			d.codecs[s.ext].Encrypt(ct, in, uint64(s.extOff/ss))
			_, err := d.b.WriteAt(ct, e.Source+s.extOff)
			put()
			if err != nil {
				return d.ioError("write", first, len(buf), err)
			}
		}
	}
	return nil
}

func (d *ExtentDevice) ioError(op string, first uint64, n int, err error) error {
	return fmt.Errorf("%s sectors %d-%d: %w", op, first, first+uint64(n/d.l.SectorSize)-1, err)
}

// Sync makes the image's writes durable.
func (d *ExtentDevice) Sync() error {
	if d.readOnly != "" {
		return nil
	}
	return d.b.Sync()
}

// Close syncs, wipes the key schedules and closes the image.
func (d *ExtentDevice) Close() error {
	err := d.Sync()
	d.wipe()
	if cerr := d.b.Close(); err == nil {
		err = cerr
	}
	return err
}

func (d *ExtentDevice) wipe() {
	for _, c := range d.codecs {
		if c != nil {
			c.Wipe()
		}
	}
}

// AlignedBuffer returns n bytes aligned to 4096, as O_DIRECT needs.
func AlignedBuffer(n int) []byte {
	const align = 4096
	b := make([]byte, n+align)
	off := 0
	if r := int(uintptr(unsafe.Pointer(unsafe.SliceData(b))) & (align - 1)); r != 0 {
		off = align - r
	}
	return b[off : off+n : off+n]
}

// Recovery reports what serving found after an unclean shutdown of an
// image whose format keeps track of its writes (our volume): for the
// record (status) and for the user.
type Recovery struct {
	DirtyRegions uint64   `json:"dirty_regions"`         // regions checked
	Sectors      uint64   `json:"sectors"`               // sectors checked
	AllRegions   bool     `json:"all_regions,omitempty"` // the record of dirty regions could not be trusted: every region was checked
	Mismatched   uint64   `json:"mismatched"`            // sectors whose tags did not match
	BadSectors   []uint64 `json:"bad_sectors,omitempty"` // the first of them
	Repaired     bool     `json:"repaired,omitempty"`    // Recover re-tagged them
	Untagged     bool     `json:"untagged,omitempty"`    // the image has no tags: nothing to check
}

// An AttachReport says what attaching did to the image before serving it.
type AttachReport struct {
	Recovered *Recovery `json:"recovered,omitempty"`
	// Upgraded names what the image was upgraded to ("" if it was not):
	// "volume format version 2".
	Upgraded string `json:"upgraded,omitempty"`
	// Warnings for the user, one line each.
	Warnings []string `json:"warnings,omitempty"`
}

// A Reporter is a Device that did something to its image when it was
// attached.
type Reporter interface {
	AttachReport() *AttachReport
}

// An FDBacking is a Backing whose reads a server may issue itself (FUSE
// over io_uring): DataFD reads whole, aligned sectors (with O_DIRECT where
// the image allows it), MetaFD anything else (tags, headers).
type FDBacking interface {
	Backing
	DataFD() int
	MetaFD() int
}

// ReadPlan says where the ciphertext of n sectors from first lives, for
// a server that reads it itself: fd and off, or fd -1 when the request
// spans extents or is not all ciphertext (the server then calls
// ReadSectors). There are no tags (tagFd -1).
func (d *ExtentDevice) ReadPlan(first uint64, n int) (fd int, off int64, tagFd int, tagOff int64, tagLen int) {
	fb, ok := d.b.(FDBacking)
	if !ok {
		return -1, 0, -1, 0, 0
	}
	spans, err := d.spans(first, n*d.l.SectorSize)
	if err != nil || len(spans) != 1 || d.l.Extents[spans[0].ext].Kind != Crypt {
		return -1, 0, -1, 0, 0
	}
	e := d.l.Extents[spans[0].ext]
	return fb.DataFD(), e.Source + spans[0].extOff, -1, 0, 0
}

// FinishRead decrypts in place the ciphertext that a ReadPlan said where
// to read.
func (d *ExtentDevice) FinishRead(buf, tags []byte, first uint64) error {
	spans, err := d.spans(first, len(buf))
	if err != nil || len(spans) != 1 || d.l.Extents[spans[0].ext].Kind != Crypt {
		return fmt.Errorf("sectors %d+%d were not planned as one read of ciphertext", first, len(buf)/d.l.SectorSize)
	}
	d.codecs[spans[0].ext].Decrypt(buf, buf, uint64(spans[0].extOff/int64(d.l.SectorSize)))
	return nil
}

// A KernelHandover is a Format whose images keep state that a writer
// must follow (our volume records being written, and a clean close), for
// when the kernel's dm-crypt, which knows nothing of it, serves one
// read-write: Begin settles and records the image as being written
// before the kernel's device appears, End records the clean close once
// the kernel has let go. The token Begin returns goes to End.
type KernelHandover interface {
	BeginKernelWrites(b Backing, u *Unlocked) (report *AttachReport, token []byte, err error)
	EndKernelWrites(b Backing, token []byte) error
}

// Warning is what open says of r, the recovery of image after an unclean
// shutdown, with hints where sectors read as I/O errors.
func (r *Recovery) Warning(image string) (warning string, hints []string) {
	if r.Untagged {
		return fmt.Sprintf("%s was not closed cleanly: recovered (no integrity tags, so nothing to check)", image), nil
	}
	checked := words.Plural(int64(r.DirtyRegions), "dirty region")
	if r.AllRegions {
		checked = "every region (the record of which regions were being written could not be trusted)"
	}
	if r.Mismatched == 0 {
		return fmt.Sprintf("%s was not closed cleanly: checked %s, %d sectors: every tag matches", image, checked, r.Sectors), nil
	}
	list := words.List(r.BadSectors)
	if uint64(len(r.BadSectors)) < r.Mismatched {
		list += fmt.Sprintf(" and %d more", r.Mismatched-uint64(len(r.BadSectors)))
	}
	if r.Repaired {
		return fmt.Sprintf("%s was not closed cleanly: checked %s; re-tagged %s whose tags did not match, accepting what they hold (--recover): %s",
			image, checked, words.Plural(int64(r.Mismatched), "sector"), list), nil
	}
	return fmt.Sprintf("%s was not closed cleanly: checked %s; %s do not match their tags and read as I/O errors: %s",
			image, checked, words.Plural(int64(r.Mismatched), "sector"), list),
		[]string{"a crash of xtsctl's server leaves in this state at most the sectors it was writing at that moment; a sector it was not writing was changed outside xtsctl",
			"to accept what these sectors hold now, close the volume and open it again with --recover (or rewrite them)"}
}
