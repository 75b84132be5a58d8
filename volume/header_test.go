package volume

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/xtsctl/xtsctl/blake2b"
)

// primaryCopy returns the primary header copy of a volume.
func primaryCopy(dev *memDevice) []byte { return bytes.Clone(dev.b[:CopySize]) }

// resum recomputes the checksums of a header copy after a test edited it,
// so that the edit reaches the field checks.
func resum(b []byte) {
	s := blake2b.Sum256(b[slotAreaOffset:CopySize])
	copy(b[offSlotChecksum:], s[:])
	c := blake2b.Sum512(b[:offChecksum])
	copy(b[offChecksum:], c[:])
}

// seedHeaders returns header copies of volumes made with each option.
func seedHeaders(t testing.TB) [][]byte {
	var seeds [][]byte
	for _, c := range []struct{ ss, ts, ks int }{{4096, 32, 64}, {512, 16, 32}, {1024, 0, 64}} {
		dev, _ := newTestVolume(t, make([]byte, 64<<10), c.ss, c.ts, c.ks)
		seeds = append(seeds, primaryCopy(dev))
	}
	return seeds
}

func TestHeaderRoundTrip(t *testing.T) {
	for _, b := range seedHeaders(t) {
		h, err := ParseHeader(b)
		if err != nil {
			t.Fatal(err)
		}
		out, err := h.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out, b) {
			t.Fatal("marshal(parse(b)) != b")
		}
		if h.Label != "test" || h.Generation != 1 || len(h.ActiveSlots()) != 1 || h.Flags != FlagDigest {
			t.Fatalf("unexpected header %+v", h)
		}
	}
}

// TestGoldenHeadersRoundTrip: the headers of testimages/v1, three written
// by the independent scripts/volume_ref.py, parse and marshal back byte for
// byte: both implementations produce the one canonical encoding.
func TestGoldenHeadersRoundTrip(t *testing.T) {
	for _, name := range []string{"disk-4096.vol", "disk-512-aes128-tag16.vol", "disk-xtsctl-nointegrity.vol"} {
		img, err := os.ReadFile(filepath.Join("../testimages/v1", name))
		if err != nil {
			t.Fatal(err)
		}
		h, err := ParseHeader(img[:CopySize])
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out, _ := h.MarshalBinary()
		sec := img[h.SecondaryOffset : h.SecondaryOffset+CopySize]
		if !bytes.Equal(out, img[:CopySize]) || !bytes.Equal(out, sec) {
			t.Fatalf("%s: marshal(parse(header)) differs from the image's copies", name)
		}
	}
}

// TestHeaderEveryBitFlip: a single flipped bit of the header block or of
// the key slot area makes the copy invalid, and names why. Every bit of the
// fields, the checksums and slot 0 is tried, and a bit in every 16 bytes of
// the reserved and empty areas.
func TestHeaderEveryBitFlip(t *testing.T) {
	orig := seedHeaders(t)[0]
	for i := range CopySize * 8 {
		if off := i / 8; (off >= offReserved && off < offMAC || off >= slotAreaOffset+SlotSize) && i%128 != off%8 {
			continue
		}
		b := bytes.Clone(orig)
		b[i/8] ^= 1 << (i % 8)
		_, err := ParseHeader(b)
		var sa *SlotAreaError
		var ve *VersionError
		switch off := i / 8; {
		case err == nil:
			t.Fatalf("bit %d flipped: accepted", i)
		case off < 8:
			if !errors.Is(err, ErrNotVolume) {
				t.Fatalf("bit %d (magic): %v", i, err)
			}
		case off < 12:
			if !errors.As(err, &ve) {
				t.Fatalf("bit %d (version): %v", i, err)
			}
		case off < HeaderBlockSize:
			if !errors.Is(err, ErrHeaderChecksum) {
				t.Fatalf("bit %d (block): %v", i, err)
			}
		case off < slotAreaOffset+SlotSize: // slot 0 is the only active one
			if !errors.As(err, &sa) || len(sa.Damaged) != 1 || sa.Damaged[0] != 0 {
				t.Fatalf("bit %d (slot 0): %v", i, err)
			}
		default: // an empty slot with a bit set is damaged too
			if !errors.As(err, &sa) || len(sa.Damaged) != 1 || sa.Damaged[0] != (off-slotAreaOffset)/SlotSize {
				t.Fatalf("bit %d (slot %d): %v", i, (off-slotAreaOffset)/SlotSize, err)
			}
		}
	}
}

// TestHeaderRejectsNonCanonical: fields that are wrong but checksummed
// (as a buggy or hostile writer would produce) are refused by name.
func TestHeaderRejectsNonCanonical(t *testing.T) {
	orig := seedHeaders(t)[0]
	edits := map[string]func(b []byte){
		"future version":   func(b []byte) { put32(b, offVersion, Version+1) },
		"cipher":           func(b []byte) { copy(b[offCipher:], "aes-cbc-essiv") },
		"key size":         func(b []byte) { put32(b, offKeySize, 48) },
		"sector size":      func(b []byte) { put32(b, offSectorSize, 8192) },
		"tag size":         func(b []byte) { put32(b, offTagSize, 24) },
		"integrity none":   func(b []byte) { put32(b, offIntegrity, 0) },
		"data offset":      func(b []byte) { put64(b, offDataOffset, 2<<20) },
		"data length":      func(b []byte) { put64(b, offDataLength, 100) },
		"secondary":        func(b []byte) { put64(b, offSecondary, le64(b, offSecondary)+CopyRegion) },
		"volume size":      func(b []byte) { put64(b, offVolumeSize, le64(b, offVolumeSize)-1) },
		"state offset":     func(b []byte) { put64(b, offStateOffset, 0) },
		"slot count":       func(b []byte) { put32(b, offSlotCount, 16) },
		"unknown flag":     func(b []byte) { put32(b, offFlags, 1<<7|FlagDigest) },
		"digest unflagged": func(b []byte) { put32(b, offFlags, 0) },
		"reserved":         func(b []byte) { b[offReserved+5] = 1 },
		"label garbage":    func(b []byte) { b[offLabel+10] = 'x' },
		"label utf8":       func(b []byte) { b[offLabel] = 0xff },
		"zero uuid":        func(b []byte) { clear(b[offUUID : offUUID+16]) },
		"slot kdf":         func(b []byte) { editSlot(b, 0, func(s []byte) { put32(s, slotOffKDF, 2) }) },
		"slot memory":      func(b []byte) { editSlot(b, 0, func(s []byte) { put32(s, slotOffMemory, 5<<20) }) },
		"slot reserved":    func(b []byte) { editSlot(b, 0, func(s []byte) { s[300] = 1 }) },
		"slot state":       func(b []byte) { editSlot(b, 0, func(s []byte) { put32(s, slotOffState, 2) }) },
	}
	for name, edit := range edits {
		b := bytes.Clone(orig)
		edit(b)
		resum(b)
		if h, err := ParseHeader(b); err == nil {
			t.Errorf("%s: accepted (%+v)", name, h.Layout)
		}
	}
}

// editSlot edits slot i and fixes its own checksum.
func editSlot(b []byte, i int, edit func(s []byte)) {
	s := b[slotAreaOffset+i*SlotSize:][:SlotSize]
	edit(s)
	sum := blake2b.Sum256(s[:slotOffChecksum])
	copy(s[slotOffChecksum:], sum[:])
}

// FuzzHeader: whatever parses must marshal back to the same bytes (the
// parser accepts one encoding per header), and parsing never panics. The
// seed corpus is testdata/fuzz/FuzzHeader (the golden images' headers) and
// the headers made below. Bound minimisation, which crawls on 8 KiB inputs
// (scripts/fuzz.sh does); it then runs at tens of thousands of inputs a
// second:
//
//	go test ./volume -run '^$' -fuzz FuzzHeader -fuzztime 60s -fuzzminimizetime 1s
func FuzzHeader(f *testing.F) {
	for _, s := range seedHeaders(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		// Let mutations reach the field checks: fix the checksums of
		// inputs of the right size.
		if len(b) == CopySize && string(b[:8]) == Magic {
			b = bytes.Clone(b)
			resum(b)
		}
		h, err := ParseHeader(b)
		if err != nil {
			return
		}
		out, err := h.MarshalBinary()
		if err != nil {
			t.Fatalf("parsed header does not marshal: %v", err)
		}
		if !bytes.Equal(out, b) {
			t.Fatal("marshal(parse(b)) != b")
		}
		// Every byte of a copy is covered by a checksum: a copy changed
		// anywhere without fixing its checksums must be refused.
		for i := 0; i < 8; i++ {
			pos := int(binary.LittleEndian.Uint32(b[4032+4*i:])) % len(b)
			bad := bytes.Clone(b)
			bad[pos] ^= 1 << (i % 8)
			if _, err := ParseHeader(bad); err == nil {
				t.Fatalf("accepted a copy with bit %d of byte %d flipped and no checksum fixed", i%8, pos)
			}
		}
	})
}
