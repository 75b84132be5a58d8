package luks

import (
	"encoding/binary"
	"fmt"
	"sort"
	"strings"
)

// LUKS1 on-disk layout (LUKS1 On-Disk Format Specification 1.2.3). All
// integers are big-endian; offsets of key material and of the payload
// count 512-byte sectors.
const (
	luks1HeaderSize   = 592
	luks1Slots        = 8
	luks1SlotBase     = 208
	luks1SlotSize     = 48
	luks1DigestSize   = 20
	luks1SlotActive   = 0x00AC71F3
	luks1SlotInactive = 0x0000DEAD
	saltLen1          = 32
)

func parseLUKS1(b []byte, devSize uint64) (*Header, error) {
	const where = "LUKS1 header"
	be32 := func(off int) uint32 { return binary.BigEndian.Uint32(b[off:]) }
	name, mode := cstring(b[8:40]), cstring(b[40:72])
	h := &Header{
		Version: 1,
		Hash:    strings.ToLower(cstring(b[72:104])),
		KeySize: int(be32(108)),
		UUID:    cstring(b[168:208]),
	}
	h.Cipher = name + "-" + mode
	payload := uint64(be32(104))
	if h.KeySize < 1 || h.KeySize > 512 {
		return nil, corrupt(where, "key size %d bytes", h.KeySize)
	}
	h.Segment = Segment{
		Type: "crypt", Offset: payload * 512, Dynamic: true,
		Cipher: h.Cipher, SectorSize: 512,
	}
	h.Segments = 1
	dIter := be32(164)
	if dIter == 0 {
		return nil, corrupt(where, "digest iterations are 0")
	}
	d := Digest{
		ID: 0, name: "0", Type: "pbkdf2", Hash: h.Hash, Iterations: dIter, Segments: []int{0},
		Salt:  append([]byte(nil), b[132:132+saltLen1]...),
		Value: append([]byte(nil), b[112:112+luks1DigestSize]...),
	}
	if hashByName(h.Hash) == nil {
		d.Err = &UnsupportedError{Feature: FeatureHash, Value: h.Hash, Keyslot: -1, Hint: supportedHashes, CryptsetupOpens: cryptsetupHash(h.Hash)}
	}

	// Every slot's area is checked, active or not, as cryptsetup does
	// (LUKS_check_keyslots): inside the header device, before the payload,
	// not over the header, not overlapping another slot.
	matSectors := uint64(afMaterialSize(h.KeySize, stripesLUKS) / 512)
	type area struct {
		slot       int
		start, end uint64 // sectors
	}
	var areas []area
	for i := 0; i < luks1Slots; i++ {
		s := b[luks1SlotBase+i*luks1SlotSize:]
		state, iter := binary.BigEndian.Uint32(s[0:]), binary.BigEndian.Uint32(s[4:])
		off, stripes := uint64(binary.BigEndian.Uint32(s[40:])), binary.BigEndian.Uint32(s[44:])
		slotWhere := fmt.Sprintf("LUKS1 keyslot %d", i)
		if stripes != stripesLUKS {
			return nil, corrupt(slotWhere, "%d AF stripes (cryptsetup reads only %d)", stripes, stripesLUKS)
		}
		if off*512 < luks1HeaderSize {
			return nil, corrupt(slotWhere, "key material at sector %d overlaps the header", off)
		}
		end := off + matSectors
		if payload != 0 && end > payload {
			return nil, corrupt(slotWhere, "key material (sectors %d..%d) runs into the data at sector %d", off, end, payload)
		}
		areas = append(areas, area{i, off, end})
		h.HeaderSize = max(h.HeaderSize, end*512)
		switch state {
		case luks1SlotInactive:
			continue
		case luks1SlotActive:
		default:
			return nil, corrupt(slotWhere, "state 0x%08x is neither active nor inactive", state)
		}
		k := Keyslot{
			ID: i, name: nameOf(i), pos: i, Type: "luks1", KeySize: h.KeySize, Priority: PriorityNormal,
			KDF:    KDF{Type: "pbkdf2", Hash: h.Hash, Iterations: iter, Salt: append([]byte(nil), s[8:8+saltLen1]...)},
			AF:     AF{Type: "luks1", Stripes: int(stripes), Hash: h.Hash},
			Area:   Area{Type: "raw", Offset: off * 512, Size: matSectors * 512, Cipher: h.Cipher, KeySize: h.KeySize},
			Digest: 0,
		}
		h.Keyslots = append(h.Keyslots, k)
		d.Keyslots = append(d.Keyslots, i)
	}
	sort.Slice(areas, func(i, j int) bool { return areas[i].start < areas[j].start })
	for i := 1; i < len(areas); i++ {
		if areas[i].start < areas[i-1].end {
			return nil, corrupt(fmt.Sprintf("LUKS1 keyslot %d", areas[i-1].slot), "key material overlaps keyslot %d", areas[i].slot)
		}
	}
	if h.HeaderSize > devSize {
		return nil, corrupt(where, "key material ends at byte %d, beyond the %d-byte header device", h.HeaderSize, devSize)
	}
	h.Digests = []Digest{d}
	h.indexDigests()
	h.checkSlots()
	return h, nil
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
