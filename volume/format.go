package volume

import (
	"errors"
	"fmt"

	"github.com/xtsctl/xtsctl/internal/dmtable"
	"github.com/xtsctl/xtsctl/sector"
)

// The xtsctl volume format, byte by byte in docs/FORMAT.md. Every integer
// on disk is little-endian. Version 2 differs from version 1 only in its
// state area, which it authenticates; this code reads both, writes version
// 2, and upgrades a version-1 volume on its first read-write session
// (Volume.Upgrade).
const (
	Magic      = "XTSCTLVL" // first 8 bytes of each header copy
	Version    = 2          // the version this code writes
	minVersion = 1          // the oldest version it reads

	HeaderBlockSize = 4096                                // the header fields and their checksums
	SlotSize        = 512                                 // one key slot
	MaxSlots        = 8                                   // key slots per header copy
	CopySize        = HeaderBlockSize + MaxSlots*SlotSize // one header copy: block + slot area
	CopyRegion      = 64 << 10                            // space reserved for each copy
	StateRecordSize = 4096                                // one of the two state records
	StateOffset     = CopyRegion                          // the state area follows the primary copy
	BitmapOffset    = StateOffset + 2*StateRecordSize     // dirty-region bitmap
	DataAlign       = 1 << 20                             // the data area starts on a MiB boundary
	DefaultRegion   = 16 << 20                            // bytes of data per dirty-region bit
	CipherName      = dmtable.DefaultCipher               // aes-xts-plain64: the only cipher of versions 1 and 2
	maxDataLength   = int64(1) << 50                      // 1 PiB: keeps every offset far from int64 overflow
	slotAreaOffset  = HeaderBlockSize                     // slots follow the header block in a copy
	tagAlign        = 4096                                // the tag area starts on a 4 KiB boundary
	bitmapAlign     = 4096                                // the bitmap is whole 4 KiB blocks
	stateAreaFixed  = BitmapOffset - StateOffset          // the two state records
	maxRegions      = 1 << 26                             // an 8 MiB bitmap: 1 PiB of data in 16 MiB regions
)

// Integrity is the per-sector integrity mode.
type Integrity uint32

const (
	IntegrityNone    Integrity = 0 // no tags: XTS alone (confidentiality only)
	IntegrityBLAKE2b Integrity = 1 // a keyed BLAKE2b tag per sector
)

func (m Integrity) String() string {
	switch m {
	case IntegrityNone:
		return "none"
	case IntegrityBLAKE2b:
		return "blake2b"
	}
	return fmt.Sprintf("Integrity(%d)", uint32(m))
}

// Layout says where everything lives in a volume, in bytes from its start.
//
//	[0, CopyRegion)                       primary header copy
//	[StateOffset, +StateLength)           two state records, then the dirty-region bitmap
//	[DataOffset, +DataLength)             data area: aes-xts-plain64, dm-crypt compatible
//	[TagOffset, +TagLength)               one tag per data sector (absent without integrity)
//	[SecondaryOffset, +CopyRegion)        secondary header copy, ending the volume
//
// The two header copies are at opposite ends of the volume: an overwrite of
// its start (a stray mkfs, a partition table) or of its end leaves one.
type Layout struct {
	SectorSize      int       // data unit of XTS and of the tags: 512..4096
	Integrity       Integrity // tag mode
	TagSize         int       // bytes per tag: 16 or 32, 0 without integrity
	DataOffset      int64     // multiple of DataAlign
	DataLength      int64     // multiple of SectorSize, > 0
	TagOffset       int64     // multiple of 4096; 0 without integrity
	TagLength       int64     // multiple of 4096; 0 without integrity
	StateLength     int64     // state records + bitmap, from StateOffset
	RegionSize      int64     // data bytes per bitmap bit: a power of two, a multiple of SectorSize
	SecondaryOffset int64     // multiple of CopyRegion
	Size            int64     // total bytes: SecondaryOffset + CopyRegion
}

// NewLayout lays out a volume holding dataLength bytes of plaintext, with
// the default dirty-region size. tagSize is 16 or 32 with integrity, 0
// without.
func NewLayout(dataLength int64, sectorSize, tagSize int) (Layout, error) {
	return computeLayout(dataLength, sectorSize, tagSize, DefaultRegion)
}

func computeLayout(dataLength int64, sectorSize, tagSize int, regionSize int64) (Layout, error) {
	l := Layout{SectorSize: sectorSize, DataLength: dataLength, TagSize: tagSize, RegionSize: regionSize}
	if tagSize != 0 {
		l.Integrity = IntegrityBLAKE2b
	}
	if err := sector.CheckSize(sectorSize); err != nil {
		return Layout{}, err
	}
	if err := checkTagSize(l.Integrity, tagSize); err != nil {
		return Layout{}, err
	}
	switch {
	case dataLength <= 0:
		return Layout{}, fmt.Errorf("volume size must be positive, not %d", dataLength)
	case dataLength > maxDataLength:
		return Layout{}, fmt.Errorf("volume size %d is larger than the 1 PiB maximum", dataLength)
	case dataLength%int64(sectorSize) != 0:
		return Layout{}, fmt.Errorf("volume size %d is not a whole number of %d-byte sectors", dataLength, sectorSize)
	case regionSize < 4096 || regionSize > 1<<40 || regionSize&(regionSize-1) != 0:
		return Layout{}, fmt.Errorf("dirty-region size %d is not a power of two between 4 KiB and 1 TiB", regionSize)
	case regionSize%int64(sectorSize) != 0:
		return Layout{}, fmt.Errorf("dirty-region size %d is not a multiple of the sector size %d", regionSize, sectorSize)
	case (dataLength+regionSize-1)/regionSize > maxRegions:
		// The bitmap is held in memory and authenticated as a whole.
		return Layout{}, fmt.Errorf("dirty-region size %d makes more than %d regions", regionSize, maxRegions)
	}
	l.StateLength = stateAreaFixed + roundUp((l.Regions()+7)/8, bitmapAlign)
	l.DataOffset = roundUp(StateOffset+l.StateLength, DataAlign)
	end := l.DataOffset + dataLength
	if l.Integrity != IntegrityNone {
		l.TagOffset = roundUp(end, tagAlign)
		l.TagLength = roundUp(l.Sectors()*int64(tagSize), tagAlign)
		end = l.TagOffset + l.TagLength
	}
	l.SecondaryOffset = roundUp(end, CopyRegion)
	l.Size = l.SecondaryOffset + CopyRegion
	return l, nil
}

// Check validates a layout read from a header: it must be exactly what
// NewLayout computes from its data length, sector size, tag size and region
// size, so that a header cannot describe overlapping or misplaced areas.
func (l Layout) Check() error {
	want, err := computeLayout(l.DataLength, l.SectorSize, l.TagSize, l.RegionSize)
	if err != nil {
		return err
	}
	if l.Integrity != want.Integrity {
		return fmt.Errorf("integrity mode %v does not match tag size %d", l.Integrity, l.TagSize)
	}
	if l != want {
		return errors.New("the header's areas are not where its sizes put them")
	}
	return nil
}

func checkTagSize(m Integrity, tagSize int) error {
	switch m {
	case IntegrityNone:
		if tagSize != 0 {
			return fmt.Errorf("tag size %d given without integrity", tagSize)
		}
	case IntegrityBLAKE2b:
		if tagSize != 16 && tagSize != 32 {
			return fmt.Errorf("unsupported tag size %d (want 16 or 32)", tagSize)
		}
	default:
		return fmt.Errorf("unknown integrity mode %d", uint32(m))
	}
	return nil
}

// Sectors is the number of data sectors.
func (l Layout) Sectors() int64 { return l.DataLength / int64(l.SectorSize) }

// Regions is the number of dirty regions (bits of the bitmap).
func (l Layout) Regions() int64 { return (l.DataLength + l.RegionSize - 1) / l.RegionSize }

// sectorsPerRegion is the number of data sectors one bitmap bit covers.
func (l Layout) sectorsPerRegion() int64 { return l.RegionSize / int64(l.SectorSize) }

// SectorOffset is the byte offset in the volume of data sector n.
func (l Layout) SectorOffset(n uint64) int64 { return l.DataOffset + int64(n)*int64(l.SectorSize) }

// TagPosition is the byte offset in the volume of the tag of data sector n.
func (l Layout) TagPosition(n uint64) int64 { return l.TagOffset + int64(n)*int64(l.TagSize) }

// bitmapLength is the size of the dirty-region bitmap in bytes.
func (l Layout) bitmapLength() int64 { return l.StateLength - stateAreaFixed }

// sectorParams are the dm-crypt parameters of the data area: tweaks count
// 512-byte units from its start whatever the sector size, iv_offset 0.
func (l Layout) sectorParams() sector.Params {
	return sector.Params{Size: l.SectorSize, IVMode: sector.Plain64, IVOffset: 0}
}

func roundUp(n, m int64) int64 { return (n + m - 1) / m * m }
