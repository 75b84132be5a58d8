package disk

import (
	"fmt"

	"github.com/xtsctl/xtsctl/internal/dmtable"
	"github.com/xtsctl/xtsctl/internal/words"
	"github.com/xtsctl/xtsctl/sector"
)

// CryptTable is the dm-crypt table that maps l, without its key and
// device (the caller fills them in): one crypt target over the one Crypt
// extent. A layout of several extents, or a cipher dm-crypt names
// otherwise, is refused: the kernel's dm-crypt cannot serve it as one
// target (ErrUnsupported).
func (l *Layout) CryptTable() (dmtable.CryptTable, error) {
	if len(l.Extents) != 1 || l.Extents[0].Kind != Crypt {
		return dmtable.CryptTable{}, WithKind(KindInput, fmt.Errorf("a layout of %s is not one dm-crypt target: %w", words.Plural(int64(len(l.Extents)), "extent"), ErrUnsupported))
	}
	e := l.Extents[0]
	if e.Source%512 != 0 || e.Length%512 != 0 {
		return dmtable.CryptTable{}, WithKind(KindInput, fmt.Errorf("data at byte %d is not in 512-byte units: %w", e.Source, ErrUnsupported))
	}
	t := dmtable.CryptTable{
		Cipher:         l.Cipher,
		Offset:         uint64(e.Source / 512),
		Length:         uint64(e.Length / 512),
		IVOffset:       e.Sector.IVOffset,
		SectorSize:     e.Sector.Size,
		IVLargeSectors: e.Sector.IVMode == sector.Plain64LargeSectors,
	}
	for _, o := range l.DMOptions {
		if !t.SetOption(o) {
			return dmtable.CryptTable{}, WithKind(KindInput, fmt.Errorf("dm-crypt option %q: %w", o, ErrUnsupported))
		}
	}
	return t, nil
}

// A Mapper is a Header whose layout is known without the key (our volume,
// LUKS, plain mode), so that info shows its dm-crypt table.
type Mapper interface {
	Layout() (Layout, error)
}
