package volume

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

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
// header and the end-to-end digest of the plaintext (Digest), which the header
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

	// Write in order of offsets where possible: on tmpfs, filling a hole
	// costs several times an append. Tags of a volume up to 8 GiB (with the
	// default sizes) wait in memory and follow the data; above that, the
	// whole volume is preallocated and tags are written as they come.
	var allTags []byte
	if l.TagLength <= maxBufferedTags {
		allTags = make([]byte, l.TagLength)
	} else if !preallocate(dev, l.Size) {
		if _, err := dev.WriteAt(make([]byte, CopyRegion), l.SecondaryOffset); err != nil {
			return nil, digest, &WriteError{err}
		}
	}
	e.digest = newTreeDigest(size)
	err = Stream(ctx, io.NewOffsetWriter(dev, l.DataOffset), r, size, l.SectorSize, func(buf []byte, first uint64) error {
		tags := e.encryptChunk(buf, first)
		switch {
		case tags == nil:
		case allTags != nil:
			copy(allTags[l.TagPosition(first)-l.TagOffset:], tags)
		default:
			if _, err := dev.WriteAt(tags, l.TagPosition(first)); err != nil {
				return &WriteError{err}
			}
		}
		return nil
	}, progress)
	if err != nil {
		return nil, digest, err
	}
	if allTags != nil {
		if _, err := dev.WriteAt(allTags, l.TagOffset); err != nil {
			return nil, digest, &WriteError{err}
		}
	}
	// The secondary copy's region ends the volume; WriteHeader fills its
	// first CopySize bytes.
	if _, err := dev.WriteAt(make([]byte, CopyRegion), l.SecondaryOffset); err != nil {
		return nil, digest, &WriteError{err}
	}
	digest = e.digest.sum()
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

// maxBufferedTags bounds the tags Create keeps in memory until the data is
// written.
const maxBufferedTags = 64 << 20

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

// engine is the per-volume crypto of the streaming operations: XTS, the
// tags and the end-to-end digest, each chunk split in pieces over all cores.
type engine struct {
	l       Layout
	cipher  *xts.Cipher
	codec   *sector.Codec // single-threaded: engine splits work itself
	tagKey  []byte        // nil without integrity
	digest  *treeDigest   // nil when the digest is not wanted
	workers int
	tags    []byte // scratch: one chunk's tags
	leaves  []byte // scratch: one chunk's leaf digests
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
	clear(e.leaves)
}

// pieceSize is the unit of work of one core: a whole number of digest
// leaves and of sectors, big enough to amortise the hand-off, small enough
// to stay in cache between hashing, encrypting and tagging it.
const pieceSize = 512 << 10

// parallel runs f over buf in pieces on every core; f gets the piece, the
// number of its first sector and its index.
func (e *engine) parallel(buf []byte, first uint64, f func(piece []byte, first uint64, index int)) {
	per := pieceSize / e.l.SectorSize
	pieces := (len(buf) + pieceSize - 1) / pieceSize
	piece := func(p int) {
		lo, hi := p*pieceSize, min((p+1)*pieceSize, len(buf))
		f(buf[lo:hi], first+uint64(p*per), p)
	}
	if pieces <= 1 || e.workers <= 1 {
		for p := range pieces {
			piece(p)
		}
		return
	}
	// The caller works too: one goroutine fewer to wake per chunk.
	var next atomic.Int64
	work := func() {
		for p := int(next.Add(1) - 1); p < pieces; p = int(next.Add(1) - 1) {
			piece(p)
		}
	}
	var wg sync.WaitGroup
	for range min(e.workers, pieces) - 1 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			work()
		}()
	}
	work()
	wg.Wait()
}

// scratch returns (*buf)[:n], growing it when needed.
func scratch(buf *[]byte, n int) []byte {
	if cap(*buf) < n {
		*buf = make([]byte, n)
	}
	return (*buf)[:n]
}

// pieceTags and pieceLeaves are the parts of a chunk's tags and leaf
// digests that belong to piece i of length n.
func (e *engine) pieceTags(tags []byte, i, n int) []byte {
	ts := e.l.TagSize
	return tags[i*pieceSize/e.l.SectorSize*ts:][:n/e.l.SectorSize*ts]
}

func pieceLeaves(leaves []byte, i, n int) []byte {
	return leaves[i*pieceSize/DigestLeafSize*blake2b.Size:][:leafCount(n)*blake2b.Size]
}

// encryptChunk hashes the plaintext chunk into the digest, encrypts it in
// place and returns its tags (nil without integrity; the slice is reused by
// the next call). Chunks must come in order.
func (e *engine) encryptChunk(buf []byte, first uint64) []byte {
	var tags, leaves []byte
	if e.tagKey != nil {
		tags = scratch(&e.tags, len(buf)/e.l.SectorSize*e.l.TagSize)
	}
	if e.digest != nil {
		leaves = scratch(&e.leaves, leafCount(len(buf))*blake2b.Size)
	}
	e.parallel(buf, first, func(p []byte, n uint64, i int) {
		if leaves != nil {
			leafSums(pieceLeaves(leaves, i, len(p)), p)
		}
		e.codec.Encrypt(p, p, n)
		if tags != nil {
			blake2b.SumSectors(e.pieceTags(tags, i, len(p)), e.l.TagSize, e.tagKey, n, p, e.l.SectorSize)
		}
	})
	if leaves != nil {
		e.digest.add(leaves)
	}
	return tags
}

// decryptChunk computes the tags of the ciphertext chunk into computed
// (with integrity), then, when decrypt is set, decrypts it in place and
// hashes the plaintext into the digest. Chunks must come in order.
func (e *engine) decryptChunk(buf []byte, first uint64, computed []byte, decrypt bool) {
	var leaves []byte
	if e.digest != nil {
		leaves = scratch(&e.leaves, leafCount(len(buf))*blake2b.Size)
	}
	e.parallel(buf, first, func(p []byte, n uint64, i int) {
		if e.tagKey != nil {
			blake2b.SumSectors(e.pieceTags(computed, i, len(p)), e.l.TagSize, e.tagKey, n, p, e.l.SectorSize)
		}
		if decrypt {
			e.codec.Decrypt(p, p, n)
		}
		if leaves != nil {
			leafSums(pieceLeaves(leaves, i, len(p)), p)
		}
	})
	if leaves != nil {
		e.digest.add(leaves)
	}
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
	if hashIt {
		e.digest = newTreeDigest(v.l.DataLength)
	}
	var stored, computed []byte
	l := v.l
	err = Stream(ctx, w, io.NewSectionReader(v.dev, l.DataOffset, l.DataLength), l.DataLength, l.SectorSize, func(buf []byte, first uint64) error {
		if e.tagKey != nil {
			n := len(buf) / l.SectorSize * l.TagSize
			stored, computed = scratch(&stored, n), scratch(&computed, n)
			if _, err := v.dev.ReadAt(stored, l.TagPosition(first)); err != nil {
				return &ReadError{fmt.Errorf("cannot read tags: %w", err)}
			}
		}
		e.decryptChunk(buf, first, computed, decrypt)
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
	}, progress)
	if err != nil {
		return dc, err
	}
	if e.digest != nil {
		dc.Computed = e.digest.sum()
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
