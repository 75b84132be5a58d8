package volume

import (
	"encoding/hex"
	"fmt"

	"github.com/xtsctl/xtsctl/sector"
)

// CryptTarget is the dm-crypt mapping of a volume's data area, or of a
// plain image: what cryptsetup open --type plain --cipher aes-xts-plain64
// --offset Offset [--skip IVOffset] [--sector-size SectorSize]
// [--iv-large-sectors] sets up with the key. All counts are in the
// kernel's 512-byte sectors, whatever the sector size.
type CryptTarget struct {
	Length     uint64 // sectors of the mapped device
	Cipher     string // the dm cipher spec: aes-xts-plain64
	IVOffset   uint64 // added to every tweak: 0 for volumes (tweaks count from the data area's start)
	Offset     uint64 // first sector of the data area on the underlying device
	SectorSize int    // encryption unit in bytes; above 512 it becomes sector_size:N
	// IVLargeSectors counts tweaks in SectorSize units (iv_large_sectors);
	// plain images only. With 512-byte sectors it changes nothing and is
	// left out of the line.
	IVLargeSectors bool
}

// KeyPlaceholder stands for the master key in a table printed without it.
// It is not hex, so the line cannot be loaded by mistake with a wrong key.
const KeyPlaceholder = "<master-key>"

// CryptTarget returns the dm-crypt mapping of the data area.
func (l Layout) CryptTarget() CryptTarget {
	return CryptTarget{
		Length:     uint64(l.DataLength / 512),
		Cipher:     CipherName,
		IVOffset:   0,
		Offset:     uint64(l.DataOffset / 512),
		SectorSize: l.SectorSize,
	}
}

// CryptTarget returns the dm-crypt mapping of a plain image of size bytes:
// everything after the offset, which must be a whole, non-zero number of
// sectors (as the FUSE backend requires too).
func (p Plain) CryptTarget(size int64) (CryptTarget, error) {
	if err := p.Check(); err != nil {
		return CryptTarget{}, err
	}
	data, ss := size-p.OffsetBytes(), int64(p.Sector.Size)
	switch {
	case data <= 0:
		return CryptTarget{}, fmt.Errorf("image is %d bytes: nothing after the offset of %d bytes", size, p.OffsetBytes())
	case data%ss != 0:
		return CryptTarget{}, fmt.Errorf("image holds %d bytes after the offset, not a whole number of %d-byte sectors", data, ss)
	}
	return CryptTarget{
		Length:         uint64(data / 512),
		Cipher:         CipherName,
		IVOffset:       p.Sector.IVOffset,
		Offset:         p.Offset,
		SectorSize:     p.Sector.Size,
		IVLargeSectors: p.Sector.IVMode == sector.Plain64LargeSectors,
	}, nil
}

// OptParams returns the target's optional parameters: none, or
// sector_size:N and then iv_large_sectors, in the order dm-crypt prints
// them back.
func (t CryptTarget) OptParams() []string {
	if t.SectorSize <= 512 {
		return nil
	}
	opts := []string{fmt.Sprintf("sector_size:%d", t.SectorSize)}
	if t.IVLargeSectors {
		opts = append(opts, "iv_large_sectors")
	}
	return opts
}

// AppendParams appends the crypt target's parameters as the kernel parses
// them (Documentation/admin-guide/device-mapper/dm-crypt.rst):
//
//	<cipher> <key> <iv_offset> <device path> <offset> [<#opt_params> <opt_params>]
//
// key is the master key, or nil for KeyPlaceholder. Building into a byte
// slice lets a caller wipe a line that holds the key.
func (t CryptTarget) AppendParams(dst, key []byte, device string) []byte {
	dst = append(dst, t.Cipher...)
	dst = append(dst, ' ')
	if key == nil {
		dst = append(dst, KeyPlaceholder...)
	} else {
		dst = hex.AppendEncode(dst, key)
	}
	dst = fmt.Appendf(dst, " %d %s %d", t.IVOffset, device, t.Offset)
	if opt := t.OptParams(); len(opt) > 0 {
		dst = fmt.Appendf(dst, " %d", len(opt))
		for _, o := range opt {
			dst = append(dst, ' ')
			dst = append(dst, o...)
		}
	}
	return dst
}

// AppendLine appends the whole table line: 0 <length> crypt <params>.
func (t CryptTarget) AppendLine(dst, key []byte, device string) []byte {
	dst = fmt.Appendf(dst, "0 %d crypt ", t.Length)
	return t.AppendParams(dst, key, device)
}

// Line is AppendLine as a string (for a line without the key).
func (t CryptTarget) Line(key []byte, device string) string {
	return string(t.AppendLine(nil, key, device))
}
