package volume

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
)

// resized returns a copy of dev grown (delta > 0, with junk) or cut short
// (delta < 0) by delta bytes.
func resized(dev *memDevice, delta int64) *memDevice {
	d := dev.clone()
	if delta < 0 {
		d.b = d.b[:int64(len(d.b))+delta]
	} else {
		d.b = append(d.b, randomData(uint64(delta), int(delta))...)
	}
	return d
}

// TestSecondaryFoundInWindow: an image that grew (copied onto a larger
// partition) or shrank by a little, with its primary copy damaged or
// wiped, still opens from its secondary copy, looked for in the
// SecondaryWindow below the image's end; beyond the window, a clear error.
func TestSecondaryFoundInWindow(t *testing.T) {
	plain := randomData(51, 256<<10)
	dev, h := newTestVolume(t, plain, 4096, 32, 64)
	damages := []struct {
		name string
		do   func(d *memDevice)
	}{
		{"primary damaged", func(d *memDevice) { d.b[offLabel] ^= 1 }},
		{"primary wiped", func(d *memDevice) { clear(d.b[:CopyRegion]) }},
	}
	for _, delta := range []int64{4 << 10, 60 << 10, 1 << 20, 5<<20 + 12345, SecondaryWindow} {
		for _, dmg := range damages {
			d := resized(dev, delta)
			dmg.do(d)
			hs, err := ReadHeaders(d, d.size())
			if err != nil {
				t.Fatalf("grown by %d, %s: %v", delta, dmg.name, err)
			}
			if hs.Header.UUID != h.UUID || hs.Secondary.Offset != h.SecondaryOffset || hs.which() != "secondary" {
				t.Fatalf("grown by %d, %s: header from the %s copy at %d", delta, dmg.name, hs.which(), hs.Secondary.Offset)
			}
			v, err := openTest(t, d, testPass, true)
			if err != nil {
				t.Fatalf("grown by %d, %s: open: %v", delta, dmg.name, err)
			}
			if res, err := v.Verify(context.Background(), nil, nil); err != nil || !res.Digest.Match {
				t.Fatalf("grown by %d, %s: verify %+v, %v", delta, dmg.name, res, err)
			}
			v.Close()
		}
	}

	// Cut short within the unused tail of the secondary's 64 KiB: the
	// header is found (the old rule looked 64 KiB too low), and the volume
	// is reported truncated, with both sizes.
	for _, delta := range []int64{-4 << 10, -(CopyRegion - CopySize)} {
		for _, dmg := range append(damages, struct {
			name string
			do   func(d *memDevice)
		}{"primary intact", func(*memDevice) {}}) {
			d := resized(dev, delta)
			dmg.do(d)
			hs, err := ReadHeaders(d, d.size())
			var te *TruncatedError
			if !errors.As(err, &te) || te.Expected != h.Size || te.Actual != h.Size+delta {
				t.Fatalf("cut by %d, %s: %v", -delta, dmg.name, err)
			}
			if hs == nil || hs.Header.UUID != h.UUID || hs.Secondary.Err != nil {
				t.Fatalf("cut by %d, %s: headers %+v", -delta, dmg.name, hs)
			}
		}
	}

	// Beyond the window: not found, and the error says where it looked.
	d := resized(dev, SecondaryWindow+CopyRegion)
	damages[0].do(d)
	_, err := ReadHeaders(d, d.size())
	var hd *HeadersDamagedError
	if !errors.As(err, &hd) || !strings.Contains(err.Error(), "secondary: not found at byte") || !strings.Contains(err.Error(), "nor in the 16 MiB before it") {
		t.Fatalf("grown beyond the window: %v", err)
	}
	// Cut into the copy itself: gone, and the primary says so.
	d = resized(dev, -(CopyRegion - CopySize + 1))
	var te *TruncatedError
	if _, err := ReadHeaders(d, d.size()); !errors.As(err, &te) {
		t.Fatalf("copy cut: %v", err)
	}
	damages[0].do(d)
	if _, err := ReadHeaders(d, d.size()); !errors.As(err, &hd) {
		t.Fatalf("copy cut, primary damaged: %v", err)
	}
}

// TestSecondaryInWindowIsAuthenticated: a copy found in the window is
// used only after its MAC checks, as any copy: one whose fields were
// changed with valid checksums fails once unlocked.
func TestSecondaryInWindowIsAuthenticated(t *testing.T) {
	dev, h := newTestVolume(t, randomData(52, 64<<10), 4096, 32, 64)
	d := resized(dev, 3<<20)
	clear(d.b[:CopyRegion])
	b := d.b[h.SecondaryOffset:]
	copy(b[offLabel:offLabel+64], "forged label")
	resumAt(b)
	if _, err := openTest(t, d, testPass, true); !errors.Is(err, ErrHeaderMAC) {
		t.Fatalf("forged copy in the window: %v", err)
	}
}

// TestSecondaryWindowAmbiguous: an image copied over the end of another
// volume (a partition that held a larger one) has two secondary copies in
// the window. With the primary unusable, which one is this volume's cannot
// be told: refused, naming both. With a primary that parses (but claims
// more than the image holds), the copy of its own volume is taken.
func TestSecondaryWindowAmbiguous(t *testing.T) {
	small, hs := newTestVolume(t, randomData(53, 64<<10), 4096, 32, 64)
	large, hl := newTestVolume(t, randomData(54, 3<<20), 4096, 32, 64)
	if hl.Size <= hs.Size {
		t.Fatal("the older volume must be the larger")
	}
	d := large.clone()
	copy(d.b, small.b) // the small image dd'ed over the large one
	d.b[offLabel] ^= 1
	_, err := ReadHeaders(d, d.size())
	var hd *HeadersDamagedError
	if !errors.As(err, &hd) || !strings.Contains(err.Error(), "header copies of different volumes") ||
		!strings.Contains(err.Error(), uuidString(hs.UUID)) || !strings.Contains(err.Error(), uuidString(hl.UUID)) {
		t.Fatalf("two volumes' copies: %v", err)
	}

	// The primary intact but claiming a volume larger than the image: the
	// secondary of its own volume is found, the other ignored.
	d = large.clone()
	copy(d.b, small.b)
	forged := *hs
	l, err := computeLayout(hl.DataLength*2, hs.SectorSize, hs.TagSize, hs.RegionSize)
	if err != nil {
		t.Fatal(err)
	}
	forged.Layout = l
	pb, err := forged.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	copy(d.b, pb)
	got, err := ReadHeaders(d, d.size())
	if err != nil || got.Header.UUID != hs.UUID || !bytes.Equal(got.Secondary.raw[:], small.b[hs.SecondaryOffset:][:CopySize]) {
		t.Fatalf("primary claims too much: %v", err)
	}
}
