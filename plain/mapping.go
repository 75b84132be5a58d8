package plain

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"

	"github.com/xtsctl/xtsctl/internal/dmtable"
	"github.com/xtsctl/xtsctl/internal/stream"
	"github.com/xtsctl/xtsctl/sector"
)

// Mapping describes a cryptsetup plain-mode aes-xts-plain64 mapping.
type Mapping struct {
	Sector sector.Params // sector size, IV mode, iv_offset (cryptsetup --skip)
	// Offset is cryptsetup's --offset: the number of 512-byte units of the
	// device before the encrypted data. It does not change the tweaks.
	Offset uint64
}

// maxOffset bounds Offset so that byte offsets fit an int64 with room to spare.
const maxOffset = 1 << 50

// OffsetBytes is the byte position of the encrypted data in the device.
func (p Mapping) OffsetBytes() int64 { return int64(p.Offset) * 512 }

// Check validates p.
func (p Mapping) Check() error {
	if err := p.Sector.Check(); err != nil {
		return err
	}
	if p.Offset > maxOffset {
		return fmt.Errorf("offset %d is too large", p.Offset)
	}
	return nil
}

// ErrInputSize is wrapped by the errors of CheckPlaintext and DataSize: an
// input whose size does not fit a plain image.
var ErrInputSize = errors.New("input size does not fit the sectors")

type inputSizeError struct{ msg string }

func (e *inputSizeError) Error() string        { return e.msg }
func (e *inputSizeError) Is(target error) bool { return target == ErrInputSize }

// CheckPlaintext checks that size bytes of plaintext (below zero: a
// stream, checked as it is read) fill whole sectors; name is the input's
// in messages.
func (p Mapping) CheckPlaintext(name string, size int64) error {
	if size > 0 && size%int64(p.Sector.Size) != 0 {
		return &inputSizeError{fmt.Sprintf("input %s is %d bytes, not a whole number of %d-byte sectors", name, size, p.Sector.Size)}
	}
	return nil
}

// DataSize returns the bytes of ciphertext that follow the offset in an
// image of imageSize bytes: a whole number of sectors, at least one. A
// stream (imageSize below zero) gives -1: read it to its end.
func (p Mapping) DataSize(name string, imageSize int64) (int64, error) {
	size := imageSize - p.OffsetBytes()
	switch {
	case imageSize < 0:
		return -1, nil
	case size <= 0:
		return 0, &inputSizeError{fmt.Sprintf("input %s is %d bytes: nothing after the offset of %d bytes", name, imageSize, p.OffsetBytes())}
	case size%int64(p.Sector.Size) != 0:
		return 0, &inputSizeError{fmt.Sprintf("input %s holds %d bytes after the offset, not a whole number of %d-byte sectors", name, size, p.Sector.Size)}
	}
	return size, nil
}

// SkipOffset moves r, at the start of an image, to its encrypted data (for
// Decrypt): it seeks where it can, and reads past the offset where
// not (a stream). Seeking past the end is no error: DataSize checks a
// file's size first; a stream that ends within the offset is one.
func (p Mapping) SkipOffset(r io.Reader) error {
	n := p.OffsetBytes()
	if s, ok := r.(io.Seeker); ok {
		if _, err := s.Seek(n, io.SeekStart); err == nil {
			return nil
		}
	}
	got, err := io.CopyN(io.Discard, r, n)
	if err == io.EOF {
		err = fmt.Errorf("the input ended after %d bytes, within the offset of %d", got, n)
	}
	return err
}

// Encrypt writes to w what a plain-mode device holds after size bytes of
// plaintext from r were written through the mapping: Offset*512 zero bytes
// (the area before the mapping, never written by dm-crypt), then the
// ciphertext of every sector. Reading, encrypting (on every core) and
// writing overlap. A size below zero reads r to its end (a pipe), which
// must then hold whole sectors. progress, if not nil, receives the bytes
// written. It returns the number of plaintext bytes encrypted.
func Encrypt(ctx context.Context, w io.Writer, r io.Reader, size int64, p Mapping, codec *sector.Codec, progress func(int64)) (int64, error) {
	if err := writeZeros(w, p.OffsetBytes()); err != nil {
		return 0, &stream.WriteError{Err: err}
	}
	return streamPlain(ctx, w, r, size, p, codec.Encrypt, progress)
}

// Decrypt reads the size bytes of ciphertext that follow the offset
// (r must already be positioned there; a size below zero reads to the
// end) and writes the plaintext to w. It returns the number of bytes.
func Decrypt(ctx context.Context, w io.Writer, r io.Reader, size int64, p Mapping, codec *sector.Codec, progress func(int64)) (int64, error) {
	return streamPlain(ctx, w, r, size, p, codec.Decrypt, progress)
}

// streamPlain runs the bytes from r through fn (the codec's Encrypt or
// Decrypt, in place) to w, with stream.Run: reads and writes in order, the
// chunks in between on every core.
func streamPlain(ctx context.Context, w io.Writer, r io.Reader, size int64, p Mapping, fn func(dst, src []byte, first uint64), progress func(int64)) (int64, error) {
	ss := int64(p.Sector.Size)
	if size >= 0 && size%ss != 0 {
		return 0, fmt.Errorf("volume: %d bytes are not a whole number of %d-byte sectors", size, ss)
	}
	if size == 0 {
		return 0, nil
	}
	return stream.RunCounted(ctx, size, runtime.GOMAXPROCS(0), stream.Stages{
		LoadInOrder: true,
		Load: func(_ int, buf []byte, off int64) (int, error) {
			got, err := io.ReadFull(r, buf)
			switch {
			case size < 0 && (err == nil || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)):
				if int64(got)%ss != 0 {
					return got, &stream.ReadError{Err: fmt.Errorf("input is %d bytes, not a whole number of %d-byte sectors", off+int64(got), ss)}
				}
				return got, nil
			case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
				return got, &stream.ReadError{Err: fmt.Errorf("input ended after %d bytes, expected %d (did it shrink while being read?)", off+int64(got), size)}
			case err != nil:
				return got, &stream.ReadError{Err: fmt.Errorf("cannot read input: %w", err)}
			}
			return got, nil
		},
		Work: func(_ int, buf []byte, off int64) error {
			fn(buf, buf, uint64(off/ss))
			return nil
		},
		Commit: func(_ int, buf []byte, off int64) error {
			if _, err := w.Write(buf); err != nil {
				return &stream.WriteError{Err: err}
			}
			if progress != nil {
				progress(off + int64(len(buf)))
			}
			return nil
		},
	})
}

func writeZeros(w io.Writer, n int64) error {
	zeros := make([]byte, min(n, 1<<20))
	for n > 0 {
		k := min(n, int64(len(zeros)))
		if _, err := w.Write(zeros[:k]); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// CryptTable returns the dm-crypt mapping of a plain image of size bytes:
// everything after the offset, which must be a whole, non-zero number of
// sectors (as the FUSE backend requires too), with cryptsetup's --skip,
// --sector-size and --iv-large-sectors in dm-crypt's units.
func (p Mapping) CryptTable(size int64) (dmtable.CryptTable, error) {
	if err := p.Check(); err != nil {
		return dmtable.CryptTable{}, err
	}
	data, ss := size-p.OffsetBytes(), int64(p.Sector.Size)
	switch {
	case data <= 0:
		return dmtable.CryptTable{}, fmt.Errorf("image is %d bytes: nothing after the offset of %d bytes", size, p.OffsetBytes())
	case data%ss != 0:
		return dmtable.CryptTable{}, fmt.Errorf("image holds %d bytes after the offset, not a whole number of %d-byte sectors", data, ss)
	}
	return dmtable.CryptTable{
		Cipher:         dmtable.DefaultCipher,
		Length:         uint64(data / 512),
		IVOffset:       p.Sector.IVOffset,
		Offset:         p.Offset,
		SectorSize:     p.Sector.Size,
		IVLargeSectors: p.Sector.IVMode == sector.Plain64LargeSectors,
	}, nil
}
