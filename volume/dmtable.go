package volume

import (
	"encoding/hex"
	"fmt"
)

// CryptTarget is the dm-crypt mapping of a volume's data area: what
// cryptsetup open --type plain --cipher aes-xts-plain64 --offset Offset
// [--sector-size SectorSize] sets up with the master key. All counts are in
// the kernel's 512-byte sectors, whatever the volume's sector size.
type CryptTarget struct {
	Length     uint64 // sectors of the mapped device
	Cipher     string // the dm cipher spec: aes-xts-plain64
	IVOffset   uint64 // added to every tweak: 0 (tweaks count from the data area's start)
	Offset     uint64 // first sector of the data area on the underlying device
	SectorSize int    // encryption unit in bytes; above 512 it becomes sector_size:N
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

// OptParams returns the target's optional parameters (none, or
// sector_size:N).
func (t CryptTarget) OptParams() []string {
	if t.SectorSize > 512 {
		return []string{fmt.Sprintf("sector_size:%d", t.SectorSize)}
	}
	return nil
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
