package volume

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"hash"
	"io"
	"runtime"
	"strings"
	"unicode/utf8"

	"github.com/xtsctl/xtsctl/blake2b"
	"github.com/xtsctl/xtsctl/internal/stream"
	"github.com/xtsctl/xtsctl/sector"
)

// CreateOptions describe a new volume.
type CreateOptions struct {
	SectorSize int    // 512..4096; 0 means 4096
	KeySize    int    // master key bytes: 32 (XTS-AES-128) or 64 (XTS-AES-256); 0 means 64
	TagSize    int    // 16 or 32 for integrity tags, 0 for none
	Label      string // at most MaxLabel bytes
	RegionSize int64  // data bytes per dirty-region bit; 0 means DefaultRegion
	KDF        KDFParams
	Passphrase []byte // unlocks key slot 0
	// NoDigest leaves out the end-to-end digest (encrypt --digest none):
	// the one sequential pass over the plaintext, whose speed bounds
	// Create's. The tags, if any, still cover every sector.
	NoDigest bool
}

// Create writes a new volume to dev holding the size bytes of plaintext
// that r holds from offset 0 (zeros make an empty volume), and returns its
// header and the end-to-end digest of the plaintext (its BLAKE2b-512, as
// Digest computes it), which the header records (unless opts.NoDigest:
// then no digest, and the header's FlagDigest is clear). dev must read as zeros
// where nothing was written (a new file). The caller syncs dev. progress,
// if not nil, receives the bytes done, 0 first once the key slot's
// derivation is over and the data starts.
func Create(ctx context.Context, dev Device, r io.ReaderAt, size int64, opts CreateOptions, progress func(int64)) (*Header, [blake2b.Size]byte, error) {
	var digest [blake2b.Size]byte
	if opts.SectorSize == 0 {
		opts.SectorSize = 4096
	}
	if opts.KeySize == 0 {
		opts.KeySize = 64
	}
	if opts.KeySize != 32 && opts.KeySize != 64 {
		return nil, digest, fmt.Errorf("unsupported key size %d bytes (want 32 or 64)", opts.KeySize)
	}
	if len(opts.Label) > MaxLabel {
		return nil, digest, fmt.Errorf("label is %d bytes, longer than %d", len(opts.Label), MaxLabel)
	}
	if !utf8.ValidString(opts.Label) || strings.IndexByte(opts.Label, 0) >= 0 {
		return nil, digest, errors.New("label must be UTF-8 without NUL bytes")
	}
	if len(opts.Passphrase) == 0 {
		return nil, digest, errors.New("empty passphrase")
	}
	if opts.RegionSize == 0 {
		opts.RegionSize = DefaultRegion
	}
	l, err := computeLayout(size, opts.SectorSize, opts.TagSize, opts.RegionSize)
	if err != nil {
		return nil, digest, err
	}
	h := &Header{Version: Version, Label: opts.Label, KeySize: opts.KeySize, Layout: l}
	if _, err := rand.Read(h.UUID[:]); err != nil {
		return nil, digest, err
	}
	h.UUID[6] = h.UUID[6]&0x0f | 0x40 // RFC 9562 version 4 (random)
	h.UUID[8] = h.UUID[8]&0x3f | 0x80 // RFC 9562 variant
	key, err := newMasterKey(opts.KeySize)
	if err != nil {
		return nil, digest, err
	}
	defer clear(key)
	if h.Slots[0], err = newSlot(opts.Passphrase, key, h.UUID, 0, opts.KDF); err != nil {
		return nil, digest, err
	}
	e, err := newEngine(key, h)
	if err != nil {
		return nil, digest, err
	}
	defer e.wipe()
	if progress != nil {
		progress(0) // the key slot's derivation is done: the data starts
	}

	// Write in order of offsets where possible: on tmpfs, filling a hole
	// costs several times an append. Tags of a volume up to 2 GiB (with the
	// default sizes) wait in memory and follow the data; above that, the
	// whole volume is preallocated and tags are written as they come.
	var allTags []byte
	if l.TagLength <= maxBufferedTags {
		allTags = make([]byte, l.TagLength)
	} else if !preallocate(dev, l.Size) {
		if _, err := dev.WriteAt(make([]byte, CopyRegion), l.SecondaryOffset); err != nil {
			return nil, digest, &WriteError{Err: err}
		}
	}
	var sum hash.Hash
	var ordered func([]byte)
	if !opts.NoDigest {
		sum, _ = blake2b.New512(nil)
		ordered = func(buf []byte) { sum.Write(buf) }
	}
	scratch := e.scratch()
	err = stream.Run(ctx, size, e.workers, stream.Stages{
		Load: func(_ int, buf []byte, off int64) (int, error) {
			return len(buf), readFull(r, buf, off, size)
		},
		Ordered: ordered,
		Work: func(w int, buf []byte, off int64) error {
			e.encrypt(scratch[w], buf, uint64(off/int64(l.SectorSize)))
			return nil
		},
		Commit: func(w int, buf []byte, off int64) error {
			s := scratch[w]
			e.fit(&s, len(buf))
			if _, err := dev.WriteAt(buf, l.DataOffset+off); err != nil {
				return &WriteError{Err: err}
			}
			if tags := s.tags; len(tags) > 0 {
				pos := l.TagPosition(uint64(off / int64(l.SectorSize)))
				if allTags != nil {
					copy(allTags[pos-l.TagOffset:], tags)
				} else if _, err := dev.WriteAt(tags, pos); err != nil {
					return &WriteError{Err: err}
				}
			}
			if progress != nil {
				progress(off + int64(len(buf)))
			}
			return nil
		},
	})
	if err != nil {
		return nil, digest, err
	}
	if allTags != nil {
		if _, err := dev.WriteAt(allTags, l.TagOffset); err != nil {
			return nil, digest, &WriteError{Err: err}
		}
	}
	// The secondary copy's region ends the volume; writeHeader fills its
	// first CopySize bytes.
	if _, err := dev.WriteAt(make([]byte, CopyRegion), l.SecondaryOffset); err != nil {
		return nil, digest, &WriteError{Err: err}
	}
	if sum != nil {
		copy(digest[:], sum.Sum(nil))
		if err := h.sealDigest(key, &digest); err != nil {
			return nil, digest, err
		}
	}
	if h.MAC, err = h.computeMAC(key); err != nil {
		return nil, digest, err
	}
	keys := newStateKeys(key)
	defer keys.wipe()
	st := State{Valid: true, bitmapMAC: keys.bitmapMAC(make([]byte, l.bitmapLength()))}
	if err := writeDetachedRecord(dev, marshalState(st, h.Version, h.UUID, keys), st.Sequence); err != nil {
		return nil, digest, err
	}
	if err := writeHeader(dev, &Headers{Header: h}, h); err != nil {
		return nil, digest, err
	}
	return h, digest, nil
}

// maxBufferedTags bounds the tags Create keeps in memory until the data is
// written, so that encrypt's memory stays in the tens of MiB whatever the
// image size (16 MiB of tags: a 2 GiB volume with 4 KiB sectors and
// 32-byte tags).
const maxBufferedTags = 16 << 20

// newMasterKey returns a random XTS key with distinct halves
// (xts.NewCipher refuses equal ones with xts.ErrEqualKeyHalves; from
// crypto/rand they come once in 2^128 draws).
func newMasterKey(size int) ([]byte, error) {
	key := make([]byte, size)
	for {
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
		if !bytes.Equal(key[:size/2], key[size/2:]) {
			return key, nil
		}
	}
}

// engine is the per-volume crypto of the streaming operations: XTS and the
// tags. stream.Run runs it on every core, one chunk per worker at a time.
type engine struct {
	l       Layout
	codec   *sector.Codec // single-threaded: the workers are the parallelism
	tagKey  []byte        // nil without integrity
	workers int
}

// chunkScratch is the space for one chunk's tags, one per stream.Run buffer.
type chunkScratch struct {
	tags, stored []byte // computed and stored tags (nil without integrity)
	bad          []BadSector
}

func newEngine(key []byte, h *Header) (*engine, error) {
	codec, err := sector.NewCodecKey(key, h.sectorParams())
	if err != nil {
		return nil, err
	}
	codec.SetWorkers(1)
	e := &engine{l: h.Layout, codec: codec, workers: runtime.GOMAXPROCS(0)}
	if h.Integrity != IntegrityNone {
		e.tagKey = deriveKey(key, purposeTags, blake2b.Size)
	}
	return e, nil
}

func (e *engine) wipe() {
	e.codec.Wipe()
	clear(e.tagKey)
}

// scratch allocates the scratch space of every stream.Run buffer.
func (e *engine) scratch() []chunkScratch {
	s := make([]chunkScratch, stream.Slots(e.workers))
	for i := range s {
		if e.tagKey != nil {
			n := stream.ChunkSize / e.l.SectorSize * e.l.TagSize
			s[i].tags, s[i].stored = make([]byte, n), make([]byte, n)
		}
	}
	return s
}

// fit slices a worker's scratch to a chunk of n bytes.
func (e *engine) fit(s *chunkScratch, n int) {
	if s.tags != nil {
		k := n / e.l.SectorSize * e.l.TagSize
		s.tags, s.stored = s.tags[:k], s.stored[:k]
	}
}

// encrypt encrypts a plaintext chunk in place and computes its tags, into s.
func (e *engine) encrypt(s chunkScratch, buf []byte, first uint64) {
	e.fit(&s, len(buf))
	e.codec.Encrypt(buf, buf, first)
	if s.tags != nil {
		blake2b.SumSectors(s.tags, e.l.TagSize, e.tagKey, first, buf, e.l.SectorSize)
	}
}

// readFull reads len(buf) bytes at off of an input of size bytes, naming
// an input that ended early.
func readFull(r io.ReaderAt, buf []byte, off, size int64) error {
	n, err := r.ReadAt(buf, off)
	if n == len(buf) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		return &ReadError{Err: fmt.Errorf("input ended after %d bytes, expected %d (did it shrink while being read?)", off+int64(n), size)}
	}
	return &ReadError{Err: fmt.Errorf("cannot read input: %w", err)}
}

// DigestCheck says what became of the end-to-end digest.
type DigestCheck struct {
	Computed [blake2b.Size]byte // end-to-end digest of the plaintext read (if Done)
	Done     bool               // the plaintext was read and hashed
	Recorded bool               // the header holds a digest
	Stale    bool               // the data was written since: not compared
	Match    bool               // compared, and equal
}

// DigestMismatchError: the plaintext does not hash to the recorded digest.
type DigestMismatchError struct{ Recorded, Computed [blake2b.Size]byte }

func (e *DigestMismatchError) Error() string {
	return fmt.Sprintf("end-to-end digest mismatch: the header records %x..., the data hashes to %x...", e.Recorded[:8], e.Computed[:8])
}

// digestState returns the recorded digest and whether it still applies.
func (v *Volume) digestState() (recorded [blake2b.Size]byte, ok, stale bool, err error) {
	recorded, ok, err = v.h.openDigest(v.key)
	st := v.State()
	return recorded, ok, st.DigestStale || !st.Valid, err
}

// Decrypt writes the plaintext of the data area to w, checking every tag
// (the first chunk with a bad sector stops it with an *IntegrityError, so w
// never receives unverified plaintext) and, if digest, the end-to-end
// digest at the end (*DigestMismatchError, after all the data went to w:
// the caller discards its output then). Without digest the plaintext is
// not hashed at all (decrypt --digest none).
func (v *Volume) Decrypt(ctx context.Context, w io.Writer, digest bool, progress func(int64)) (DigestCheck, error) {
	return v.scan(ctx, w, true, digest, progress, nil)
}

// VerifyResult is what Verify found in the data area.
type VerifyResult struct {
	BadSectors int64
	Digest     DigestCheck
}

// Verify checks every tag of the data area, calling bad for each sector
// that fails (in order), and the end-to-end digest when it still applies
// (it decrypts only then). Bad sectors are not an error: the result counts
// them; on a volume not closed cleanly, those in the regions being written
// then have DirtyRegion set. A digest mismatch is a *DigestMismatchError.
func (v *Volume) Verify(ctx context.Context, progress func(int64), bad func(BadSector)) (VerifyResult, error) {
	var res VerifyResult
	var dirty func(sector uint64) bool
	if st := v.State(); !st.Valid || st.Dirty {
		regions, all, err := v.RecoveryRegions()
		if err != nil {
			return res, err
		}
		set := make(map[int64]bool, len(regions))
		for _, r := range regions {
			set[r] = true
		}
		dirty = func(n uint64) bool { return all || set[v.RegionOf(n)] }
	}
	count := func(b BadSector) {
		b.DirtyRegion = dirty != nil && dirty(b.Sector)
		res.BadSectors++
		if bad != nil {
			bad(b)
		}
	}
	d, err := v.scan(ctx, io.Discard, false, true, progress, count)
	res.Digest = d
	return res, err
}

// scan streams the data area through the tag check, decryption when
// needed, and the digest (if digest). With onBad nil, a bad sector stops
// the scan.
func (v *Volume) scan(ctx context.Context, w io.Writer, output, digest bool, progress func(int64), onBad func(BadSector)) (DigestCheck, error) {
	var dc DigestCheck
	recorded, ok, stale, err := v.digestState()
	if err != nil {
		return dc, err
	}
	dc.Recorded, dc.Stale = ok, ok && stale
	hashIt := digest && (output || ok && !stale)
	decrypt := output || hashIt
	if !decrypt && v.l.Integrity == IntegrityNone {
		return dc, nil // nothing to check
	}
	e, err := newEngine(v.key, v.h)
	if err != nil {
		return dc, err
	}
	defer e.wipe()
	var sum hash.Hash
	var ordered func([]byte)
	if hashIt {
		sum, _ = blake2b.New512(nil)
		ordered = func(buf []byte) { sum.Write(buf) }
	}
	l := v.l
	scratch := e.scratch()
	var done int64
	err = stream.Run(ctx, l.DataLength, e.workers, stream.Stages{
		Load: func(w int, buf []byte, off int64) (int, error) {
			s := &scratch[w]
			if err := readFull(v.dev, buf, l.DataOffset+off, l.DataOffset+l.DataLength); err != nil {
				return 0, err
			}
			first := uint64(off / int64(l.SectorSize))
			t := *s
			e.fit(&t, len(buf))
			if t.tags != nil {
				if _, err := v.dev.ReadAt(t.stored, l.TagPosition(first)); err != nil {
					return 0, &ReadError{Err: fmt.Errorf("cannot read tags: %w", err)}
				}
				blake2b.SumSectors(t.tags, l.TagSize, e.tagKey, first, buf, l.SectorSize)
				s.bad = v.compareTags(t.stored, t.tags, first)
			}
			if decrypt {
				e.codec.Decrypt(buf, buf, first)
			}
			return len(buf), nil
		},
		Ordered: ordered,
		Commit: func(wk int, buf []byte, off int64) error {
			s := &scratch[wk]
			if len(s.bad) > 0 && onBad == nil {
				clear(buf)
				return &IntegrityError{Sectors: s.bad}
			}
			for _, b := range s.bad {
				onBad(b)
			}
			if output {
				if _, err := w.Write(buf); err != nil {
					return &WriteError{Err: err}
				}
			}
			done += int64(len(buf))
			if progress != nil {
				progress(done)
			}
			return nil
		},
	})
	if err != nil {
		return dc, err
	}
	if sum != nil {
		copy(dc.Computed[:], sum.Sum(nil))
		dc.Done = true
	}
	if ok && !stale && dc.Done {
		if dc.Computed != recorded {
			return dc, &DigestMismatchError{Recorded: recorded, Computed: dc.Computed}
		}
		dc.Match = true
	}
	return dc, nil
}
