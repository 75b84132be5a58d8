package inplace

import (
	"bytes"
	"testing"
)

// FuzzAnchor: an anchor that parses re-encodes to the same bytes (one
// encoding each), and nothing panics on what an image may hold.
func FuzzAnchor(f *testing.F) {
	a := &anchor{Version: formatVer, Kind: KindVolume, Direction: Encrypt, Mode: modeShift, Length: 3 << 20, Dest: 1 << 20,
		OrigSize: 3 << 20, FinalSize: 5 << 20, Zone: 1 << 20, SectorSize: 4096, HeaderOff: 4 << 20, Records: 5<<20 - runArea}
	f.Add(a.marshal())
	p := &anchor{Version: 1, Kind: KindPlain, Direction: Decrypt, Mode: modeJournal, Length: 5 << 20, Source: 4096, OrigSize: 5<<20 + 4096,
		FinalSize: 5 << 20, Zone: 16 << 20, SectorSize: 512, IVMode: 1, IVOffset: 9, Offset: 8, Records: journalRecords, DataSlots: journalData}
	f.Add(p.marshal())
	f.Fuzz(func(t *testing.T, b []byte) {
		a, _, err := parseAnchor(b)
		if err != nil {
			return
		}
		if !bytes.Equal(a.marshal(), b) {
			t.Fatal("an anchor that parsed re-encodes differently")
		}
	})
}

// FuzzRecord: parsing a record under the right key never panics and never
// accepts one whose MAC was not made with the key; what it accepts
// re-encodes to the same bytes.
func FuzzRecord(f *testing.F) {
	a := &anchor{Version: formatVer, Kind: KindPlain, Direction: Encrypt, Mode: modeJournal, Length: 5 << 20, OrigSize: 5 << 20,
		FinalSize: 5 << 20, Zone: 2 << 20, SectorSize: 512, Records: journalRecords, DataSlots: journalData}
	_, asum, err := parseAnchor(a.marshal())
	if err != nil {
		f.Fatal(err)
	}
	keys := newRunKeys(testKey)
	for _, r := range []record{{Sequence: 0, Next: 0}, {Sequence: 3, Next: 1, HasData: true, DataLen: 2 << 20}, {Sequence: 4, Next: 2, Sealed: []byte("sealed")},
		{Sequence: 5, Next: 1, AheadOff: 2 << 20, AheadLen: 2 << 20, AheadMAC: [macSize]byte{7}},
		{Sequence: 6, Next: 3, Finished: true, SampleLen: 64 << 10, EndOff: 5<<20 - 64<<10, EndLen: 64 << 10, EndMAC: [macSize]byte{9}}} {
		b, err := r.marshal(a, asum, keys)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, int(r.Sequence%2))
	}
	f.Fuzz(func(t *testing.T, b []byte, slot int) {
		if len(b) != blockSize || slot < 0 || slot > 1 {
			return
		}
		r, err := parseRecord(b, slot, a, asum, keys)
		if err != nil || r == nil {
			return
		}
		back, err := r.marshal(a, asum, keys)
		if err != nil || !bytes.Equal(back, b) {
			t.Fatal("a record that parsed re-encodes differently")
		}
	})
}
