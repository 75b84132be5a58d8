package volume

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/xtsctl/xtsctl/blake2b"
)

// The attacker of these tests can write the image but does not know the
// passphrase: they can compute every unkeyed checksum, but no MAC.

// forgeRecord writes a state record as such an attacker would: right magic,
// sequence and flags, unkeyed checksum recomputed, a MAC they had to guess.
func forgeRecord(dev *memDevice, version uint32, uuid [16]byte, seq uint64, flags uint32) {
	b := make([]byte, StateRecordSize)
	put64(b, stateOffSequence, seq)
	copy(b[stateOffUUID:], uuid[:])
	put32(b, stateOffFlags, flags)
	if version == 1 {
		copy(b, stateMagicV1)
	} else {
		copy(b, stateMagicV2)
		copy(b[stateOffBitmapMAC:], bytes.Repeat([]byte{0x5a}, stateMACSize))
		copy(b[stateOffMAC:], bytes.Repeat([]byte{0xa5}, stateMACSize))
	}
	sum := blake2b.Sum256(b[:stateOffChecksum])
	copy(b[stateOffChecksum:], sum[:])
	dev.WriteAt(b, StateOffset+int64(seq%2)*StateRecordSize)
}

// setBitRaw sets a region's bit in the on-disk bitmap.
func setBitRaw(dev *memDevice, region int64) {
	i, bit := bitmapBit(region)
	dev.b[BitmapOffset+i] |= bit
}

// tamper flips a byte of sector n's ciphertext.
func tamper(dev *memDevice, h *Header, n uint64) { dev.b[h.SectorOffset(n)+100] ^= 0x42 }

// TestForgedRecoveryRecordIsRefused: the attack of issue 13. The attacker
// changes a sector, writes a "dirty, digest stale" record with the next
// sequence number and sets the sector's region in the bitmap. Recovery must
// not re-tag the sector: verify still names it, the digest is still
// compared, and decrypting fails.
func TestForgedRecoveryRecordIsRefused(t *testing.T) {
	ctx := context.Background()
	dev, h := newTestVolume(t, randomData(31, 256<<10), 4096, 32, 64)
	st, _ := ReadState(dev, h)
	const victim = 7
	tamper(dev, h, victim)
	forgeRecord(dev, h.Version, h.UUID, st.Sequence+1, stateDirty|stateDigestStale)
	setBitRaw(dev, 0)

	v := mustOpen(t, dev, false)
	if st := v.State(); st.Dirty || st.DigestStale || !st.Authenticated {
		t.Fatalf("a forged record is in force: %+v", st)
	}
	if !strings.Contains(strings.Join(v.Warnings(), "\n"), "authentication failed") {
		t.Errorf("no warning about the forged record: %q", v.Warnings())
	}
	if rec, err := v.Recover(ctx, true, nil); err != nil || rec.Mismatched != 0 || rec.Regions != 0 {
		t.Fatalf("Recover of a volume closed cleanly: %+v, %v", rec, err)
	}
	var bad []uint64
	res, err := v.Verify(ctx, nil, func(b BadSector) { bad = append(bad, b.Sector) })
	var dm *DigestMismatchError
	if !slices.Equal(bad, []uint64{victim}) || res.Digest.Stale || !errors.As(err, &dm) {
		t.Fatalf("verify after the attack: bad %v, %+v, %v", bad, res, err)
	}
	if err := v.ReadSectors(make([]byte, 4096), victim); err == nil {
		t.Fatal("the changed sector was accepted")
	}
	v.Close()
}

// TestReplayedDirtyRecordDoesNotRetag: the attacker cannot forge a record,
// but may replay a genuine "dirty" state area from an earlier crash of the
// same volume. Recovery then checks the region and names the changed
// sector; it re-tags it only when asked.
func TestReplayedDirtyRecordDoesNotRetag(t *testing.T) {
	ctx := context.Background()
	dev, h := newTestVolume(t, randomData(32, 256<<10), 4096, 32, 64)
	v := mustOpen(t, dev, false)
	if err := v.markRegions(0); err != nil {
		t.Fatal(err)
	}
	// A copy of the state area while the volume is in use: a genuine dirty
	// record and a bitmap it names.
	saved := bytes.Clone(dev.b[StateOffset : StateOffset+h.StateLength])
	v.Close()

	const victim = 3
	tamper(dev, h, victim)
	copy(dev.b[StateOffset:], saved)
	w := mustOpen(t, dev, false)
	if st := w.State(); !st.Dirty {
		t.Fatalf("replayed state %+v", st)
	}
	rec, err := w.Recover(ctx, false, nil)
	if err != nil || rec.Mismatched != 1 || rec.BadSectors[0].Sector != victim || rec.Repaired {
		t.Fatalf("Recover = %+v, %v", rec, err)
	}
	if err := w.ReadSectors(make([]byte, 4096), victim); err == nil {
		t.Fatal("the changed sector was accepted")
	}
	w.Close()
}

// TestForgedBitmapIsNotTrusted: a genuine dirty record (the volume crashed)
// with a bitmap the attacker extended: the bitmap is not the one the record
// names, so recovery checks every region, and still re-tags nothing.
func TestForgedBitmapIsNotTrusted(t *testing.T) {
	ctx := context.Background()
	plain := randomData(33, 256<<10)
	dev := &memDevice{}
	h, _, err := Create(ctx, dev, bytes.NewReader(plain), int64(len(plain)),
		CreateOptions{SectorSize: 4096, TagSize: 16, RegionSize: 64 << 10, Passphrase: testPass}, nil)
	if err != nil {
		t.Fatal(err)
	}
	v := mustOpen(t, dev, false)
	if err := v.markRegions(0); err != nil {
		t.Fatal(err)
	}
	crashed := dev.clone() // crash with region 0 marked
	v.Close()
	const victim = 40 // region 2
	tamper(crashed, h, victim)
	setBitRaw(crashed, 2)
	w := mustOpen(t, crashed, false)
	rec, err := w.Recover(ctx, false, nil)
	if err != nil || !rec.AllRegions || rec.Regions != 4 || rec.Mismatched != 1 || rec.BadSectors[0].Sector != victim {
		t.Fatalf("Recover = %+v, %v", rec, err)
	}
	w.Close()
}

// TestSequenceWraparound: a record claiming sequence 2^64-1 (or any number
// no writer reaches, or in the wrong slot) is not usable, so it cannot
// outrank the records written after it. On version 1, where anyone can
// write a record with a valid checksum, this is what stops the trick.
func TestSequenceWraparound(t *testing.T) {
	for _, seq := range []uint64{1<<64 - 1, 1<<64 - 2, maxStateSequence, maxStateSequence + 1} {
		b := marshalState(State{Valid: true, Sequence: seq, Dirty: true}, 1, [16]byte{1}, nil)
		if _, _, err := parseState(b, int(seq%2), 1, [16]byte{1}, nil); err == nil {
			t.Errorf("sequence %d accepted", seq)
		}
	}
	b := marshalState(State{Valid: true, Sequence: 5}, 1, [16]byte{1}, nil)
	if _, _, err := parseState(b, 0, 1, [16]byte{1}, nil); err == nil {
		t.Error("a record in the wrong slot for its sequence number was accepted")
	}

	// On a version-1 volume: the forged record is ignored, and what we
	// write afterwards is in force.
	dev := goldenV1(t, "disk-4096.vol")
	hs, err := ReadHeaders(dev, dev.size())
	if err != nil {
		t.Fatal(err)
	}
	forgeRecord(dev, 1, hs.Header.UUID, 1<<64-1, 0)
	v := openGolden(t, dev, false)
	if err := v.markRegions(0); err != nil {
		t.Fatal(err)
	}
	if st, _ := ReadState(dev, v.h); !st.Dirty {
		t.Fatalf("the record written after a forged 2^64-1 is not in force: %+v", st)
	}
	v.Close()
}

// TestDowngradeIsRefused: turning a version-2 header back into version 1
// (checksums recomputed) would make its state area unauthenticated; the
// header MAC covers the version, so it no longer unlocks.
func TestDowngradeIsRefused(t *testing.T) {
	dev, h := newTestVolume(t, randomData(34, 64<<10), 4096, 32, 64)
	for _, off := range []int64{0, h.SecondaryOffset} {
		put32(dev.b[off:], offVersion, 1)
		resumAt(dev.b[off:])
	}
	if _, err := openTest(t, dev, testPass, true); !errors.Is(err, ErrHeaderMAC) {
		t.Fatalf("a downgraded header: %v, want ErrHeaderMAC", err)
	}
}

// goldenV1 loads a version-1 volume made by scripts/volume_ref.py.
func goldenV1(t testing.TB, name string) *memDevice {
	t.Helper()
	b, err := os.ReadFile("../testimages/v1/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return &memDevice{b: b}
}

var goldenPass = []byte("xtsctl test passphrase")

func openGolden(t testing.TB, dev *memDevice, readOnly bool) *Volume {
	t.Helper()
	v, err := openTest(t, dev, goldenPass, readOnly)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return v
}

// TestVersion1Attack: a version-1 volume's state area is not
// authenticated, so the forged record is in force; recovery still only
// checks, and names the changed sector instead of re-tagging it.
func TestVersion1Attack(t *testing.T) {
	ctx := context.Background()
	dev := goldenV1(t, "disk-4096.vol")
	hs, _ := ReadHeaders(dev, dev.size())
	h := hs.Header
	st, _ := ReadState(dev, h)
	tamper(dev, h, 9)
	forgeRecord(dev, 1, h.UUID, st.Sequence+1, stateDirty|stateDigestStale)
	setBitRaw(dev, 0)
	v := openGolden(t, dev, false)
	rec, err := v.Recover(ctx, false, nil)
	if err != nil || rec.Mismatched != 1 || rec.BadSectors[0].Sector != 9 {
		t.Fatalf("Recover = %+v, %v", rec, err)
	}
	if err := v.ReadSectors(make([]byte, 4096), 9); err == nil {
		t.Fatal("the changed sector was accepted")
	}
	v.Close()
}

// TestUpgrade: a version-1 volume opened read-write becomes version 2
// (header and state records), reads the same, and its state area is
// authenticated from then on. Read-only, and a second time, nothing
// happens.
func TestUpgrade(t *testing.T) {
	ctx := context.Background()
	dev := goldenV1(t, "disk-512-aes128-tag16.vol")
	ro := openGolden(t, dev, true)
	want := make([]byte, ro.Header().DataLength)
	if err := ro.ReadSectors(want, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := ro.Upgrade(); !errors.Is(err, ErrReadOnly) {
		t.Errorf("Upgrade read-only: %v", err)
	}
	ro.Close()

	v := openGolden(t, dev, false)
	if v.Header().Version != 1 {
		t.Fatalf("golden volume is version %d", v.Header().Version)
	}
	if done, err := v.Upgrade(); !done || err != nil {
		t.Fatalf("Upgrade = %v, %v", done, err)
	}
	if done, err := v.Upgrade(); done || err != nil {
		t.Fatalf("second Upgrade = %v, %v", done, err)
	}
	v.Close()

	w := openGolden(t, dev, false)
	defer w.Close()
	if w.Header().Version != 2 || len(w.Warnings()) != 0 {
		t.Fatalf("after the upgrade: version %d, warnings %q", w.Header().Version, w.Warnings())
	}
	if st := w.State(); !st.Authenticated || st.Dirty || st.DigestStale {
		t.Fatalf("state after the upgrade %+v", st)
	}
	got := make([]byte, len(want))
	if err := w.ReadSectors(got, 0); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("data after the upgrade: %v", err)
	}
	if res, err := w.Verify(ctx, nil, nil); err != nil || !res.Digest.Match {
		t.Fatalf("verify after the upgrade: %+v, %v", res, err)
	}
}

// TestUpgradeIsCrashSafe: a crash at any moment of an upgrade leaves a
// volume that opens, with the passphrase, as version 1 with its state, or
// as version 2 with the same state, and reads the same data.
func TestUpgradeIsCrashSafe(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 13))
	base := goldenV1(t, "disk-4096.vol")
	v := openGolden(t, base, true)
	want := make([]byte, v.Header().DataLength)
	v.ReadSectors(want, 0)
	v.Close()

	dev := &logDevice{memDevice: base.clone()}
	u, err := OpenDevice(dev, dev.size(), false, func(hs *Headers) ([]byte, int, error) { return hs.Unlock(goldenPass) })
	if err != nil {
		t.Fatal(err)
	}
	if done, err := u.Upgrade(); !done || err != nil {
		t.Fatalf("Upgrade = %v, %v", done, err)
	}
	u.Close()
	versions := map[uint32]int{}
	for n := 0; n <= len(dev.log); n++ {
		for _, img := range crashImages(base.b, dev.log, n, r) {
			d := &memDevice{b: img}
			w, err := openTest(t, d, goldenPass, false)
			if err != nil {
				t.Fatalf("crash after %d of %d steps: %v", n, len(dev.log), err)
			}
			versions[w.Header().Version]++
			if st := w.State(); !st.Valid || st.Dirty || st.DigestStale {
				t.Fatalf("crash after %d of %d steps: version %d, state %+v, warnings %q", n, len(dev.log), w.Header().Version, st, w.Warnings())
			}
			got := make([]byte, len(want))
			if err := w.ReadSectors(got, 0); err != nil || !bytes.Equal(got, want) {
				t.Fatalf("crash after %d of %d steps: data: %v", n, len(dev.log), err)
			}
			// It upgrades (again) and then opens clean as version 2.
			if _, err := w.Upgrade(); err != nil {
				t.Fatalf("crash after %d of %d steps: upgrading again: %v", n, len(dev.log), err)
			}
			w.Close()
			x := mustOpenPass(t, d, goldenPass)
			if x.Header().Version != 2 || !x.State().Authenticated || x.State().Dirty {
				t.Fatalf("crash after %d of %d steps, upgraded again: version %d, %+v", n, len(dev.log), x.Header().Version, x.State())
			}
			x.Close()
		}
	}
	if versions[1] == 0 || versions[2] == 0 {
		t.Fatalf("crash images opened as versions %v: want both", versions)
	}
}

func mustOpenPass(t testing.TB, dev *memDevice, pass []byte) *Volume {
	t.Helper()
	v, err := openTest(t, dev, pass, false)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestDirtyProtocolIsCrashSafe: a session of marks, writes, syncs and
// clears, then a close. After a crash at any moment (each torn as
// crashImages does), recovery checks every sector whose tag does not match
// its data (the bitmap on the disk is one a usable record names, or, for a
// torn bitmap, recovery checks every region), and after a repair the
// volume verifies clean.
func TestDirtyProtocolIsCrashSafe(t *testing.T) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(14, 14))
	const ss = 4096
	plain := randomData(35, 512<<10)
	base := &memDevice{}
	if _, _, err := Create(ctx, base, bytes.NewReader(plain), int64(len(plain)),
		CreateOptions{SectorSize: ss, TagSize: 32, RegionSize: 64 << 10, Passphrase: testPass}, nil); err != nil {
		t.Fatal(err)
	}
	dev := &logDevice{memDevice: base.clone()}
	v, err := OpenDevice(dev, dev.size(), false, func(hs *Headers) ([]byte, int, error) { return hs.Unlock(testPass) })
	if err != nil {
		t.Fatal(err)
	}
	data := randomData(36, 3*ss)
	write := func(n uint64) {
		if err := v.markRegions(v.RegionOf(n), v.RegionOf(n+2)); err != nil {
			t.Fatal(err)
		}
		if err := v.WriteSectors(data, n); err != nil {
			t.Fatal(err)
		}
	}
	write(3)
	write(15) // spans regions 0 and 1
	if err := v.Sync(); err != nil {
		t.Fatal(err)
	}
	v.clearRegions(0, 1)
	write(70) // region 4
	if err := v.Sync(); err != nil {
		t.Fatal(err)
	}
	write(100)
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}

	all, untrusted := 0, 0
	for n := 0; n <= len(dev.log); n++ {
		for _, img := range crashImages(base.b, dev.log, n, r) {
			all++
			d := &memDevice{b: img}
			w := mustOpen(t, d, false)
			var bad []uint64
			w.Verify(ctx, nil, func(b BadSector) { bad = append(bad, b.Sector) })
			rec, err := w.Recover(ctx, false, nil)
			if err != nil {
				t.Fatalf("crash after %d of %d steps: %v", n, len(dev.log), err)
			}
			if rec.AllRegions {
				untrusted++
			}
			var found []uint64
			for _, b := range rec.BadSectors {
				found = append(found, b.Sector)
			}
			if !slices.Equal(found, bad) {
				t.Fatalf("crash after %d of %d steps: recovery found %v, verify finds %v (%+v)", n, len(dev.log), found, bad, rec)
			}
			w.Close()
			x := mustOpen(t, d, false)
			if _, err := x.Recover(ctx, true, nil); err != nil {
				t.Fatal(err)
			}
			if res, err := x.Verify(ctx, nil, nil); res.BadSectors != 0 {
				t.Fatalf("crash after %d of %d steps: after repair: %+v, %v", n, len(dev.log), res, err)
			}
			x.Close()
		}
	}
	t.Logf("%d log entries, %d crash images, %d with a torn bitmap (every region checked)", len(dev.log), all, untrusted)
}

// TestTornBitmapIsChecked: a bitmap update whose write is torn between two
// 512-byte pieces leaves a bitmap no record names: recovery then checks
// every region, and still finds every torn sector.
func TestTornBitmapIsChecked(t *testing.T) {
	ctx := context.Background()
	const ss, region = 512, 4096
	size := int64(4100 * region) // bits 0 and 4096 are 512 bytes apart
	dev := &memDevice{}
	if _, _, err := Create(ctx, dev, bytes.NewReader(make([]byte, size)), size,
		CreateOptions{SectorSize: ss, TagSize: 16, RegionSize: region, Passphrase: testPass}, nil); err != nil {
		t.Fatal(err)
	}
	v := mustOpen(t, dev, false)
	if err := v.markRegions(0); err != nil {
		t.Fatal(err)
	}
	before := dev.clone()
	ld := &logDevice{memDevice: dev}
	v.dev = ld
	if err := v.markRegions(1, 4096); err != nil {
		t.Fatal(err)
	}
	v.Close()
	var bitmapWrite logEntry
	var recordWrites []logEntry
	for _, e := range ld.log {
		if e.off == BitmapOffset && e.data != nil {
			bitmapWrite = e
			break
		}
		if e.data != nil {
			recordWrites = append(recordWrites, e)
		}
	}
	if len(bitmapWrite.data) != bitmapAlign {
		t.Fatalf("bitmap written as %d bytes at %d", len(bitmapWrite.data), bitmapWrite.off)
	}
	// The record naming the new bitmap was synced first; then the crash
	// let through one 512-byte piece of the bitmap block, and the writes
	// that had followed it were torn.
	for piece := range 2 {
		d := before.clone()
		for _, e := range recordWrites {
			copy(d.b[e.off:], e.data)
		}
		off := piece * 512
		copy(d.b[BitmapOffset+int64(off):], bitmapWrite.data[off:off+512])
		hs, _ := ReadHeaders(d, d.size())
		torn := []uint64{8, 4096 * 8} // one sector each of regions 1 and 4096
		for _, n := range torn {
			tamper(d, hs.Header, n)
		}
		w := mustOpen(t, d, false)
		rec, err := w.Recover(ctx, false, nil)
		var found []uint64
		for _, b := range rec.BadSectors {
			found = append(found, b.Sector)
		}
		if err != nil || !rec.AllRegions || !slices.Equal(found, torn) {
			t.Fatalf("piece %d: Recover = %+v, %v", piece, rec, err)
		}
		w.Close()
	}
}

// TestLargerPrimaryDoesNotHideSecondary: a primary copy rewritten (with
// valid checksums) to describe a volume larger than the image would make
// the image look truncated and hide the intact secondary copy at its end.
// The secondary is looked for there all the same, and used.
func TestLargerPrimaryDoesNotHideSecondary(t *testing.T) {
	dev, h := newTestVolume(t, randomData(38, 256<<10), 4096, 32, 64)
	orig := dev.clone()
	forged := *h
	l, err := computeLayout(h.DataLength*8, h.SectorSize, h.TagSize, h.RegionSize)
	if err != nil {
		t.Fatal(err)
	}
	forged.Layout, forged.Generation = l, h.Generation+5
	b, err := forged.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	dev.WriteAt(b, 0)
	hs, err := ReadHeaders(dev, dev.size())
	if err != nil {
		t.Fatalf("ReadHeaders: %v", err)
	}
	if hs.Header.Size != h.Size || hs.Primary.Err == nil || hs.Secondary.Err != nil {
		t.Fatalf("header in use: size %d (want %d); primary %v, secondary %v", hs.Header.Size, h.Size, hs.Primary.Err, hs.Secondary.Err)
	}
	v := mustOpen(t, dev, true)
	if res, err := v.Verify(context.Background(), nil, nil); err != nil || !res.Digest.Match {
		t.Fatalf("verify: %+v, %v", res, err)
	}
	v.Close()

	// A really truncated image is still reported as such.
	d := orig.clone()
	d.b = d.b[:h.Size-CopyRegion]
	var te *TruncatedError
	if _, err := ReadHeaders(d, d.size()); !errors.As(err, &te) || te.Expected != h.Size {
		t.Fatalf("truncated image: %v", err)
	}
}

// FuzzStateRecord: parsing a state record never panics; a record that is
// usable re-encodes to the same bytes (one encoding per record); and no
// record is usable as version 2 without its MAC: an input that an
// attacker built (checksum fixed, MAC guessed) is refused.
func FuzzStateRecord(f *testing.F) {
	keys := newStateKeys(bytes.Repeat([]byte{7}, 64))
	uuid := [16]byte{1, 2, 3}
	for _, s := range []State{{Valid: true}, {Valid: true, Sequence: 5, Dirty: true, DigestStale: true}} {
		f.Add(marshalState(s, 2, uuid, keys), uint8(s.Sequence%2), false)
		f.Add(marshalState(s, 1, uuid, nil), uint8(s.Sequence%2), true)
	}
	f.Fuzz(func(t *testing.T, b []byte, slot uint8, v1 bool) {
		if len(b) != StateRecordSize {
			return
		}
		version := uint32(2)
		if v1 {
			version = 1
		}
		// Let mutations reach the field checks: fix the unkeyed checksum,
		// as an attacker would.
		b = bytes.Clone(b)
		sum := blake2b.Sum256(b[:stateOffChecksum])
		copy(b[stateOffChecksum:], sum[:])
		k := keys
		if v1 {
			k = nil
		}
		s, empty, err := parseState(b, int(slot%2), version, uuid, k)
		if err != nil || empty {
			return
		}
		if !bytes.Equal(marshalState(s, version, uuid, k), b) {
			t.Fatal("marshal(parse(b)) != b")
		}
		if !v1 && !s.Authenticated {
			t.Fatal("a version-2 record parsed with the keys is not authenticated")
		}
	})
}

// TestRecoveryOfEveryRegionKeepsMismatchesDirty: after a recovery of every
// region (the state unknown, or a bitmap no record names) that leaves
// sectors mismatched, their regions stay marked even where the untrusted
// bitmap did not mark them: the next read-write open checks them again
// and reports them, and the volume is not recorded clean until they are
// re-tagged (open --recover) or rewritten.
func TestRecoveryOfEveryRegionKeepsMismatchesDirty(t *testing.T) {
	ctx := context.Background()
	plain := randomData(41, 256<<10)
	const victim = 40 // region 2 of four 64 KiB regions
	for _, tc := range []struct {
		name   string
		damage func(d *memDevice)
	}{
		// A genuine dirty record with region 0 marked; the bitmap then
		// changed (bit 1 set), so no record names it. The victim's
		// region 2 is not marked in it.
		{"bitmap no record names", func(d *memDevice) { setBitRaw(d, 1) }},
		// Both state records destroyed: the state is unknown and the
		// bitmap says nothing.
		{"state unknown", func(d *memDevice) { clear(d.b[StateOffset : StateOffset+2*StateRecordSize]) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dev := &memDevice{}
			h, _, err := Create(ctx, dev, bytes.NewReader(plain), int64(len(plain)),
				CreateOptions{SectorSize: 4096, TagSize: 16, RegionSize: 64 << 10, Passphrase: testPass}, nil)
			if err != nil {
				t.Fatal(err)
			}
			v := mustOpen(t, dev, false)
			if err := v.markRegions(0); err != nil {
				t.Fatal(err)
			}
			crashed := dev.clone() // a crash with region 0 marked
			v.Close()
			tamper(crashed, h, victim)
			tc.damage(crashed)

			w := mustOpen(t, crashed, false)
			rec, err := w.Recover(ctx, false, nil)
			if err != nil || !rec.AllRegions || rec.Mismatched != 1 || rec.BadSectors[0].Sector != victim {
				t.Fatalf("first recovery: %+v, %v", rec, err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			for open := range 2 {
				x := mustOpen(t, crashed, false)
				if st := x.State(); !st.Dirty {
					t.Fatalf("open %d after a recovery that left sector %d mismatched: state %+v (recorded clean)", open+2, victim, st)
				}
				regions, all, err := x.RecoveryRegions()
				if err != nil || all || !slices.Equal(regions, []int64{2}) {
					t.Fatalf("open %d: regions to check %v (all %v), %v; want [2]", open+2, regions, all, err)
				}
				rec, err := x.Recover(ctx, false, nil)
				if err != nil || rec.AllRegions || rec.Mismatched != 1 || rec.BadSectors[0].Sector != victim {
					t.Fatalf("open %d: recovery %+v, %v", open+2, rec, err)
				}
				x.Close()
			}
			// Accepting the sector (open --recover) settles it.
			y := mustOpen(t, crashed, false)
			if rec, err := y.Recover(ctx, true, nil); err != nil || !rec.Repaired || rec.Mismatched != 1 {
				t.Fatalf("recovery with repair: %+v, %v", rec, err)
			}
			y.Close()
			if st, _ := ReadState(crashed, h); st.Dirty {
				t.Fatalf("after repair: %+v", st)
			}
		})
	}
}
