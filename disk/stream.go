package disk

import (
	"context"
	"fmt"
	"io"
	"runtime"

	"github.com/xtsctl/xtsctl/internal/stream"
)

// A Decrypter is a Header that writes an unlocked image's plaintext
// itself, checking what the format can check on the way (our volume's
// tags and end-to-end digest); the rest are decrypted by Decrypt.
type Decrypter interface {
	Decrypt(ctx context.Context, u *Unlocked, w io.Writer, opt DecryptOptions) (*DecryptResult, error)
}

// DecryptOptions say how a whole image is decrypted.
type DecryptOptions struct {
	// Digest computes and checks the end-to-end digest where the format
	// records one.
	Digest bool
	// Progress, if set, is told the plaintext bytes written so far.
	Progress func(int64)
	// Total, if set, is told the plaintext's size before anything is
	// written (a stream's is found as it is read).
	Total func(int64)
}

// DecryptResult says what a decryption wrote and checked.
type DecryptResult struct {
	Bytes int64
	// Digest is the plaintext's end-to-end digest, when computed.
	Digest []byte
	// Checked says, for people, what was verified on the way ("every
	// sector tag and the end-to-end digest verified"); "" for nothing.
	Checked string
}

// Decrypt writes the plaintext of u, read from r (the image), to w: in
// chunks read and decrypted on every core and written in order
// (internal/stream). It is the decryption of every format that has no
// Decrypter.
func Decrypt(ctx context.Context, r io.ReaderAt, u *Unlocked, w io.Writer, opt DecryptOptions) (*DecryptResult, error) {
	l := u.Layout
	if u.Unservable != "" {
		return nil, WithKind(KindInput, fmt.Errorf("%s: %w", u.Unservable, ErrUnsupported))
	}
	if l.Integrity != "" {
		return nil, fmt.Errorf("a %s image with %s integrity needs its format to decrypt it", u.Format, l.Integrity)
	}
	codecs := make([]Codec, len(l.Extents))
	defer func() {
		for _, c := range codecs {
			if c != nil {
				c.Wipe()
			}
		}
	}()
	for i, e := range l.Extents {
		if e.Kind != Crypt {
			continue
		}
		c, err := NewCodec(l.Cipher, u.Key, e.Sector)
		if err != nil {
			return nil, err
		}
		c.SetWorkers(1) // the stream's workers are the parallelism
		codecs[i] = c
	}
	if opt.Total != nil {
		opt.Total(l.Size)
	}
	ss := int64(l.SectorSize)
	res := &DecryptResult{}
	err := stream.Run(ctx, l.Size, runtime.GOMAXPROCS(0), stream.Stages{
		Load: func(_ int, buf []byte, pos int64) (int, error) {
			for done := 0; done < len(buf); {
				at := pos + int64(done)
				i := l.extentAt(at)
				e := l.Extents[i]
				in := at - e.Offset
				part := buf[done : done+int(min(int64(len(buf)-done), e.Length-in))]
				switch e.Kind {
				case Zero:
					clear(part)
				default:
					if _, err := r.ReadAt(part, e.Source+in); err != nil {
						return 0, fmt.Errorf("read the image at byte %d: %w", e.Source+in, err)
					}
					if e.Kind == Crypt {
						codecs[i].Decrypt(part, part, uint64(in/ss))
					}
				}
				done += len(part)
			}
			return len(buf), nil
		},
		Commit: func(_ int, buf []byte, _ int64) error {
			n, err := w.Write(buf)
			res.Bytes += int64(n)
			if opt.Progress != nil {
				opt.Progress(res.Bytes)
			}
			return err
		},
	})
	return res, err
}

// extentAt is the index of the extent holding byte off of the device.
func (l *Layout) extentAt(off int64) int {
	lo, hi := 0, len(l.Extents)
	for lo < hi {
		m := (lo + hi) / 2
		if e := l.Extents[m]; e.Offset+e.Length <= off {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// A Verifier is a Header whose format can check its data (our volume:
// header copies, every sector's tag, the end-to-end digest).
type Verifier interface {
	Verify(ctx context.Context, u *Unlocked, opt VerifyOptions) error
}

// VerifyOptions say where the findings of a Verify go.
type VerifyOptions struct {
	// Finding receives each finding, one line for people (the command's
	// result).
	Finding func(format string, args ...any)
	// Warn receives warnings, one line each without a prefix.
	Warn func(format string, args ...any)
	// Total and Progress follow the data checked, as for DecryptOptions.
	Total    func(int64)
	Progress func(int64)
}
