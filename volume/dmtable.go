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

// Params formats the crypt target's parameters as the kernel parses them
// (Documentation/admin-guide/device-mapper/dm-crypt.rst):
//
//	<cipher> <key> <iv_offset> <device path> <offset> [<#opt_params> <opt_params>]
//
// key is the master key, or nil for KeyPlaceholder.
func (t CryptTarget) Params(key []byte, device string) string {
	k := KeyPlaceholder
	if key != nil {
		k = hex.EncodeToString(key)
	}
	s := fmt.Sprintf("%s %s %d %s %d", t.Cipher, k, t.IVOffset, device, t.Offset)
	if opt := t.OptParams(); len(opt) > 0 {
		s += fmt.Sprintf(" %d", len(opt))
		for _, o := range opt {
			s += " " + o
		}
	}
	return s
}

// Line formats the whole table line: 0 <length> crypt <params>.
func (t CryptTarget) Line(key []byte, device string) string {
	return fmt.Sprintf("0 %d crypt %s", t.Length, t.Params(key, device))
}
