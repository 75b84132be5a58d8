package volume

import (
	"github.com/xtsctl/xtsctl/internal/dmtable"
)

// CryptTable returns the dm-crypt mapping of the data area, without its
// key and device (the caller fills them in): what cryptsetup open --type
// plain --cipher aes-xts-plain64 --offset DATA_OFFSET/512 [--sector-size
// S] sets up with the master key. dmtable.CryptTable is the one writer
// of table lines.
func (l Layout) CryptTable() dmtable.CryptTable {
	return dmtable.CryptTable{
		Cipher:     CipherName,
		Length:     uint64(l.DataLength / 512),
		Offset:     uint64(l.DataOffset / 512),
		SectorSize: l.SectorSize,
	}
}
