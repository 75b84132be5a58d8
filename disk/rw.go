package disk

import (
	"errors"
	"io"
)

// ReaderAt reads a Device's plaintext at any byte offset: whole sectors
// are read straight into p, the partial ones at either end through a
// sector of its own.
type ReaderAt struct{ d Device }

// NewReaderAt returns d's plaintext as an io.ReaderAt.
func NewReaderAt(d Device) *ReaderAt { return &ReaderAt{d: d} }

// Size is the device's size in bytes.
func (r *ReaderAt) Size() int64 { return int64(r.d.Sectors()) * int64(r.d.SectorSize()) }

// ReadAt reads len(p) bytes at off; it returns io.EOF at the end.
func (r *ReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("disk: negative offset")
	}
	size := r.Size()
	if off >= size {
		return 0, io.EOF
	}
	want := len(p)
	if int64(want) > size-off {
		p = p[:size-off]
	}
	n, err := sectorIO(r.d, p, off, false)
	if err == nil && n < want {
		err = io.EOF
	}
	return n, err
}

// WriterAt writes a Device's plaintext at any byte offset within its
// size; partial sectors are read, changed and written back.
type WriterAt struct{ d Device }

// NewWriterAt returns d's plaintext as an io.WriterAt.
func NewWriterAt(d Device) *WriterAt { return &WriterAt{d: d} }

// WriteAt writes p at off; writing past the device's end is an error.
func (w *WriterAt) WriteAt(p []byte, off int64) (int, error) {
	size := int64(w.d.Sectors()) * int64(w.d.SectorSize())
	if off < 0 || off > size || int64(len(p)) > size-off {
		return 0, errors.New("disk: write outside the device")
	}
	return sectorIO(w.d, p, off, true)
}

// sectorIO moves p at byte off of d, which holds it all.
func sectorIO(d Device, p []byte, off int64, write bool) (int, error) {
	ss := int64(d.SectorSize())
	done := 0
	for done < len(p) {
		pos := off + int64(done)
		sec := uint64(pos / ss)
		in := int(pos % ss)
		left := len(p) - done
		if in == 0 && left >= int(ss) {
			// Whole sectors, straight to or from p (at most 1 MiB a call,
			// so that a device's buffers stay bounded).
			n := min(left-left%int(ss), 1<<20)
			var err error
			if write {
				err = d.WriteSectors(p[done:done+n], sec)
			} else {
				err = d.ReadSectors(p[done:done+n], sec)
			}
			if err != nil {
				return done, err
			}
			done += n
			continue
		}
		one := make([]byte, ss)
		if err := d.ReadSectors(one, sec); err != nil {
			return done, err
		}
		n := min(int(ss)-in, left)
		if write {
			copy(one[in:], p[done:done+n])
			if err := d.WriteSectors(one, sec); err != nil {
				clear(one)
				return done, err
			}
		} else {
			copy(p[done:done+n], one[in:])
		}
		clear(one)
		done += n
	}
	return done, nil
}
