package volume

import (
	"bytes"
	"fmt"
	"io"

	"github.com/xtsctl/xtsctl/blake2b"
)

// The state area (docs/FORMAT.md, "State area") follows the primary header
// copy: two state records, then the dirty-region bitmap. The header holds
// only what changes when the user manages the volume (passphrases, header
// restore); what changes while it is in use lives here, so that opening and
// closing a volume never rewrites the key slots.
const (
	stateMagic       = "XTSSTATE"
	stateOffSequence = 8
	stateOffUUID     = 16
	stateOffFlags    = 32
	stateOffChecksum = StateRecordSize - 32

	stateDirty       uint32 = 1 << 0
	stateDigestStale uint32 = 1 << 1
	knownStateFlags         = stateDirty | stateDigestStale
)

// State is the volume's runtime state, from the newest intact state record.
type State struct {
	// Valid is false when neither state record is intact: the state is
	// unknown and must be treated as Dirty and DigestStale.
	Valid bool
	// Sequence numbers the records; the newer record has the higher one.
	Sequence uint64
	// Dirty: the volume was written and not closed cleanly since. Sectors in
	// the regions marked in the bitmap may have data and tags that disagree.
	Dirty bool
	// DigestStale: the data changed since the end-to-end digest in the
	// header was recorded, so the digest no longer describes it.
	DigestStale bool
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

func (s State) marshal(uuid [16]byte) []byte {
	b := make([]byte, StateRecordSize)
	copy(b, stateMagic)
	put64(b, stateOffSequence, s.Sequence)
	copy(b[stateOffUUID:], uuid[:])
	put32(b, stateOffFlags, s.flags())
	sum := blake2b.Sum256(b[:stateOffChecksum])
	copy(b[stateOffChecksum:], sum[:])
	return b
}

// parseState parses one record; empty reports an all-zero record (the
// second record of a volume that has never been written is empty).
func parseState(b []byte, uuid [16]byte) (s State, empty bool, err error) {
	if allZero(b) {
		return State{}, true, nil
	}
	sum := blake2b.Sum256(b[:stateOffChecksum])
	switch {
	case string(b[:len(stateMagic)]) != stateMagic:
		return State{}, false, fmt.Errorf("no state record magic")
	case !bytes.Equal(sum[:], b[stateOffChecksum:]):
		return State{}, false, fmt.Errorf("checksum mismatch")
	case !bytes.Equal(b[stateOffUUID:stateOffUUID+16], uuid[:]):
		return State{}, false, fmt.Errorf("belongs to another volume")
	case le32(b, stateOffFlags)&^knownStateFlags != 0 || !allZero(b[stateOffFlags+4:stateOffChecksum]):
		return State{}, false, fmt.Errorf("unknown flags or non-zero reserved bytes")
	}
	f := le32(b, stateOffFlags)
	return State{
		Valid:       true,
		Sequence:    le64(b, stateOffSequence),
		Dirty:       f&stateDirty != 0,
		DigestStale: f&stateDigestStale != 0,
	}, false, nil
}

// readState returns the newest intact state record and warnings about
// damaged ones.
func readState(r io.ReaderAt, uuid [16]byte) (State, []string) {
	var best State
	var warnings []string
	buf := make([]byte, 2*StateRecordSize)
	if _, err := r.ReadAt(buf, StateOffset); err != nil {
		return State{}, []string{fmt.Sprintf("cannot read the state records: %v", err)}
	}
	for i := range 2 {
		s, empty, err := parseState(buf[i*StateRecordSize:][:StateRecordSize], uuid)
		switch {
		case err != nil:
			warnings = append(warnings, fmt.Sprintf("state record %d is damaged (%v)", i, err))
		case !empty && (!best.Valid || s.Sequence > best.Sequence):
			best = s
		}
	}
	if !best.Valid {
		warnings = append(warnings, "no intact state record: whether the volume was closed cleanly is unknown")
	}
	return best, warnings
}

// writeState writes s as the next record, into the slot that does not hold
// the current one (sequence parity), and syncs: a torn write damages only
// the record being written, and the previous one stays in force.
func writeState(dev Device, s State, uuid [16]byte) error {
	if _, err := dev.WriteAt(s.marshal(uuid), StateOffset+int64(s.Sequence%2)*StateRecordSize); err != nil {
		return fmt.Errorf("cannot write the state record: %w", err)
	}
	if err := dev.Sync(); err != nil {
		return fmt.Errorf("cannot sync the state record: %w", err)
	}
	return nil
}

// bitmapBit locates region's bit: byte region/8, bit region%8 (LSB first).
func bitmapBit(region int64) (int64, byte) { return region / 8, 1 << (region % 8) }

// ReadState reads the state of the volume whose header is h (no key
// needed), with warnings about damaged state records.
func ReadState(r io.ReaderAt, h *Header) (State, []string) { return readState(r, h.UUID) }
