package volume

import (
	"fmt"

	"github.com/xtsctl/xtsctl/internal/dmtable"
	"github.com/xtsctl/xtsctl/sector"
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

// CryptTable returns the dm-crypt mapping of a plain image of size bytes:
// everything after the offset, which must be a whole, non-zero number of
// sectors (as the FUSE backend requires too), with cryptsetup's --skip,
// --sector-size and --iv-large-sectors in dm-crypt's units.
func (p Plain) CryptTable(size int64) (dmtable.CryptTable, error) {
	if err := p.Check(); err != nil {
		return dmtable.CryptTable{}, err
	}
	data, ss := size-p.OffsetBytes(), int64(p.Sector.Size)
	switch {
	case data <= 0:
		return dmtable.CryptTable{}, fmt.Errorf("image is %d bytes: nothing after the offset of %d bytes", size, p.OffsetBytes())
	case data%ss != 0:
		return dmtable.CryptTable{}, fmt.Errorf("image holds %d bytes after the offset, not a whole number of %d-byte sectors", data, ss)
	}
	return dmtable.CryptTable{
		Cipher:         CipherName,
		Length:         uint64(data / 512),
		IVOffset:       p.Sector.IVOffset,
		Offset:         p.Offset,
		SectorSize:     p.Sector.Size,
		IVLargeSectors: p.Sector.IVMode == sector.Plain64LargeSectors,
	}, nil
}
