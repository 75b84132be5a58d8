package luks

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"

	"github.com/xtsctl/xtsctl/internal/dmtable"
	"github.com/xtsctl/xtsctl/internal/stream"
	"github.com/xtsctl/xtsctl/sector"
)

// DataRange returns where the data segment lies on a data device of
// dataSize bytes (the image itself, or the data device of a detached
// header): its byte offset and length. A "dynamic" segment runs to the end
// of the device, rounded down to whole sectors (cryptsetup 2.6.1 does not
// round: the kernel then refuses its table, so such an image does not open
// there at all); a fixed one must fit. Its
// IVs must also fit the cipher: aes-xts-plain counts 32-bit sectors, and
// is accepted only where that is the same as aes-xts-plain64. A data
// device that does not hold the segment is a *DataDeviceError (wrong
// input: a header file given as the image is the usual case).
func (h *Header) DataRange(dataSize int64) (offset, length int64, err error) {
	if err := h.Supported(); err != nil {
		return 0, 0, err
	}
	s := h.Segment
	derr := &DataDeviceError{DeviceSize: dataSize, Offset: s.Offset, Size: s.Size, Dynamic: s.Dynamic, SectorSize: s.SectorSize,
		HeaderOnly: dataSize >= 0 && uint64(dataSize) <= h.HeaderSize}
	if dataSize < 0 || s.Offset > uint64(dataSize) {
		return 0, 0, derr
	}
	avail := uint64(dataSize) - s.Offset
	n := s.Size
	if s.Dynamic {
		n = avail - avail%uint64(s.SectorSize)
	} else if n > avail {
		return 0, 0, derr
	}
	if n == 0 {
		derr.Empty = true
		return 0, 0, derr
	}
	if s.Cipher == "aes-xts-plain" && n/512 > 1<<32 {
		return 0, 0, unsupported(FeatureIVRange, fmt.Sprintf("(IVs up to %d)", n/512),
			"aes-xts-plain wraps its 32-bit IV after 2 TiB; aes-xts-plain64 is supported at any size")
	}
	return int64(s.Offset), int64(n), nil
}

// SectorParams returns how the data segment's sectors map to XTS tweaks
// as cryptsetup 2.6.1 sets dm-crypt up: plain64 counting 512-byte units
// from the segment start, whatever the sector size (never
// iv_large_sectors), with IV offset 0. The LUKS2 iv_tweak field is not
// added: cryptsetup's crypt_get_iv_offset returns 0 for LUKS2 and only
// reencryption uses the field; a header with iv_tweak 2048 is mapped with
// offset 0 by the kernel too (docs/LUKS.md).
func (h *Header) SectorParams() sector.Params {
	return sector.Params{Size: h.Segment.SectorSize, IVMode: sector.Plain64, IVOffset: 0}
}

// NewCodec returns a sector codec for the data segment with the volume
// key, whose Wipe the caller calls. Sector 0 is the segment's first
// sector.
func (h *Header) NewCodec(key []byte) (*sector.Codec, error) {
	if err := h.Supported(); err != nil {
		return nil, err
	}
	if err := h.checkKeyLen(key); err != nil {
		return nil, err
	}
	return sector.NewCodecKey(key, h.SectorParams())
}

// dmFlags maps LUKS2 persistent flags (config.flags) to the dm-crypt
// options cryptsetup loads for them (get_dm_crypt_params in
// lib/libdevmapper.c). cryptsetup 2.6.1 does not know "high-priority"
// (2.7 added it) and ignores it, as it ignores any flag it does not know.
var dmFlags = []struct {
	luks string
	set  func(*dmtable.CryptTable)
}{
	{"allow-discards", func(t *dmtable.CryptTable) { t.AllowDiscards = true }},
	{"same-cpu-crypt", func(t *dmtable.CryptTable) { t.SameCPUCrypt = true }},
	{"submit-from-crypt-cpus", func(t *dmtable.CryptTable) { t.SubmitFromCryptCPUs = true }},
	{"no-read-workqueue", func(t *dmtable.CryptTable) { t.NoReadWorkqueue = true }},
	{"no-write-workqueue", func(t *dmtable.CryptTable) { t.NoWriteWorkqueue = true }},
	{"high-priority", func(t *dmtable.CryptTable) { t.HighPriority = true }},
}

// DMTable returns the dm-crypt mapping cryptsetup loads for this volume on
// a data device of dataSize bytes, without its key and device (the caller
// fills them in; dmtable.CryptTable writes the line):
//
//	0 <sectors> crypt <cipher> <key> 0 <device> <offset sectors> [<n> <options>]
//
// The options are the persistent flags of a LUKS2 header and sector_size:N
// above 512; the IV offset is 0 and IVs count 512-byte units
// (SectorParams). cryptsetup passes a LUKS2 key through the kernel keyring,
// so its table shows ":64:logon:cryptsetup:<uuid>-d0" where this one has
// the hex key; with --disable-keyring the lines are equal.
func (h *Header) DMTable(dataSize int64) (dmtable.CryptTable, error) {
	off, n, err := h.DataRange(dataSize)
	if err != nil {
		return dmtable.CryptTable{}, err
	}
	t := dmtable.CryptTable{
		Cipher:     h.Segment.Cipher,
		Offset:     uint64(off / 512),
		Length:     uint64(n / 512),
		SectorSize: h.Segment.SectorSize,
	}
	for _, f := range dmFlags {
		if slices.Contains(h.Flags, f.luks) {
			f.set(&t)
		}
	}
	return t, nil
}

// Decrypt writes the plaintext of the whole data segment to w. data holds
// the data device (the image, or the data device of a detached header) of
// dataSize bytes. It runs on internal/stream: chunks are read and decrypted
// on every core and written in order. progress, if not nil, is called with
// the bytes written so far after each write.
func (h *Header) Decrypt(ctx context.Context, key []byte, data io.ReaderAt, dataSize int64, w io.Writer, progress func(int64)) (int64, error) {
	off, n, err := h.DataRange(dataSize)
	if err != nil {
		return 0, err
	}
	codec, err := h.NewCodec(key)
	if err != nil {
		return 0, err
	}
	defer codec.Wipe()
	codec.SetWorkers(1) // the stream's workers are the parallelism
	ss := int64(h.Segment.SectorSize)
	var written int64
	err = stream.Run(ctx, n, runtime.GOMAXPROCS(0), stream.Stages{
		Load: func(_ int, buf []byte, pos int64) (int, error) {
			if err := readFull(data, buf, off+pos); err != nil {
				return 0, err
			}
			codec.Decrypt(buf, buf, uint64(pos/ss))
			return len(buf), nil
		},
		Commit: func(_ int, buf []byte, _ int64) error {
			m, err := w.Write(buf)
			written += int64(m)
			if progress != nil {
				progress(written)
			}
			return err
		},
	})
	return written, err
}

// Encrypt encrypts the plaintext read from r into the data segment of a
// data device of dataSize bytes, written through w, from the segment's
// first sector on. A last partial sector is padded with zeros. It fails,
// having written what fit, if r holds more than the segment. It returns the
// number of plaintext bytes read. r is read in order, the chunks encrypted
// on every core (internal/stream). progress, if not nil, is called with the
// bytes of the segment written so far (a padded sector counts whole) after
// each write.
func (h *Header) Encrypt(ctx context.Context, key []byte, r io.Reader, w io.WriterAt, dataSize int64, progress func(int64)) (int64, error) {
	off, n, err := h.DataRange(dataSize)
	if err != nil {
		return 0, err
	}
	codec, err := h.NewCodec(key)
	if err != nil {
		return 0, err
	}
	defer codec.Wipe()
	codec.SetWorkers(1)
	ss := int64(h.Segment.SectorSize)
	// The input's length is not known: the loads read it in order and say
	// where it ends; a chunk's buffer is whole sectors, so the padding of a
	// last partial sector fits in it.
	return stream.RunCounted(ctx, -1, runtime.GOMAXPROCS(0), stream.Stages{
		LoadInOrder: true,
		Load: func(_ int, buf []byte, pos int64) (int, error) {
			want := min(int64(len(buf)), n-pos)
			m, err := io.ReadFull(r, buf[:max(want, 0)])
			clear(buf[m:roundUp(m, ss)])
			switch {
			case err == io.EOF || err == io.ErrUnexpectedEOF:
				return m, nil // the input ends here
			case err != nil:
				return m, err
			}
			if pos+int64(m) == n { // the segment is full: the input must end too
				var one [1]byte
				switch _, err := io.ReadFull(r, one[:]); {
				case err == nil:
					return m, fmt.Errorf("plaintext is longer than the %d-byte data segment", n)
				case !errors.Is(err, io.EOF):
					return m, err
				}
				if m == len(buf) {
					return m, io.EOF // ends exactly at a chunk's end
				}
			}
			return m, nil
		},
		// Work and Commit see the chunk's m bytes; they take the buffer on
		// to the end of the last sector (its capacity is the whole chunk),
		// which Load zeroed.
		Work: func(_ int, buf []byte, pos int64) error {
			buf = buf[:roundUp(len(buf), ss)]
			codec.Encrypt(buf, buf, uint64(pos/ss))
			return nil
		},
		Commit: func(_ int, buf []byte, pos int64) error {
			m := roundUp(len(buf), ss)
			_, err := w.WriteAt(buf[:m], off+pos)
			if err == nil && progress != nil {
				progress(pos + int64(m))
			}
			return err
		},
	})
}

// Create makes a new LUKS2 image on f, of size bytes (the file already
// that long): a header with one keyslot for passphrase (Format with opt),
// then the plaintext read from r encrypted into the data segment (Encrypt);
// a nil r fills the segment with encrypted zeros, as a newly formatted
// image. progress, if not nil, sees the bytes of the data segment written
// so far: 0 once the header is written and encryption starts (the
// keyslot's KDF comes before), then after each write, up to the segment's
// length (DataRange) when r fills it. The volume key is wiped before Create
// returns.
func Create(ctx context.Context, f ReadWriterAt, size int64, passphrase []byte, opt FormatOptions, r io.Reader, progress func(int64)) (*Header, error) {
	h, key, err := Format(f, size, passphrase, opt)
	if err != nil {
		return nil, err
	}
	defer clear(key)
	if r == nil {
		_, n, err := h.DataRange(size)
		if err != nil {
			return nil, err
		}
		r = io.LimitReader(zeros{}, n)
	}
	if progress != nil {
		progress(0)
	}
	if _, err := h.Encrypt(ctx, key, r, f, size, progress); err != nil {
		return nil, err
	}
	return h, nil
}

// zeros reads zeros.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// roundUp is n rounded up to whole sectors of ss bytes.
func roundUp(n int, ss int64) int { return int((int64(n) + ss - 1) / ss * ss) }
