package volume

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/xtsctl/xtsctl/blake2b"
)

// Byte offsets of the header block's fields (docs/FORMAT.md, "Header block").
const (
	offMagic        = 0
	offVersion      = 8
	offBlockSize    = 12
	offGeneration   = 16
	offUUID         = 24
	offLabel        = 40
	offCipher       = 104
	offKeySize      = 136
	offSectorSize   = 140
	offIntegrity    = 144
	offTagSize      = 148
	offDataOffset   = 152
	offDataLength   = 160
	offTagOffset    = 168
	offTagLength    = 176
	offStateOffset  = 184
	offStateLength  = 192
	offRegionSize   = 200
	offSecondary    = 208
	offVolumeSize   = 216
	offSlotArea     = 224
	offSlotSize     = 228
	offSlotCount    = 232
	offFlags        = 236
	offSealedDigest = 240
	offSlotChecksum = offSealedDigest + SealedDigestSize // 344
	offReserved     = offSlotChecksum + 32               // 376
	offMAC          = 4000
	offChecksum     = 4032

	labelSize  = 64
	cipherSize = 32
	macSize    = 32
)

// Header flags. A flag this version does not know makes the header
// unreadable: flags announce features that change how a volume is read.
//
// FlagEncrypting and FlagDecrypting mark a volume that an in-place
// conversion (package inplace, docs/INPLACE.md) is in the middle of: its
// data area is partly plaintext, partly ciphertext, and only that code
// can finish it. xtsctl versions without them refuse such a volume as
// using unknown features; this one refuses it everywhere else too
// (ReadHeaders returns an *InPlaceError).
const (
	FlagDigest     uint32 = 1 << 0 // SealedDigest holds the end-to-end digest
	FlagEncrypting uint32 = 1 << 1 // an in-place encryption is in progress
	FlagDecrypting uint32 = 1 << 2 // an in-place decryption is in progress

	knownFlags   = FlagDigest | FlagEncrypting | FlagDecrypting
	FlagsInPlace = FlagEncrypting | FlagDecrypting
)

// MaxLabel is the longest label in bytes (UTF-8).
const MaxLabel = labelSize

// Header is one parsed header copy: the header block and the key slots.
type Header struct {
	Version      uint32   // format version: 1, or 2 (authenticated state area)
	Generation   uint64   // incremented by every rewrite of the header
	UUID         [16]byte // random, fixed at creation
	Label        string   // free text, at most MaxLabel bytes of UTF-8
	KeySize      int      // master key bytes: 32 (XTS-AES-128) or 64 (XTS-AES-256)
	Layout                // where the areas are
	Flags        uint32
	SealedDigest [SealedDigestSize]byte // the encrypted plaintext digest, if FlagDigest
	MAC          [macSize]byte          // keyed with a key derived from the master key
	Slots        [MaxSlots]KeySlot
}

// Errors that name what is wrong with a header copy.
var (
	// ErrNotVolume: the magic is not there.
	ErrNotVolume = errors.New("not an xtsctl volume")
	// ErrHeaderChecksum: the header block does not match its checksum.
	ErrHeaderChecksum = errors.New("header checksum mismatch")
)

// readableVersions names the versions this code reads, for messages.
const readableVersions = "1 and 2"

// VersionError reports a header of a format version this code cannot read.
type VersionError struct{ Version uint32 }

func (e *VersionError) Error() string {
	return fmt.Sprintf("unsupported volume format version %d (this xtsctl reads versions %s)", e.Version, readableVersions)
}

// FeatureError reports header flags this code does not know.
type FeatureError struct{ Flags uint32 }

func (e *FeatureError) Error() string {
	return fmt.Sprintf("volume uses features this xtsctl does not know (header flags %#x)", e.Flags)
}

// SlotAreaError reports a key slot area that does not match the checksum in
// its header block; Damaged lists the slots that fail their own checksum.
type SlotAreaError struct{ Damaged []int }

func (e *SlotAreaError) Error() string {
	if len(e.Damaged) == 0 {
		return "key slot area checksum mismatch"
	}
	return fmt.Sprintf("key slot area checksum mismatch (damaged: %s)", slotList(e.Damaged))
}

// slotList names slots: "key slot 3", "key slots 1, 4".
func slotList(slots []int) string {
	var b bytes.Buffer
	b.WriteString("key slot")
	if len(slots) != 1 {
		b.WriteString("s")
	}
	for i, s := range slots {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, " %d", s)
	}
	return b.String()
}

// slotsAre is slotList followed by "is" or "are".
func slotsAre(slots []int) string {
	if len(slots) == 1 {
		return slotList(slots) + " is"
	}
	return slotList(slots) + " are"
}

// ParseHeader parses and checks one header copy (CopySize bytes): magic,
// version, checksum, every field, the slot area checksum and each slot. It
// accepts only the canonical encoding, so MarshalBinary returns b again.
func ParseHeader(b []byte) (*Header, error) {
	h, err := parseBlock(b[:min(len(b), HeaderBlockSize)])
	if err != nil {
		return nil, err
	}
	if len(b) != CopySize {
		return nil, fmt.Errorf("header copy is %d bytes, want %d", len(b), CopySize)
	}
	if err := h.parseSlots(b[slotAreaOffset:], b[offSlotChecksum:offSlotChecksum+32]); err != nil {
		return nil, err
	}
	return h, nil
}

// parseBlock parses the header block. Magic and version come first: they
// stay where they are in every version.
func parseBlock(b []byte) (*Header, error) {
	if len(b) < offVersion+4 || string(b[offMagic:offMagic+8]) != Magic {
		return nil, ErrNotVolume
	}
	version := le32(b, offVersion)
	if version < minVersion || version > Version {
		return nil, &VersionError{Version: version}
	}
	if len(b) != HeaderBlockSize {
		return nil, fmt.Errorf("header block is %d bytes, want %d", len(b), HeaderBlockSize)
	}
	sum := blake2b.Sum512(b[:offChecksum])
	if !bytes.Equal(sum[:], b[offChecksum:]) {
		return nil, ErrHeaderChecksum
	}
	if err := checkFixed(b); err != nil {
		return nil, fmt.Errorf("invalid header: %w", err)
	}
	h := &Header{
		Version:    version,
		Generation: le64(b, offGeneration),
		KeySize:    int(le32(b, offKeySize)),
		Flags:      le32(b, offFlags),
		Layout: Layout{
			SectorSize:      int(le32(b, offSectorSize)),
			Integrity:       Integrity(le32(b, offIntegrity)),
			TagSize:         int(le32(b, offTagSize)),
			DataOffset:      int64(le64(b, offDataOffset)),
			DataLength:      int64(le64(b, offDataLength)),
			TagOffset:       int64(le64(b, offTagOffset)),
			TagLength:       int64(le64(b, offTagLength)),
			StateLength:     int64(le64(b, offStateLength)),
			RegionSize:      int64(le64(b, offRegionSize)),
			SecondaryOffset: int64(le64(b, offSecondary)),
			Size:            int64(le64(b, offVolumeSize)),
		},
	}
	copy(h.UUID[:], b[offUUID:])
	copy(h.SealedDigest[:], b[offSealedDigest:])
	copy(h.MAC[:], b[offMAC:])
	if h.Flags&^knownFlags != 0 {
		return nil, &FeatureError{Flags: h.Flags &^ knownFlags}
	}
	label, err := parseString(b[offLabel : offLabel+labelSize])
	if err != nil || !utf8.ValidString(label) {
		return nil, errors.New("invalid header: label is not NUL-padded UTF-8")
	}
	h.Label = label
	if err := h.check(); err != nil {
		return nil, fmt.Errorf("invalid header: %w", err)
	}
	if h.Flags&FlagDigest == 0 && h.SealedDigest != ([SealedDigestSize]byte{}) {
		return nil, errors.New("invalid header: a digest is stored but not flagged")
	}
	if h.UUID == ([16]byte{}) {
		return nil, errors.New("invalid header: the UUID is zero")
	}
	return h, nil
}

// checkFixed checks the fields that have one possible value in versions 1 and 2
// and the reserved bytes, so that parse→marshal is the identity.
func checkFixed(b []byte) error {
	cipher, err := parseString(b[offCipher : offCipher+cipherSize])
	switch {
	case err != nil || cipher != CipherName:
		return fmt.Errorf("unsupported cipher %q (want %s)", bytes.TrimRight(b[offCipher:offCipher+cipherSize], "\x00"), CipherName)
	case le32(b, offBlockSize) != HeaderBlockSize:
		return fmt.Errorf("header block size %d (want %d)", le32(b, offBlockSize), HeaderBlockSize)
	case le64(b, offStateOffset) != StateOffset:
		return fmt.Errorf("state area at %d (want %d)", le64(b, offStateOffset), StateOffset)
	case le32(b, offSlotArea) != slotAreaOffset || le32(b, offSlotSize) != SlotSize || le32(b, offSlotCount) != MaxSlots:
		return errors.New("unexpected key slot area geometry")
	case !allZero(b[offReserved:offMAC]):
		return errors.New("reserved bytes are not zero")
	}
	return nil
}

// check validates the parsed fields against each other.
func (h *Header) check() error {
	if h.Version < minVersion || h.Version > Version {
		return &VersionError{Version: h.Version}
	}
	if h.KeySize != 32 && h.KeySize != 64 {
		return fmt.Errorf("key size %d bytes (want 32 or 64)", h.KeySize)
	}
	if len(h.Label) > MaxLabel {
		return fmt.Errorf("label is %d bytes, longer than %d", len(h.Label), MaxLabel)
	}
	if err := checkTagSize(h.Integrity, h.TagSize); err != nil {
		return err
	}
	if h.Flags&FlagsInPlace == FlagsInPlace {
		return errors.New("flags say an in-place encryption and decryption at once")
	}
	return h.Layout.Check()
}

func (h *Header) parseSlots(area, sum []byte) error {
	want := blake2b.Sum256(area[:MaxSlots*SlotSize])
	var damaged []int
	var firstErr error
	for i := range h.Slots {
		s, err := parseSlot(area[i*SlotSize:(i+1)*SlotSize], h.KeySize)
		if err != nil {
			damaged = append(damaged, i)
			firstErr = cmpErr(firstErr, fmt.Errorf("key slot %d: %w", i, err))
			continue
		}
		h.Slots[i] = s
	}
	if !bytes.Equal(want[:], sum) {
		return &SlotAreaError{Damaged: damaged}
	}
	if firstErr != nil {
		// The area matches its checksum but holds a slot that does not
		// parse: the header was written wrong, not damaged afterwards.
		return firstErr
	}
	return nil
}

func cmpErr(old, err error) error {
	if old != nil {
		return old
	}
	return err
}

// MarshalBinary encodes h as one header copy (CopySize bytes), computing
// the slot area checksum and the header checksum.
func (h *Header) MarshalBinary() ([]byte, error) {
	if err := h.check(); err != nil {
		return nil, err
	}
	if h.Flags&^knownFlags != 0 {
		return nil, &FeatureError{Flags: h.Flags &^ knownFlags}
	}
	if !utf8.ValidString(h.Label) || bytes.IndexByte([]byte(h.Label), 0) >= 0 {
		return nil, errors.New("label must be UTF-8 without NUL bytes")
	}
	b := make([]byte, CopySize)
	for i := range h.Slots {
		if err := h.Slots[i].marshal(b[slotAreaOffset+i*SlotSize:][:SlotSize], h.KeySize); err != nil {
			return nil, fmt.Errorf("key slot %d: %w", i, err)
		}
	}
	h.marshalBlock(b[:HeaderBlockSize], blake2b.Sum256(b[slotAreaOffset:]))
	return b, nil
}

func (h *Header) marshalBlock(b []byte, slotSum [32]byte) {
	copy(b[offMagic:], Magic)
	put32(b, offVersion, h.Version)
	put32(b, offBlockSize, HeaderBlockSize)
	put64(b, offGeneration, h.Generation)
	copy(b[offUUID:], h.UUID[:])
	copy(b[offLabel:offLabel+labelSize], h.Label)
	copy(b[offCipher:offCipher+cipherSize], CipherName)
	put32(b, offKeySize, uint32(h.KeySize))
	put32(b, offSectorSize, uint32(h.SectorSize))
	put32(b, offIntegrity, uint32(h.Integrity))
	put32(b, offTagSize, uint32(h.TagSize))
	put64(b, offDataOffset, uint64(h.DataOffset))
	put64(b, offDataLength, uint64(h.DataLength))
	put64(b, offTagOffset, uint64(h.TagOffset))
	put64(b, offTagLength, uint64(h.TagLength))
	put64(b, offStateOffset, StateOffset)
	put64(b, offStateLength, uint64(h.StateLength))
	put64(b, offRegionSize, uint64(h.RegionSize))
	put64(b, offSecondary, uint64(h.SecondaryOffset))
	put64(b, offVolumeSize, uint64(h.Size))
	put32(b, offSlotArea, slotAreaOffset)
	put32(b, offSlotSize, SlotSize)
	put32(b, offSlotCount, MaxSlots)
	put32(b, offFlags, h.Flags)
	copy(b[offSealedDigest:], h.SealedDigest[:])
	copy(b[offSlotChecksum:], slotSum[:])
	copy(b[offMAC:], h.MAC[:])
	sum := blake2b.Sum512(b[:offChecksum])
	copy(b[offChecksum:], sum[:])
}

// macInput is the header block as the MAC sees it: everything before the
// MAC, with the generation and the slot area checksum zeroed. Header
// restore renumbers copies, and removing a key slot changes the slot area,
// neither with the master key at hand; the slots authenticate themselves
// (their wrapped key is bound to their parameters, slot number and UUID).
func (h *Header) macInput() ([]byte, error) {
	b, err := h.MarshalBinary()
	if err != nil {
		return nil, err
	}
	clear(b[offGeneration : offGeneration+8])
	clear(b[offSlotChecksum : offSlotChecksum+32])
	return b[:offMAC], nil
}

// parseString reads a NUL-padded string: the bytes up to the first NUL,
// and only NULs after it.
func parseString(b []byte) (string, error) {
	n := bytes.IndexByte(b, 0)
	if n < 0 {
		n = len(b)
	}
	if !allZero(b[n:]) {
		return "", errors.New("bytes after the terminating NUL")
	}
	return string(b[:n]), nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

func le32(b []byte, off int) uint32     { return binary.LittleEndian.Uint32(b[off:]) }
func le64(b []byte, off int) uint64     { return binary.LittleEndian.Uint64(b[off:]) }
func put32(b []byte, off int, v uint32) { binary.LittleEndian.PutUint32(b[off:], v) }
func put64(b []byte, off int, v uint64) { binary.LittleEndian.PutUint64(b[off:], v) }
func uuidString(u [16]byte) string {
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

// UUIDString formats the volume UUID the usual way (8-4-4-4-12 hex digits).
func (h *Header) UUIDString() string { return uuidString(h.UUID) }
