package volume

import (
	"testing"
)

// TestLayoutInvariants: for every combination, the areas are aligned as the
// format promises, in order, without overlap, and the header copies are in
// different 64 KiB blocks.
func TestLayoutInvariants(t *testing.T) {
	sizes := []int64{4096, 1 << 20, 2<<20 + 4096*3, 1 << 30, 1<<40 + 4096, 3 << 44}
	for _, size := range sizes {
		for _, ss := range []int{512, 1024, 2048, 4096} {
			for _, ts := range []int{0, 16, 32} {
				l, err := NewLayout(size, ss, ts)
				if err != nil {
					t.Fatalf("NewLayout(%d, %d, %d): %v", size, ss, ts, err)
				}
				if err := l.Check(); err != nil {
					t.Fatalf("%+v: Check: %v", l, err)
				}
				checkLayout(t, l)
			}
		}
	}
}

func checkLayout(t *testing.T, l Layout) {
	t.Helper()
	fail := func(what string) { t.Fatalf("%s: %+v", what, l) }
	if l.DataOffset%DataAlign != 0 {
		fail("data area not MiB-aligned")
	}
	if StateOffset < CopySize || BitmapOffset+l.bitmapLength() > l.DataOffset {
		fail("state area overlaps")
	}
	if l.bitmapLength()*8 < l.Regions() || l.bitmapLength()%4096 != 0 {
		fail("bitmap too small or not whole blocks")
	}
	end := l.DataOffset + l.DataLength
	if l.TagSize > 0 {
		if l.TagOffset%4096 != 0 || l.TagOffset < end || l.TagLength < l.Sectors()*int64(l.TagSize) || l.TagLength%4096 != 0 {
			fail("tag area misplaced")
		}
		end = l.TagOffset + l.TagLength
	} else if l.TagOffset != 0 || l.TagLength != 0 {
		fail("tag area without integrity")
	}
	if l.SecondaryOffset < end || l.SecondaryOffset%CopyRegion != 0 || l.Size != l.SecondaryOffset+CopyRegion {
		fail("secondary copy misplaced")
	}
	if l.SecondaryOffset/(64<<10) == 0 {
		fail("copies in the same 64 KiB")
	}
	if l.SectorOffset(uint64(l.Sectors()-1))+int64(l.SectorSize) != l.DataOffset+l.DataLength {
		fail("last sector")
	}
}

func TestLayoutSmallest(t *testing.T) {
	// 2 MiB of data, 4096-byte sectors, 32-byte tags: 1 MiB of metadata,
	// 2 MiB data, one 4 KiB tag block, then the secondary copy at the next
	// 64 KiB boundary.
	l, err := NewLayout(2<<20, 4096, 32)
	if err != nil {
		t.Fatal(err)
	}
	want := Layout{SectorSize: 4096, Integrity: IntegrityBLAKE2b, TagSize: 32, DataOffset: 1 << 20, DataLength: 2 << 20,
		TagOffset: 3 << 20, TagLength: 16384, StateLength: 8192 + 4096, RegionSize: 16 << 20,
		SecondaryOffset: 3<<20 + 64<<10, Size: 3<<20 + 128<<10}
	if l != want {
		t.Fatalf("layout\n got %+v\nwant %+v", l, want)
	}
}

func TestLayoutRejects(t *testing.T) {
	for _, c := range []struct {
		size   int64
		ss, ts int
	}{
		{0, 4096, 32}, {-4096, 4096, 32}, {4096 + 512, 4096, 32}, {4096, 768, 0}, {4096, 8192, 0},
		{4096, 4096, 8}, {4096, 4096, 64}, {1<<50 + 4096, 4096, 0},
	} {
		if _, err := NewLayout(c.size, c.ss, c.ts); err == nil {
			t.Errorf("NewLayout(%d, %d, %d) accepted", c.size, c.ss, c.ts)
		}
	}
	l, _ := NewLayout(1<<20, 4096, 16)
	bad := l
	bad.TagOffset += 4096
	if bad.Check() == nil {
		t.Error("moved tag area accepted")
	}
	bad = l
	bad.RegionSize = 3 << 20
	if bad.Check() == nil {
		t.Error("non-power-of-two region accepted")
	}
	bad = l
	bad.Integrity = IntegrityNone
	if bad.Check() == nil {
		t.Error("tags without integrity accepted")
	}
}

// TestCryptTable: the dm table line in dm-crypt's own units.
func TestCryptTable(t *testing.T) {
	l, _ := NewLayout(2<<20, 4096, 32)
	key := make([]byte, 64)
	for i := range key {
		key[i] = byte(i)
	}
	tt := l.CryptTable()
	tt.Key, tt.Device = key, "/dev/loop7"
	line, _ := tt.AppendLine(nil)
	got := string(line)
	want := "0 4096 crypt aes-xts-plain64 000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f 0 /dev/loop7 2048 1 sector_size:4096"
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	l, _ = NewLayout(1<<20, 512, 0)
	tt = l.CryptTable()
	tt.Device = "7:0"
	if got, want := tt.Template(), "0 2048 crypt aes-xts-plain64 <master-key> 0 7:0 2048"; got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}
