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
	"sync"

	"github.com/xtsctl/xtsctl/blake2b"
	"github.com/xtsctl/xtsctl/sector"
	"github.com/xtsctl/xtsctl/xts"
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
}

// Create writes a new volume to dev holding the size bytes of plaintext
// that r yields (a stream of zeros makes an empty volume), and returns its
// header and the BLAKE2b-512 digest of the plaintext, which the header
// records. dev must read as zeros where nothing was written (a new file).
// The caller syncs dev. progress, if not nil, receives the bytes done.
func Create(ctx context.Context, dev Device, r io.Reader, size int64, opts CreateOptions, progress func(int64)) (*Header, [blake2b.Size]byte, error) {
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
	h := &Header{Label: opts.Label, KeySize: opts.KeySize, Layout: l}
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

	// Give the device its full size first, so a short device fails now.
	if _, err := dev.WriteAt(make([]byte, CopyRegion), l.SecondaryOffset); err != nil {
		return nil, digest, fmt.Errorf("cannot write output: %w", err)
	}
	sum, _ := blake2b.New512(nil)
	err = StreamStages(ctx, io.NewOffsetWriter(dev, l.DataOffset), r, size, l.SectorSize, Stages{
		Read: func(buf []byte) error { sum.Write(buf); return nil },
		Transform: func(buf []byte, first uint64) error {
			tags := e.encryptAndTag(buf, first)
			if tags == nil {
				return nil
			}
			if _, err := dev.WriteAt(tags, l.TagPosition(first)); err != nil {
				return fmt.Errorf("cannot write output: %w", err)
			}
			return nil
		},
	}, progress)
	if err != nil {
		return nil, digest, err
	}
	copy(digest[:], sum.Sum(nil))
	if err := h.sealDigest(key, &digest); err != nil {
		return nil, digest, err
	}
	if h.MAC, err = h.computeMAC(key); err != nil {
		return nil, digest, err
	}
	if err := writeState(dev, State{Valid: true}, h.UUID); err != nil {
		return nil, digest, err
	}
	if err := WriteHeader(dev, &Headers{Header: h}, h); err != nil {
		return nil, digest, err
	}
	return h, digest, nil
}

// newMasterKey returns a random XTS key with distinct halves (the xts
// package refuses equal halves).
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

// engine is the per-volume crypto: XTS for the data, the tag key.
type engine struct {
	l       Layout
	cipher  *xts.Cipher
	codec   *sector.Codec // single-threaded: engine splits work itself
	tagKey  []byte
	workers int
	tags    []byte // scratch for one chunk's tags
}

func newEngine(key []byte, h *Header) (*engine, error) {
	c, err := xts.NewCipher(key)
	if err != nil {
		return nil, err
	}
	codec, err := sector.NewCodec(c, h.SectorParams())
	if err != nil {
		c.Wipe()
		return nil, err
	}
	codec.SetWorkers(1)
	e := &engine{l: h.Layout, cipher: c, codec: codec, workers: runtime.GOMAXPROCS(0)}
	if h.Integrity != IntegrityNone {
		e.tagKey = deriveKey(key, purposeTags, blake2b.Size)
	}
	return e, nil
}

func (e *engine) wipe() {
	e.cipher.Wipe()
	clear(e.tagKey)
}

// pieceSize is the unit of work of one core: big enough to amortise a
// goroutine, small enough that a piece is still in cache when it is tagged
// right after being encrypted.
const pieceSize = 256 << 10

// parallel runs f over buf in pieces on every core; f gets the piece and
// the number of its first sector.
func (e *engine) parallel(buf []byte, first uint64, f func(piece []byte, first uint64, pieceIndex int)) {
	ss := e.l.SectorSize
	per := pieceSize / ss
	pieces := (len(buf)/ss + per - 1) / per
	if pieces <= 1 || e.workers <= 1 {
		for p := range pieces {
			lo, hi := p*per*ss, min((p+1)*per*ss, len(buf))
			f(buf[lo:hi], first+uint64(p*per), p)
		}
		return
	}
	var wg sync.WaitGroup
	next := make(chan int, pieces)
	for p := range pieces {
		next <- p
	}
	close(next)
	for range min(e.workers, pieces) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range next {
				lo, hi := p*per*ss, min((p+1)*per*ss, len(buf))
				f(buf[lo:hi], first+uint64(p*per), p)
			}
		}()
	}
	wg.Wait()
}

// chunkTags returns scratch space for the tags of buf.
func (e *engine) chunkTags(buf []byte) []byte {
	n := len(buf) / e.l.SectorSize * e.l.TagSize
	if cap(e.tags) < n {
		e.tags = make([]byte, n)
	}
	return e.tags[:n]
}

// encryptAndTag encrypts buf in place and returns the tags of its sectors
// (nil without integrity); the slice is reused by the next call.
func (e *engine) encryptAndTag(buf []byte, first uint64) []byte {
	if e.tagKey == nil {
		e.parallel(buf, first, func(p []byte, n uint64, _ int) { e.codec.Encrypt(p, p, n) })
		return nil
	}
	tags := e.chunkTags(buf)
	ts, per := e.l.TagSize, pieceSize/e.l.SectorSize
	e.parallel(buf, first, func(p []byte, n uint64, i int) {
		e.codec.Encrypt(p, p, n)
		t := tags[i*per*ts:][:len(p)/e.l.SectorSize*ts]
		blake2b.SumSectors(t, ts, e.tagKey, n, p, e.l.SectorSize)
	})
	return tags
}

// tagAndDecrypt computes the tags of the ciphertext in buf into computed,
// then decrypts buf in place (when decrypt is set).
func (e *engine) tagAndDecrypt(buf []byte, first uint64, computed []byte, decrypt bool) {
	ts, per := e.l.TagSize, pieceSize/e.l.SectorSize
	e.parallel(buf, first, func(p []byte, n uint64, i int) {
		if e.tagKey != nil {
			t := computed[i*per*ts:][:len(p)/e.l.SectorSize*ts]
			blake2b.SumSectors(t, ts, e.tagKey, n, p, e.l.SectorSize)
		}
		if decrypt {
			e.codec.Decrypt(p, p, n)
		}
	})
}

// DigestCheck says what became of the end-to-end digest.
type DigestCheck struct {
	Computed [blake2b.Size]byte // BLAKE2b-512 of the plaintext read (if Done)
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
// never receives unverified plaintext) and the end-to-end digest at the end
// (*DigestMismatchError, after all the data went to w: the caller discards
// its output then).
func (v *Volume) Decrypt(ctx context.Context, w io.Writer, progress func(int64)) (DigestCheck, error) {
	return v.scan(ctx, w, true, progress, nil)
}

// VerifyResult is what Verify found in the data area.
type VerifyResult struct {
	BadSectors int64
	Digest     DigestCheck
}

// Verify checks every tag of the data area, calling bad for each sector
// that fails (in order), and the end-to-end digest when it still applies
// (it decrypts only then). Bad sectors are not an error: the result counts
// them. A digest mismatch is a *DigestMismatchError.
func (v *Volume) Verify(ctx context.Context, progress func(int64), bad func(BadSector)) (VerifyResult, error) {
	var res VerifyResult
	count := func(b BadSector) {
		res.BadSectors++
		if bad != nil {
			bad(b)
		}
	}
	d, err := v.scan(ctx, io.Discard, false, progress, count)
	res.Digest = d
	return res, err
}

// scan streams the data area through the tag check, decryption when
// needed, and the digest. With onBad nil, a bad sector stops the scan.
func (v *Volume) scan(ctx context.Context, w io.Writer, output bool, progress func(int64), onBad func(BadSector)) (DigestCheck, error) {
	var dc DigestCheck
	recorded, ok, stale, err := v.digestState()
	if err != nil {
		return dc, err
	}
	dc.Recorded, dc.Stale = ok, ok && stale
	hashIt := output || ok && !stale
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
	if hashIt {
		sum, _ = blake2b.New512(nil)
	}
	stored := make([]byte, 0)
	l := v.l
	err = StreamStages(ctx, w, io.NewSectionReader(v.dev, l.DataOffset, l.DataLength), l.DataLength, l.SectorSize, Stages{
		Transform: func(buf []byte, first uint64) error {
			var computed []byte
			if e.tagKey != nil {
				computed = e.chunkTags(buf)
				if cap(stored) < len(computed) {
					stored = make([]byte, len(computed))
				}
				stored = stored[:len(computed)]
				if _, err := v.dev.ReadAt(stored, l.TagPosition(first)); err != nil {
					return fmt.Errorf("cannot read tags: %w", err)
				}
			}
			e.tagAndDecrypt(buf, first, computed, decrypt)
			if e.tagKey == nil {
				return nil
			}
			bad := v.compareTags(stored, computed, first)
			if len(bad) > 0 && onBad == nil {
				clear(buf)
				return &IntegrityError{Sectors: bad}
			}
			for _, b := range bad {
				onBad(b)
			}
			return nil
		},
		Write: func(buf []byte) error {
			if sum != nil {
				sum.Write(buf)
			}
			return nil
		},
	}, progress)
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
