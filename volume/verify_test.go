package volume

import (
	"context"
	"testing"
)

// TestVerifyDirtyRegion: on a volume not closed cleanly, Verify marks the
// bad sectors in the regions being written, and only those.
func TestVerifyDirtyRegion(t *testing.T) {
	const ss = 4096
	ctx := context.Background()
	dev := &memDevice{}
	h, _, err := Create(ctx, dev, zeroReader{}, 192<<10,
		CreateOptions{SectorSize: ss, TagSize: 32, RegionSize: 64 << 10, Passphrase: testPass}, nil)
	if err != nil {
		t.Fatal(err)
	}
	inDirty, outside := uint64(20), uint64(40) // regions 1 and 2
	v := mustOpen(t, dev, false)
	if err := v.markRegions(1); err != nil {
		t.Fatal(err)
	}
	crashed := dev.clone() // killed with region 1 marked
	v.Close()
	for _, n := range []uint64{inDirty, outside} {
		crashed.b[h.TagOffset+int64(n)*32] ^= 0xff
	}
	verify := func(d *memDevice) map[uint64]bool {
		t.Helper()
		w := mustOpen(t, d, true)
		defer w.Close()
		got := map[uint64]bool{}
		res, err := w.Verify(ctx, nil, func(b BadSector) { got[b.Sector] = b.DirtyRegion })
		if err != nil || res.BadSectors != 2 {
			t.Fatalf("Verify: %+v, %v", res, err)
		}
		return got
	}
	if got := verify(crashed); len(got) != 2 || !got[inDirty] || got[outside] {
		t.Fatalf("crashed volume: bad sectors (dirty region?) %v", got)
	}
	// Closed cleanly: no sector is in a region being written.
	clean := dev.clone()
	for _, n := range []uint64{inDirty, outside} {
		clean.b[h.TagOffset+int64(n)*32] ^= 0xff
	}
	if got := verify(clean); len(got) != 2 || got[inDirty] || got[outside] {
		t.Fatalf("clean volume: bad sectors (dirty region?) %v", got)
	}
}

// zeroReader reads as zeros everywhere.
type zeroReader struct{}

func (zeroReader) ReadAt(p []byte, _ int64) (int, error) {
	clear(p)
	return len(p), nil
}
