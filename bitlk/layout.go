package bitlk

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/xtsctl/xtsctl/disk"
	"github.com/xtsctl/xtsctl/sector"
)

// A method is a volume's encryption method (the metadata header's u16).
type method struct {
	id     uint16
	title  string
	cipher string // dm-crypt's name, registered with the disk layer
	fvek   int    // bytes of key in the FVEK datum
	key    int    // bytes of the dm-crypt key made from it
}

var methods = []method{
	{0x8000, "AES-CBC-128 with the Elephant diffuser", CipherCBCElephant, 64, 32},
	{0x8001, "AES-CBC-256 with the Elephant diffuser", CipherCBCElephant, 64, 64},
	{0x8002, "AES-CBC-128", CipherCBCEBOIV, 16, 16},
	{0x8003, "AES-CBC-256", CipherCBCEBOIV, 32, 32},
	{0x8004, "AES-XTS-128", disk.XTSPlain64, 32, 32},
	{0x8005, "AES-XTS-256", disk.XTSPlain64, 64, 64},
}

func lookupMethod(id uint16) (method, bool) {
	for _, m := range methods {
		if m.id == id {
			return m, true
		}
	}
	return method{}, false
}

// dmKey makes the dm-crypt key from the FVEK's key bytes. AES-128 with
// Elephant keeps its two 16-byte keys in 32-byte slots.
func (m method) dmKey(fvek []byte) []byte {
	k := make([]byte, 0, m.key)
	if m.id == 0x8000 {
		return append(append(k, fvek[:16]...), fvek[32:48]...)
	}
	return append(k, fvek[:m.key]...)
}

// layout maps the device as Windows sees it (and cryptsetup activates
// it): the image's whole size in sectors; the first hsize bytes are the
// boot sectors Windows moved to hoff when it encrypted the volume,
// decrypted with the tweaks of where they are; each 64 KiB metadata area
// and the moved boot sectors' own place read as zeros; everything else
// decrypts in place.
func (h *Header) layout(imageSize int64) (disk.Layout, error) {
	m := h.meta
	ss := int64(h.boot.sectorSize)
	meth, _ := lookupMethod(m.method)
	if m.volHeader == nil {
		return disk.Layout{}, fmt.Errorf("the metadata does not say where the boot sectors were moved")
	}
	hoff, hsize := m.volHeader[0], m.volHeader[1]
	if hoff != m.headerOffset || uint64(m.headerSectors)*uint64(ss) != hsize {
		return disk.Layout{}, fmt.Errorf("the metadata disagrees on the moved boot sectors: %d bytes at byte %d, or %d sectors at byte %d",
			hsize, hoff, m.headerSectors, m.headerOffset)
	}
	size := imageSize - imageSize%ss
	type area struct{ off, len int64 }
	var zero []area
	for i, o := range h.boot.offsets {
		zero = append(zero, area{o, metadataArea})
		if o < 0 || o%ss != 0 || o > size-metadataArea {
			return disk.Layout{}, fmt.Errorf("metadata copy %d at byte %d is not a whole-sector area inside the %d-byte device", i, uint64(o), size)
		}
	}
	if hsize == 0 || hsize%uint64(ss) != 0 || hoff%uint64(ss) != 0 || hsize > uint64(size) || hoff > uint64(size)-hsize {
		return disk.Layout{}, fmt.Errorf("the moved boot sectors (%d bytes at byte %d) are not whole sectors inside the %d-byte device", hsize, hoff, size)
	}
	zero = append(zero, area{int64(hoff), int64(hsize)})
	slices.SortFunc(zero, func(a, b area) int { return cmp.Compare(a.off, b.off) })
	for i, z := range zero {
		if z.off < int64(hsize) {
			return disk.Layout{}, fmt.Errorf("a metadata area (byte %d) lies among the first %d bytes, where the boot sectors go back", z.off, hsize)
		}
		if i > 0 && z.off < zero[i-1].off+zero[i-1].len {
			return disk.Layout{}, fmt.Errorf("the metadata areas at bytes %d and %d overlap", zero[i-1].off, z.off)
		}
	}

	params := func(at int64) sector.Params {
		p := sector.Params{Size: int(ss), IVOffset: uint64(at) / 512}
		if ss != 512 {
			p.IVMode = sector.Plain64LargeSectors
		}
		return p
	}
	l := disk.Layout{
		Size: size, SectorSize: int(ss), Cipher: meth.cipher, KeyBits: 8 * meth.key,
		ReadOnly: "BitLocker images are served read-only: xtsctl does not write them",
	}
	l.Extents = append(l.Extents, disk.Extent{Offset: 0, Length: int64(hsize), Kind: disk.Crypt, Source: int64(hoff), Sector: params(int64(hoff))})
	at := int64(hsize)
	for _, z := range zero {
		if z.off > at {
			l.Extents = append(l.Extents, disk.Extent{Offset: at, Length: z.off - at, Kind: disk.Crypt, Source: at, Sector: params(at)})
		}
		l.Extents = append(l.Extents, disk.Extent{Offset: z.off, Length: z.len, Kind: disk.Zero})
		at = z.off + z.len
	}
	if at < size {
		l.Extents = append(l.Extents, disk.Extent{Offset: at, Length: size - at, Kind: disk.Crypt, Source: at, Sector: params(at)})
	}
	if err := l.Check(imageSize); err != nil {
		return disk.Layout{}, err
	}
	return l, nil
}
