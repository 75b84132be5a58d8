package volume

import (
	"bytes"
	"crypto/subtle"
	"fmt"
	"io"

	"github.com/xtsctl/xtsctl/blake2b"
)

// The state area (docs/FORMAT.md, "State area") follows the primary header
// copy: two state records, then the dirty-region bitmap. The header holds
// only what changes when the user manages the volume (passphrases, header
// restore); what changes while it is in use lives here, so that opening and
// closing a volume never rewrites the key slots.
//
// Version 1 protects the records and the bitmap with unkeyed checksums
// only: anyone who can write the image can forge them. Version 2 records
// carry a MAC under a key derived from the master key, and a MAC of the
// bitmap, so nothing in the state area is believed before it is
// authenticated. Either way, recovery never accepts a sector whose tag
// does not match unless the user asks (Volume.Recover).
const (
	stateMagicV1      = "XTSSTATE"
	stateMagicV2      = "XTSSTAT2"
	stateOffSequence  = 8
	stateOffUUID      = 16
	stateOffFlags     = 32
	stateOffBitmapMAC = 40                               // v2: MAC of the dirty-region bitmap
	stateOffMAC       = StateRecordSize - 64             // v2: MAC of bytes 0..stateOffMAC
	stateOffChecksum  = StateRecordSize - 32             // unkeyed: tells damage from forgery
	stateMACSize      = 32                               // BLAKE2b-256
	maxStateSequence  = uint64(1) << 62                  // far beyond any real use; bounds the comparison
	stateReservedV2   = stateOffBitmapMAC + stateMACSize // reserved bytes from here to stateOffMAC

	stateDirty       uint32 = 1 << 0
	stateDigestStale uint32 = 1 << 1
	knownStateFlags         = stateDirty | stateDigestStale
)

// State is the volume's runtime state, from the state record in force.
type State struct {
	// Valid is false when no record could be used: the state is unknown
	// and must be treated as Dirty and DigestStale.
	Valid bool
	// Authenticated: the record's MAC was checked with the master key
	// (version 2, unlocked). A version-1 record, or one read without the
	// key, is only known to be intact, not to have been written by xtsctl.
	Authenticated bool
	// Sequence numbers the records; the newer record has the higher one.
	Sequence uint64
	// Dirty: the volume was written and not closed cleanly since. Sectors in
	// the regions marked in the bitmap may have data and tags that disagree.
	Dirty bool
	// DigestStale: the data changed since the end-to-end digest in the
	// header was recorded, so the digest no longer describes it.
	DigestStale bool

	bitmapMAC [stateMACSize]byte // version 2: the bitmap this record describes
}

func (s State) flags() uint32 {
	var f uint32
	if s.Dirty {
		f |= stateDirty
	}
	if s.DigestStale {
		f |= stateDigestStale
	}
	return f
}

// stateKeys authenticate a version-2 state area. Two keys, one per kind of
// input, so that a record MAC can never stand for a bitmap MAC.
type stateKeys struct {
	record, bitmap []byte
}

func newStateKeys(master []byte) *stateKeys {
	return &stateKeys{
		record: deriveKey(master, purposeStateRecords, blake2b.Size),
		bitmap: deriveKey(master, purposeBitmap, blake2b.Size),
	}
}

func (k *stateKeys) wipe() {
	if k != nil {
		clear(k.record)
		clear(k.bitmap)
	}
}

func keyedSum256(key, msg []byte) (sum [stateMACSize]byte) {
	blake2b.SumKeyed(sum[:], key, msg)
	return sum
}

func (k *stateKeys) bitmapMAC(bitmap []byte) [stateMACSize]byte {
	return keyedSum256(k.bitmap, bitmap)
}

// marshalState encodes record s for a volume of the given format version;
// a version-2 record needs the keys.
func marshalState(s State, version uint32, uuid [16]byte, keys *stateKeys) []byte {
	b := make([]byte, StateRecordSize)
	put64(b, stateOffSequence, s.Sequence)
	copy(b[stateOffUUID:], uuid[:])
	put32(b, stateOffFlags, s.flags())
	if version == 1 {
		copy(b, stateMagicV1)
	} else {
		copy(b, stateMagicV2)
		copy(b[stateOffBitmapMAC:], s.bitmapMAC[:])
		mac := keyedSum256(keys.record, b[:stateOffMAC])
		copy(b[stateOffMAC:], mac[:])
	}
	sum := blake2b.Sum256(b[:stateOffChecksum])
	copy(b[stateOffChecksum:], sum[:])
	return b
}

// parseState parses the record in slot (0 or 1). keys nil reads a version-2
// record without authenticating it (for info, which has no key); empty
// reports an all-zero record (the second record of a volume that has never
// been written is empty).
func parseState(b []byte, slot int, version uint32, uuid [16]byte, keys *stateKeys) (s State, empty bool, err error) {
	if allZero(b) {
		return State{}, true, nil
	}
	magic, reservedFrom, reservedTo := stateMagicV1, stateOffFlags+4, stateOffChecksum
	if version != 1 {
		magic, reservedFrom, reservedTo = stateMagicV2, stateReservedV2, stateOffMAC
	}
	sum := blake2b.Sum256(b[:stateOffChecksum])
	seq := le64(b, stateOffSequence)
	switch {
	case string(b[:len(magic)]) != magic:
		return State{}, false, fmt.Errorf("not a version-%d state record", version)
	case !bytes.Equal(sum[:], b[stateOffChecksum:]):
		return State{}, false, fmt.Errorf("checksum mismatch")
	case !bytes.Equal(b[stateOffUUID:stateOffUUID+16], uuid[:]):
		return State{}, false, fmt.Errorf("belongs to another volume")
	case le32(b, stateOffFlags)&^knownStateFlags != 0 || !allZero(b[stateOffFlags+4:stateOffBitmapMAC]) || !allZero(b[reservedFrom:reservedTo]):
		return State{}, false, fmt.Errorf("unknown flags or non-zero reserved bytes")
	case seq >= maxStateSequence || seq%2 != uint64(slot):
		// Records alternate by parity, and no writer gets near the bound:
		// a record claiming 2^64-1 cannot outrank the ones written after it.
		return State{}, false, fmt.Errorf("impossible sequence number %d", seq)
	}
	f := le32(b, stateOffFlags)
	s = State{
		Valid:       true,
		Sequence:    seq,
		Dirty:       f&stateDirty != 0,
		DigestStale: f&stateDigestStale != 0,
	}
	if version != 1 {
		copy(s.bitmapMAC[:], b[stateOffBitmapMAC:])
		if keys != nil {
			mac := keyedSum256(keys.record, b[:stateOffMAC])
			if subtle.ConstantTimeCompare(mac[:], b[stateOffMAC:stateOffChecksum]) != 1 {
				return State{}, false, fmt.Errorf("authentication failed: not written by xtsctl with this volume's key")
			}
			s.Authenticated = true
		}
	}
	return s, false, nil
}

// stateRecords is what reading the two records found.
type stateRecords struct {
	inForce State    // the usable record with the highest sequence number
	other   State    // the other usable record, if any (Valid)
	found   int      // usable records
	warn    []string // damaged or forged records
}

// readState reads both records. A version-2 record is usable only if it
// authenticates (keys given) or, without keys, if it is intact.
func readState(r io.ReaderAt, h *Header, keys *stateKeys) stateRecords {
	var res stateRecords
	buf := make([]byte, 2*StateRecordSize)
	if _, err := r.ReadAt(buf, StateOffset); err != nil {
		res.warn = append(res.warn, fmt.Sprintf("cannot read the state records: %v", err))
		return res
	}
	var usable []State
	for i := range 2 {
		s, empty, err := parseState(buf[i*StateRecordSize:][:StateRecordSize], i, h.Version, h.UUID, keys)
		switch {
		case err != nil:
			res.warn = append(res.warn, fmt.Sprintf("state record %d is unusable (%v)", i, err))
		case !empty:
			usable = append(usable, s)
		}
	}
	res.found = len(usable)
	for _, s := range usable {
		if !res.inForce.Valid || s.Sequence > res.inForce.Sequence {
			res.other, res.inForce = res.inForce, s
		} else {
			res.other = s
		}
	}
	if !res.inForce.Valid {
		res.warn = append(res.warn, "no usable state record: whether the volume was closed cleanly is unknown")
	}
	return res
}

// bitmapBit locates region's bit: byte region/8, bit region%8 (LSB first).
func bitmapBit(region int64) (int64, byte) { return region / 8, 1 << (region % 8) }

// ReadState reads the state of the volume whose header is h without its
// key, with warnings about unusable state records. For a version-2 volume
// the records are only checked to be intact: what they say is not
// authenticated (Volume.State is).
func ReadState(r io.ReaderAt, h *Header) (State, []string) {
	res := readState(r, h, nil)
	return res.inForce, res.warn
}
