package fvault2

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// setSegments rewrites the sample's extent map (encrypted metadata block
// 0, type 0x0305) with segs, in the order given.
func setSegments(t *testing.T, path string, segs []segment) {
	t.Helper()
	editBlock(t, path, 0, func(b []byte) {
		flags := le32(b[segmentTableStart+20:]) // as macOS wrote it
		clear(b[64:])
		binary.LittleEndian.PutUint32(b[64:], uint32(len(segs)))
		for i, s := range segs {
			e := b[segmentTableStart+i*segmentEntrySize:]
			binary.LittleEndian.PutUint64(e[8:], s.Logical)
			binary.LittleEndian.PutUint32(e[16:], uint32(s.Blocks))
			binary.LittleEndian.PutUint32(e[20:], flags)
			binary.LittleEndian.PutUint32(e[32:], uint32(s.Physical))
		}
	})
}

// moveBlocks moves n volume blocks of the image from block from to block
// to (the destination is a hole of the sparse sample) and fills the old
// place with garbage, so that reading there gives the wrong plaintext.
func moveBlocks(t *testing.T, path string, from, to, n uint64) {
	t.Helper()
	const bs = 4096
	for i := uint64(0); i < n; i += 256 {
		m := min(256, n-i)
		b := readAt(t, path, int64((from+i)*bs), int(m*bs))
		if !bytes.Equal(b, make([]byte, len(b))) {
			writeFile(t, path, int64((to+i)*bs), b)
		}
	}
	writeFile(t, path, int64(from*bs), bytes.Repeat([]byte{0x5A}, bs))
}

// TestFragmentedLV moves the sample's real ciphertext into three extents
// in other places of the physical volume, listed out of order in the
// extent map: every sector keeps the tweak of its place in the logical
// volume, so the logical volume still decrypts to the sample's SHA-256.
// A tweak counted from the extent's own start, or a read from the old
// place, would not.
func TestFragmentedLV(t *testing.T) {
	const lvStart = sampleLVOffset / 4096 // 16384
	path := sampleImage(t)
	moveBlocks(t, path, lvStart+30000, 80000, 10960)
	moveBlocks(t, path, lvStart, 60000, 10000)
	setSegments(t, path, []segment{
		{Logical: 30000, Blocks: 10960, Physical: 80000},
		{Logical: 0, Blocks: 10000, Physical: 60000},
		{Logical: 10000, Blocks: 20000, Physical: lvStart + 10000},
	})
	h := openHeader(t, path)
	l := h.v.layout
	if l == nil {
		t.Fatalf("no layout: %v", h.v.unservable)
	}
	want := []struct{ off, src, iv int64 }{{0, 60000 * 4096, 0}, {10000 * 4096, (lvStart + 10000) * 4096, 80000}, {30000 * 4096, 80000 * 4096, 240000}}
	if len(l.Extents) != len(want) {
		t.Fatalf("%d extents: %+v", len(l.Extents), l.Extents)
	}
	for i, w := range want {
		e := l.Extents[i]
		if e.Offset != w.off || e.Source != w.src || int64(e.Sector.IVOffset) != w.iv {
			t.Errorf("extent %d: %+v, want offset %d source %d IV offset %d", i, e, w.off, w.src, w.iv)
		}
	}
	u, err := unlock(t, h, req(), samplePass)
	if err != nil {
		t.Fatal(err)
	}
	if sum, _ := decryptAll(t, path, u, false); sum != sampleLVSHA256 {
		t.Errorf("SHA-256 %s, want %s", sum, sampleLVSHA256)
	}
}

// TestContiguousExtentsMerge: extents that follow each other in the
// image as in the volume are served as one.
func TestContiguousExtentsMerge(t *testing.T) {
	const lvStart = sampleLVOffset / 4096
	path := sampleImage(t)
	setSegments(t, path, []segment{
		{Logical: 20000, Blocks: 20960, Physical: lvStart + 20000},
		{Logical: 0, Blocks: 20000, Physical: lvStart},
	})
	h := openHeader(t, path)
	if l := h.v.layout; l == nil || len(l.Extents) != 1 || l.Extents[0].Length != sampleLVSize {
		t.Fatalf("layout %+v (%v)", l, h.v.unservable)
	}
}

// TestExtentMapLongerThanVolume: extents past the logical volume's size
// are not served (and info says so); the last one that reaches into it
// is cut at the volume's end.
func TestExtentMapLongerThanVolume(t *testing.T) {
	const lvStart = sampleLVOffset / 4096
	path := sampleImage(t)
	setSegments(t, path, []segment{
		{Logical: 0, Blocks: 40000, Physical: lvStart},
		{Logical: 40000, Blocks: 2000, Physical: 90000},
		{Logical: 42000, Blocks: 10, Physical: 100000},
	})
	h := openHeader(t, path)
	l := h.v.layout
	if l == nil || len(l.Extents) != 2 || l.Extents[1].Length != 960*4096 || l.Size != sampleLVSize || len(h.v.warnings) != 1 {
		t.Fatalf("layout %+v, warnings %q (%v)", l, h.v.warnings, h.v.unservable)
	}
}
