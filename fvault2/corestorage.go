package fvault2

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// The CoreStorage structures this package reads, byte by byte as
// docs/FORMATS.md gives them. Integers are little-endian.

const (
	pvHeaderSize  = 512  // the physical volume header, at the volume's byte 0
	mdBlockSize   = 8192 // every metadata block: the disk label, the encrypted ones
	mdHeaderSize  = 64   // the header every metadata block starts with
	pvBlockType   = 0x0010
	labelType     = 0x0011
	cipherAESXTS  = 2 // the PV header's cipher field for AES-XTS-128
	checksumCRC32 = 1 // the PV header's checksum algorithm: CRC-32C
	uuidSize      = 16

	// Bounds on what a header may claim. Apple writes 4096-byte blocks,
	// 4 MiB of metadata and an encrypted metadata area of a few tens of
	// MiB; the bounds leave room and keep every read and loop small.
	minBlockSize      = 512
	maxBlockSize      = 64 << 10
	maxMetadataSize   = 64 << 20
	maxEncMetadata    = 1 << 30 // bytes of encrypted metadata scanned, at most
	maxLabelXML       = 64 << 10
	segmentEntrySize  = 40
	segmentTableStart = 72 // the first entry of a 0x0305 block
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// checksumOK verifies the 8 bytes every CoreStorage structure starts with:
// u32 checksum, u32 seed (0xFFFFFFFF); the checksum is CRC-32C of the rest
// with the register set to the seed and no final inversion (hash/crc32
// inverts on the way in and out, hence the two ^).
func checksumOK(b []byte) bool {
	if len(b) < 8 {
		return false
	}
	seed := le32(b[4:])
	return seed == 0xFFFFFFFF && le32(b) == ^crc32.Update(^seed, castagnoli, b[8:])
}

func le16(b []byte) uint16 { return binary.LittleEndian.Uint16(b) }
func le32(b []byte) uint32 { return binary.LittleEndian.Uint32(b) }
func le64(b []byte) uint64 { return binary.LittleEndian.Uint64(b) }

// errNoPV: the bytes are not a CoreStorage physical volume header at all.
var errNoPV = errors.New("no CoreStorage physical volume header")

// corruptError is a structure that claims to be CoreStorage but fails a
// check: a checksum, a bound.
type corruptError struct{ msg string }

func (e *corruptError) Error() string { return e.msg }

func corrupt(format string, args ...any) error {
	return &corruptError{msg: fmt.Sprintf(format, args...)}
}

// unsupportedError is valid CoreStorage that asks for what this package
// does not do.
type unsupportedError struct{ msg string }

func (e *unsupportedError) Error() string { return e.msg }

func unsupported(format string, args ...any) error {
	return &unsupportedError{msg: fmt.Sprintf(format, args...)}
}

// pvHeader is the physical volume header.
type pvHeader struct {
	Size         uint64 // the physical volume, bytes
	BlockSize    uint32
	MetadataSize uint32    // bytes of each of the four metadata copies
	LabelBlock   uint64    // the first metadata copy (the disk label), in blocks
	OtherBlocks  [3]uint64 // the other copies (not read)
	Cipher       uint32
	KeyData      [16]byte // the metadata key's first half
	PVUUID       [uuidSize]byte
	VGUUID       [uuidSize]byte // the logical volume group
}

// looksLikePV says whether b starts like a physical volume header (magic,
// version, block type), before any checksum.
func looksLikePV(b []byte) bool {
	return len(b) >= pvHeaderSize && b[88] == 'C' && b[89] == 'S' &&
		le16(b[8:]) == 1 && le16(b[10:]) == pvBlockType
}

// parsePVHeader reads and checks a physical volume header: errNoPV if b is
// not one, a *corruptError if it fails a check, an *unsupportedError for a
// cipher other than AES-XTS.
func parsePVHeader(b []byte) (*pvHeader, error) {
	if !looksLikePV(b) {
		return nil, errNoPV
	}
	b = b[:pvHeaderSize]
	if !checksumOK(b) {
		return nil, corrupt("the CoreStorage physical volume header fails its checksum")
	}
	if a := le32(b[90:]); a != checksumCRC32 {
		return nil, corrupt("the CoreStorage physical volume header names checksum algorithm %d, not CRC-32C (1)", a)
	}
	h := &pvHeader{
		Size:         le64(b[64:]),
		BlockSize:    le32(b[96:]),
		MetadataSize: le32(b[100:]),
		LabelBlock:   le64(b[104:]),
		Cipher:       le32(b[172:]),
	}
	for i := range h.OtherBlocks {
		h.OtherBlocks[i] = le64(b[112+8*i:])
	}
	copy(h.KeyData[:], b[176:192])
	copy(h.PVUUID[:], b[304:320])
	copy(h.VGUUID[:], b[320:336])
	bs := h.BlockSize
	switch {
	case bs < minBlockSize || bs > maxBlockSize || bs&(bs-1) != 0:
		return nil, corrupt("the CoreStorage physical volume has a block size of %d bytes (want a power of two from %d to %d)", bs, minBlockSize, maxBlockSize)
	case h.MetadataSize < mdBlockSize || h.MetadataSize > maxMetadataSize || h.MetadataSize%mdBlockSize != 0:
		return nil, corrupt("the CoreStorage physical volume has %d bytes of metadata (want a multiple of %d up to %d)", h.MetadataSize, mdBlockSize, maxMetadataSize)
	case h.Size < uint64(bs) || h.Size > 1<<62:
		return nil, corrupt("the CoreStorage physical volume claims %d bytes", h.Size)
	}
	if ks := le32(b[168:]); ks != 16 {
		return nil, unsupported("the CoreStorage metadata key is %d bytes (xtsctl reads 16, AES-XTS-128)", ks)
	}
	if h.Cipher != cipherAESXTS {
		return nil, unsupported("the CoreStorage physical volume uses cipher %d, not AES-XTS (2)", h.Cipher)
	}
	return h, nil
}

// blockOffset is block n in bytes from the volume's start, if it and
// length bytes after it lie inside the volume.
func (h *pvHeader) blockOffset(n uint64, length uint64) (int64, bool) {
	bs := uint64(h.BlockSize)
	if n > h.Size/bs {
		return 0, false
	}
	off := n * bs
	if length > h.Size-off {
		return 0, false
	}
	return int64(off), true
}

// mdHeader is the 64-byte header of a metadata block.
type mdHeader struct {
	Version     uint16
	Type        uint16
	Transaction uint64 // later transactions supersede earlier ones
	Object      uint64 // the object the block holds
	Number      uint64
	Size        uint32 // must be mdBlockSize
}

func parseMDHeader(b []byte) mdHeader {
	return mdHeader{
		Version:     le16(b[8:]),
		Type:        le16(b[10:]),
		Transaction: le64(b[16:]),
		Object:      le64(b[24:]),
		Number:      le64(b[32:]),
		Size:        le32(b[48:]),
	}
}

// checkMDBlock checks a metadata block's checksum and size field; what
// names it in messages.
func checkMDBlock(b []byte, what string) (mdHeader, error) {
	if len(b) != mdBlockSize {
		return mdHeader{}, corrupt("%s: %d bytes, not %d", what, len(b), mdBlockSize)
	}
	if !checksumOK(b) {
		return mdHeader{}, corrupt("%s fails its checksum", what)
	}
	h := parseMDHeader(b)
	if h.Size != mdBlockSize {
		return mdHeader{}, corrupt("%s claims %d bytes, not %d", what, h.Size, mdBlockSize)
	}
	return h, nil
}

// diskLabel is what this package reads of the disk label (block type
// 0x0011, the first metadata block of a copy).
type diskLabel struct {
	VGDOffset uint32 // of the volume groups descriptor, from the label's start
	XMLOffset uint32 // of the label's plist, from the label's start
	XMLSize   uint32
}

func parseDiskLabel(b []byte, pv *pvHeader) (*diskLabel, error) {
	h, err := checkMDBlock(b, "the CoreStorage disk label")
	if err != nil {
		return nil, err
	}
	if h.Type != labelType {
		return nil, corrupt("the CoreStorage disk label has block type %#04x, not %#04x", h.Type, labelType)
	}
	if ms := le32(b[64:]); ms != pv.MetadataSize {
		return nil, corrupt("the CoreStorage disk label gives %d bytes of metadata, the physical volume header %d", ms, pv.MetadataSize)
	}
	l := &diskLabel{VGDOffset: le32(b[220:]), XMLOffset: le32(b[224:]), XMLSize: le32(b[228:])}
	// The descriptor lies past the label's fixed part and inside the
	// metadata copy (48 bytes are read of it).
	if l.VGDOffset < 248 || uint64(l.VGDOffset)+vgdSize > uint64(pv.MetadataSize) {
		return nil, corrupt("the CoreStorage disk label puts the volume groups descriptor at byte %d of %d bytes of metadata", l.VGDOffset, pv.MetadataSize)
	}
	return l, nil
}

// vgdSize is what is read of the volume groups descriptor.
const vgdSize = 48

// vgDescriptor locates the encrypted metadata.
type vgDescriptor struct {
	EncBlocks uint64 // the area's size, in volume blocks
	EncFirst  uint64 // its first volume block
}

func parseVGDescriptor(b []byte) vgDescriptor {
	return vgDescriptor{EncBlocks: le64(b[8:]), EncFirst: le64(b[32:])}
}

// Encrypted metadata block types this package reads.
const (
	typeSegments   = 0x0305 // the logical volume's extents
	typeEncContext = 0x0019 // the encryption context plist
	typeLVInfo     = 0x001a // the logical volume's plist
	// Extent maps of CoreStorage versions this package does not read.
	typeSegments405 = 0x0405
	typeSegments505 = 0x0505
)

// segment is one extent of the logical volume, in volume blocks.
type segment struct {
	Logical  uint64 // first block in the logical volume
	Blocks   uint64
	Physical uint64 // first block in the physical volume
}

// parseSegments reads a 0x0305 block: u32 count at 64, 40-byte entries
// from 72 (u64 logical block at +8, u32 block count at +16, u32 physical
// block at +32, as libfvde and cryptsetup read them).
func parseSegments(b []byte) ([]segment, error) {
	n := le32(b[64:])
	if n == 0 || uint64(n) > uint64(mdBlockSize-segmentTableStart)/segmentEntrySize {
		return nil, corrupt("the extent map (block type %#04x) has %d entries (from 1 to %d)", typeSegments, n, (mdBlockSize-segmentTableStart)/segmentEntrySize)
	}
	segs := make([]segment, n)
	for i := range segs {
		e := b[segmentTableStart+i*segmentEntrySize:]
		segs[i] = segment{Logical: le64(e[8:]), Blocks: uint64(le32(e[16:])), Physical: uint64(le32(e[32:]))}
	}
	return segs, nil
}

// blockXML returns the plist in a metadata block: size bytes at off,
// which must lie after the header and inside the block, cut at the first
// NUL.
func blockXML(b []byte, off, size uint32, what string) ([]byte, error) {
	if off < mdHeaderSize || size == 0 || uint64(off)+uint64(size) > uint64(len(b)) {
		return nil, corrupt("%s: plist of %d bytes at byte %d of a %d-byte block", what, size, off, len(b))
	}
	x := b[off : off+size]
	for i, c := range x {
		if c == 0 {
			return x[:i], nil
		}
	}
	return x, nil
}

// encContextXML reads a 0x0019 block: compressed and uncompressed sizes
// at 104 and 108, the plist's offset and size at 112 and 116.
func encContextXML(b []byte) ([]byte, error) {
	if comp, plain := le32(b[104:]), le32(b[108:]); comp != plain {
		return nil, unsupported("the encryption context is compressed (%d bytes of %d): xtsctl reads uncompressed CoreStorage encryption contexts only", comp, plain)
	}
	return blockXML(b, le32(b[112:]), le32(b[116:]), "encryption context")
}

// lvInfoXML reads a 0x001a block: the plist's offset and size at 128 and
// 132.
func lvInfoXML(b []byte) ([]byte, error) {
	return blockXML(b, le32(b[128:]), le32(b[132:]), "logical volume description")
}
