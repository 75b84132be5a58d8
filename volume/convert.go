package volume

import (
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/xtsctl/xtsctl/blake2b"
)

// What package inplace needs to build and finish a volume around data that
// it moves itself, in place (docs/INPLACE.md): a header without a volume
// yet, header copies written one at a time, a fresh state area, and the
// data area's crypto (XTS and tags) without a Volume. Create and Open do
// the same for a volume written from a stream or already complete.

// NewHeader lays out and keys a new volume holding size bytes of data, as
// Create would, without writing anything: a random UUID and master key,
// key slot 0 for opts.Passphrase. It returns the header, without digest or
// MAC yet (SealDigest, Authenticate), and the master key (the caller wipes
// it).
func NewHeader(size int64, opts CreateOptions) (*Header, []byte, error) {
	if opts.SectorSize == 0 {
		opts.SectorSize = 4096
	}
	if opts.KeySize == 0 {
		opts.KeySize = 64
	}
	if opts.RegionSize == 0 {
		opts.RegionSize = DefaultRegion
	}
	switch {
	case opts.KeySize != 32 && opts.KeySize != 64:
		return nil, nil, fmt.Errorf("unsupported key size %d bytes (want 32 or 64)", opts.KeySize)
	case len(opts.Label) > MaxLabel:
		return nil, nil, fmt.Errorf("label is %d bytes, longer than %d", len(opts.Label), MaxLabel)
	case !utf8.ValidString(opts.Label) || strings.IndexByte(opts.Label, 0) >= 0:
		return nil, nil, errors.New("label must be UTF-8 without NUL bytes")
	case len(opts.Passphrase) == 0:
		return nil, nil, errors.New("empty passphrase")
	}
	l, err := computeLayout(size, opts.SectorSize, opts.TagSize, opts.RegionSize)
	if err != nil {
		return nil, nil, err
	}
	h := &Header{Version: Version, Label: opts.Label, KeySize: opts.KeySize, Layout: l}
	if _, err := rand.Read(h.UUID[:]); err != nil {
		return nil, nil, err
	}
	h.UUID[6] = h.UUID[6]&0x0f | 0x40 // RFC 9562 version 4 (random)
	h.UUID[8] = h.UUID[8]&0x3f | 0x80 // RFC 9562 variant
	key, err := newMasterKey(opts.KeySize)
	if err != nil {
		return nil, nil, err
	}
	if h.Slots[0], err = newSlot(opts.Passphrase, key, h.UUID, 0, opts.KDF); err != nil {
		clear(key)
		return nil, nil, err
	}
	return h, key, nil
}

// SealDigest records the end-to-end digest in h, encrypted under the
// master key, and sets FlagDigest. The MAC must be computed after it.
func (h *Header) SealDigest(masterKey []byte, digest *[blake2b.Size]byte) error {
	return h.sealDigest(masterKey, digest)
}

// OpenDigest returns the end-to-end digest h records (ok false if none).
func (h *Header) OpenDigest(masterKey []byte) (digest [blake2b.Size]byte, ok bool, err error) {
	return h.openDigest(masterKey)
}

// Authenticate computes h's MAC under the master key, after any change of
// the fields it covers (flags, digest, layout).
func (h *Header) Authenticate(masterKey []byte) error {
	mac, err := h.computeMAC(masterKey)
	if err != nil {
		return err
	}
	h.MAC = mac
	return nil
}

// WriteHeaderCopy writes h as one header copy at off (0 or its
// SecondaryOffset), without syncing: for a writer that orders its own
// syncs. WriteHeaders is the crash-safe update of both copies.
func WriteHeaderCopy(dev Device, h *Header, off int64) error {
	if off != 0 && off != h.SecondaryOffset {
		return fmt.Errorf("volume: a header copy belongs at 0 or %d, not %d", h.SecondaryOffset, off)
	}
	b, err := h.MarshalBinary()
	if err != nil {
		return err
	}
	if _, err := dev.WriteAt(b, off); err != nil {
		return fmt.Errorf("cannot write header: %w", err)
	}
	return nil
}

// WriteHeaders writes h to both copies, secondary first, each synced, with
// a generation above every copy's in hs (see writeHeader): a crash leaves
// the old header or the new one.
func WriteHeaders(dev Device, hs *Headers, h *Header) error { return writeHeader(dev, hs, h) }

// InitState writes the state area of a volume that has never been written:
// state record 0 (clean, naming the all-zero bitmap), an empty record 1 and
// the zero bitmap, over whatever the area held. It does not sync.
func InitState(dev Device, h *Header, masterKey []byte) error {
	zeros := make([]byte, h.StateLength)
	var keys *stateKeys
	if h.Version >= 2 {
		keys = newStateKeys(masterKey)
		defer keys.wipe()
	}
	st := State{Valid: true}
	if keys != nil {
		st.bitmapMAC = keys.bitmapMAC(zeros[stateAreaFixed:])
	}
	copy(zeros, marshalState(st, h.Version, h.UUID, keys))
	if _, err := dev.WriteAt(zeros, StateOffset); err != nil {
		return fmt.Errorf("cannot write the state area: %w", err)
	}
	return nil
}

// StateOf reads the state in force, authenticated under the master key in
// version 2, and what was wrong with the records.
func StateOf(dev Device, h *Header, masterKey []byte) (State, []string) {
	var keys *stateKeys
	if h.Version >= 2 {
		keys = newStateKeys(masterKey)
		defer keys.wipe()
	}
	res := readState(dev, h, keys)
	return res.inForce, res.warn
}

// DataCrypto is the crypto of a volume's data area for code that reads and
// writes the sectors itself: XTS with the volume's tweaks, and the tags.
// Its methods work on one chunk on the calling goroutine (callers run many
// at once), and are safe for concurrent use.
type DataCrypto struct {
	e *engine
}

// NewDataCrypto returns the data crypto of h under its master key. The
// caller calls Wipe.
func NewDataCrypto(h *Header, masterKey []byte) (*DataCrypto, error) {
	e, err := newEngine(masterKey, h)
	if err != nil {
		return nil, err
	}
	return &DataCrypto{e: e}, nil
}

// Wipe clears the keys.
func (d *DataCrypto) Wipe() { d.e.wipe() }

// TagBytes is the length of the tags of n bytes of data (0 without tags).
func (d *DataCrypto) TagBytes(n int) int {
	if d.e.tagKey == nil {
		return 0
	}
	return n / d.e.l.SectorSize * d.e.l.TagSize
}

// Seal encrypts the plaintext sectors of buf, the first of which is data
// sector first, in place, and writes their tags to tags (TagBytes long).
func (d *DataCrypto) Seal(buf, tags []byte, first uint64) {
	d.e.codec.Encrypt(buf, buf, first)
	if d.e.tagKey != nil {
		blake2b.SumSectors(tags, d.e.l.TagSize, d.e.tagKey, first, buf, d.e.l.SectorSize)
	}
}

// Check compares the ciphertext sectors of buf with their stored tags,
// using computed (TagBytes long) as scratch, and returns those that do not
// match (none without tags).
func (d *DataCrypto) Check(buf, stored, computed []byte, first uint64) []BadSector {
	if d.e.tagKey == nil {
		return nil
	}
	l := d.e.l
	blake2b.SumSectors(computed, l.TagSize, d.e.tagKey, first, buf, l.SectorSize)
	var bad []BadSector
	for i := 0; i < len(stored); i += l.TagSize {
		if subtle.ConstantTimeCompare(stored[i:i+l.TagSize], computed[i:i+l.TagSize]) != 1 {
			n := first + uint64(i/l.TagSize)
			bad = append(bad, BadSector{Sector: n, Offset: l.SectorOffset(n)})
		}
	}
	return bad
}

// Decrypt decrypts the ciphertext sectors of buf in place; Check them
// first.
func (d *DataCrypto) Decrypt(buf []byte, first uint64) { d.e.codec.Decrypt(buf, buf, first) }
