package volume

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/xtsctl/xtsctl/internal/stream"
	xblake2b "golang.org/x/crypto/blake2b"
	xxts "golang.org/x/crypto/xts"
)

// TestCreateMatchesSpec rebuilds a volume's data area and tags from the
// master key with independent implementations (x/crypto's XTS and BLAKE2b)
// following docs/FORMAT.md: the data area is dm-crypt plain64 with tweaks
// in 512-byte units from its start, and tag i is keyed BLAKE2b over
// le64(i) || ciphertext with the derived tag key.
func TestCreateMatchesSpec(t *testing.T) {
	for _, c := range []struct{ ss, ts, ks int }{{4096, 32, 64}, {512, 16, 32}, {2048, 32, 32}, {1024, 0, 64}} {
		plain := randomData(uint64(c.ss+c.ts), 300<<10)
		dev, h := newTestVolume(t, plain, c.ss, c.ts, c.ks)
		v := mustOpen(t, dev, true)
		key := v.MasterKey()
		v.Close()

		// Data area: x/crypto XTS with dm-crypt's plain64 tweak.
		xc, err := xxts.NewCipher(newAES, key)
		if err != nil {
			t.Fatal(err)
		}
		data := dev.b[h.DataOffset : h.DataOffset+h.DataLength]
		got := make([]byte, len(data))
		for i := 0; i < len(data); i += c.ss {
			xc.Decrypt(got[i:i+c.ss], data[i:i+c.ss], uint64(i/512))
		}
		if !bytes.Equal(got, plain) {
			t.Fatalf("%+v: the data area does not decrypt as plain64 from its start", c)
		}
		if c.ts == 0 {
			if h.TagOffset != 0 || h.Integrity != IntegrityNone {
				t.Fatal("tags without integrity")
			}
			continue
		}
		// Tags: x/crypto BLAKE2b, key derived with x/crypto BLAKE2b too.
		kd, _ := xblake2b.New512(key)
		kd.Write([]byte("xtsctl volume v1: sector tags"))
		tagKey := kd.Sum(nil)
		for i := 0; i < len(data)/c.ss; i++ {
			m, _ := xblake2b.New(c.ts, tagKey)
			binary.Write(m, binary.LittleEndian, uint64(i))
			m.Write(data[i*c.ss : (i+1)*c.ss])
			pos := h.TagOffset + int64(i*c.ts)
			if !bytes.Equal(m.Sum(nil), dev.b[pos:pos+int64(c.ts)]) {
				t.Fatalf("%+v: tag %d differs from keyed BLAKE2b(le64(i) || ciphertext)", c, i)
			}
		}
		if rest := dev.b[h.TagOffset+int64(len(data)/c.ss*c.ts) : h.TagOffset+h.TagLength]; !allZero(rest) {
			t.Fatal("tag area padding is not zero")
		}
	}
}

// TestReadWriteSectors: a volume reads back what it holds and what is
// written to it, at every sector size, with reads of every alignment.
func TestReadWriteSectors(t *testing.T) {
	for _, ss := range []int{512, 4096} {
		plain := randomData(7, 256<<10)
		dev, _ := newTestVolume(t, plain, ss, 32, 64)
		v := mustOpen(t, dev, false)
		n := uint64(len(plain) / ss)
		for _, r := range [][2]uint64{{0, 1}, {0, n}, {3, 5}, {n - 1, 1}, {n / 2, n / 2}} {
			buf := make([]byte, int(r[1])*ss)
			if err := v.ReadSectors(buf, r[0]); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(buf, plain[int(r[0])*ss:][:len(buf)]) {
				t.Fatalf("ss %d: sectors %v read wrong", ss, r)
			}
		}
		if err := v.ReadSectors(make([]byte, 2*ss), n-1); err == nil {
			t.Fatal("read past the end accepted")
		}
		patch := randomData(8, 3*ss)
		orig := bytes.Clone(patch)
		if err := v.WriteSectors(patch, 10); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(patch, orig) {
			t.Fatal("WriteSectors changed its buffer")
		}
		copy(plain[10*ss:], patch)
		if err := v.Close(); err != nil {
			t.Fatal(err)
		}
		v = mustOpen(t, dev, true)
		all := make([]byte, len(plain))
		if err := v.ReadSectors(all, 0); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(all, plain) {
			t.Fatal("written sectors not read back")
		}
		if st := v.State(); !st.Valid || st.Dirty || !st.DigestStale {
			t.Fatalf("after a write and a clean close: state %+v", st)
		}
		if len(v.Warnings()) != 0 {
			t.Fatalf("warnings: %v", v.Warnings())
		}
		v.Close()
	}
}

// TestIntegrityDetects: a flipped bit in the data or in a tag, tags
// swapped between two sectors, or sectors swapped with their tags: the
// sectors concerned fail by number and byte offset, are zeroed in the
// buffer, and the others still read.
func TestIntegrityDetects(t *testing.T) {
	const ss = 4096
	plain := randomData(9, 64*ss)
	base, h := newTestVolume(t, plain, ss, 32, 64)
	tag := func(i int) []byte { p := h.TagOffset + int64(i*32); return base.b[p : p+32] }
	sec := func(d *memDevice, i int) []byte { p := h.DataOffset + int64(i*ss); return d.b[p : p+ss] }
	cases := map[string]struct {
		damage       func(d *memDevice)
		bad          []uint64
		dataModified bool // else the plaintext digest still matches
	}{
		"data bit": {func(d *memDevice) { sec(d, 5)[100] ^= 0x10 }, []uint64{5}, true},
		"tag bit":  {func(d *memDevice) { d.b[h.TagOffset+7*32+31] ^= 1 }, []uint64{7}, false},
		"tags swapped": {func(d *memDevice) {
			a, b := bytes.Clone(tag(2)), bytes.Clone(tag(9))
			copy(d.b[h.TagOffset+2*32:], b)
			copy(d.b[h.TagOffset+9*32:], a)
		}, []uint64{2, 9}, false},
		"sectors and tags swapped": {func(d *memDevice) {
			a, b := bytes.Clone(sec(d, 3)), bytes.Clone(sec(d, 4))
			copy(sec(d, 3), b)
			copy(sec(d, 4), a)
			ta, tb := bytes.Clone(tag(3)), bytes.Clone(tag(4))
			copy(d.b[h.TagOffset+3*32:], tb)
			copy(d.b[h.TagOffset+4*32:], ta)
		}, []uint64{3, 4}, true},
		"last sector": {func(d *memDevice) { sec(d, 63)[ss-1] ^= 0x80 }, []uint64{63}, true},
	}
	for name, c := range cases {
		dev := base.clone()
		c.damage(dev)
		v := mustOpen(t, dev, true)
		buf := make([]byte, len(plain))
		err := v.ReadSectors(buf, 0)
		var ie *IntegrityError
		if !errors.As(err, &ie) {
			t.Fatalf("%s: err = %v", name, err)
		}
		var got []uint64
		for _, b := range ie.Sectors {
			got = append(got, b.Sector)
			if b.Offset != h.DataOffset+int64(b.Sector)*ss {
				t.Fatalf("%s: sector %d at offset %d", name, b.Sector, b.Offset)
			}
		}
		if !slices.Equal(got, c.bad) {
			t.Fatalf("%s: bad sectors %v, want %v", name, got, c.bad)
		}
		for i := range 64 {
			s := buf[i*ss : (i+1)*ss]
			if slices.Contains(c.bad, uint64(i)) {
				if !allZero(s) {
					t.Fatalf("%s: bad sector %d returned plaintext", name, i)
				}
			} else if !bytes.Equal(s, plain[i*ss:(i+1)*ss]) {
				t.Fatalf("%s: good sector %d wrong", name, i)
			}
		}
		// Verify lists the same sectors; Decrypt refuses to output.
		var listed []uint64
		res, err := v.Verify(context.Background(), nil, func(b BadSector) { listed = append(listed, b.Sector) })
		var dm *DigestMismatchError
		if errors.As(err, &dm) != c.dataModified || res.Digest.Match == c.dataModified ||
			res.BadSectors != int64(len(c.bad)) || !slices.Equal(listed, c.bad) {
			t.Fatalf("%s: Verify = %+v, %v, listed %v", name, res, err, listed)
		}
		var out bytes.Buffer
		if _, err := v.Decrypt(context.Background(), &out, true, nil); !errors.As(err, &ie) {
			t.Fatalf("%s: Decrypt err = %v", name, err)
		}
		if out.Len() != 0 {
			t.Fatalf("%s: Decrypt wrote %d bytes", name, out.Len())
		}
		v.Close()
	}
}

// TestDecryptVerifyDigest: the digest is recorded, checked, and catches
// data changed behind the tags' back (re-tagged by hand).
func TestDecryptVerifyDigest(t *testing.T) {
	plain := randomData(10, stream.ChunkSize+2*4096) // two stream chunks
	dev, _ := newTestVolume(t, plain, 4096, 16, 64)
	v := mustOpen(t, dev, true)
	var out bytes.Buffer
	dc, err := v.Decrypt(context.Background(), &out, true, nil)
	if err != nil || !dc.Match || !bytes.Equal(out.Bytes(), plain) {
		t.Fatalf("Decrypt: %+v, %v", dc, err)
	}
	if want := xblake2b.Sum512(plain); dc.Computed != want {
		t.Fatal("digest is not the BLAKE2b-512 of the plaintext")
	}
	res, err := v.Verify(context.Background(), nil, nil)
	if err != nil || !res.Digest.Match || res.BadSectors != 0 {
		t.Fatalf("Verify: %+v, %v", res, err)
	}
	v.Close()

	// Change a sector's ciphertext and re-tag it without going through
	// WriteSectors (which would mark the digest stale): tags pass, the
	// digest does not.
	h := v.Header()
	dev.b[h.DataOffset+4096*3] ^= 1
	w := mustOpen(t, dev, false)
	retag(t, w, 3)
	res, err = w.Verify(context.Background(), nil, nil)
	var dm *DigestMismatchError
	if !errors.As(err, &dm) || res.BadSectors != 0 || dm.Recorded == dm.Computed {
		t.Fatalf("Verify after tampering: %+v, %v", res, err)
	}
	// Writing through the volume marks the digest stale: not compared.
	if err := w.WriteSectors(make([]byte, 4096), 0); err != nil {
		t.Fatal(err)
	}
	res, err = w.Verify(context.Background(), nil, nil)
	if err != nil || !res.Digest.Stale || res.Digest.Done {
		t.Fatalf("Verify with a stale digest: %+v, %v", res, err)
	}
	w.Close()
}

func TestUnlockErrors(t *testing.T) {
	dev, h := newTestVolume(t, make([]byte, 64<<10), 4096, 32, 64)
	if _, err := openTest(t, dev, []byte("wrong"), true); !errors.Is(err, ErrWrongPassphrase) {
		t.Fatalf("wrong passphrase: %v", err)
	}
	// Slot 0 damaged in the primary: opens from the secondary, with a warning.
	d := dev.clone()
	d.b[slotAreaOffset+slotOffSalt] ^= 4
	v, err := openTest(t, d, testPass, true)
	if err != nil {
		t.Fatalf("slot damaged in one copy: %v", err)
	}
	if w := strings.Join(v.Warnings(), "\n"); !strings.Contains(w, "primary header copy is damaged (key slot area checksum mismatch (damaged: key slot 0))") {
		t.Fatalf("warnings: %q", w)
	}
	v.Close()
	// ... and in both: told apart from a wrong passphrase.
	d.b[h.SecondaryOffset+slotAreaOffset+200] ^= 4
	var sd *SlotsDamagedError
	if _, err := openTest(t, d, testPass, true); !errors.As(err, &sd) || !slices.Equal(sd.Slots, []int{0}) {
		t.Fatalf("slot damaged in both copies: %v", err)
	}
	// A slot moved to another index does not open (its index is bound).
	d = dev.clone()
	for _, base := range []int64{0, h.SecondaryOffset} {
		s := d.b[base+slotAreaOffset : base+slotAreaOffset+2*SlotSize]
		copy(s[SlotSize:], s[:SlotSize])
		clear(s[:SlotSize])
		resumAt(d.b[base:])
	}
	if _, err := openTest(t, d, testPass, true); !errors.Is(err, ErrWrongPassphrase) {
		t.Fatalf("moved slot: %v", err)
	}
	// All slots empty.
	d = dev.clone()
	for _, base := range []int64{0, h.SecondaryOffset} {
		clear(d.b[base+slotAreaOffset : base+CopySize])
		resumAt(d.b[base:])
	}
	if _, err := openTest(t, d, testPass, true); !errors.Is(err, ErrNoKeySlots) {
		t.Fatalf("no slots: %v", err)
	}
	// A header whose fields were changed (integrity turned off) with valid
	// checksums: the MAC catches it once unlocked.
	d = dev.clone()
	for _, base := range []int64{0, h.SecondaryOffset} {
		b := d.b[base:]
		put32(b, offIntegrity, 0)
		put32(b, offTagSize, 0)
		l, _ := NewLayout(h.DataLength, h.SectorSize, 0)
		put64(b, offTagOffset, 0)
		put64(b, offTagLength, 0)
		put64(b, offSecondary, uint64(l.SecondaryOffset))
		put64(b, offVolumeSize, uint64(l.Size))
		resumAt(b)
	}
	l, _ := NewLayout(h.DataLength, h.SectorSize, 0)
	copy(d.b[l.SecondaryOffset:], d.b[h.SecondaryOffset:h.SecondaryOffset+CopySize])
	if _, err := openTest(t, d, testPass, true); !errors.Is(err, ErrHeaderMAC) {
		t.Fatalf("tampered header: %v", err)
	}
}

func resumAt(b []byte) { resum(b[:CopySize]) }

func TestHeaderCopies(t *testing.T) {
	dev, h := newTestVolume(t, make([]byte, 64<<10), 4096, 32, 64)
	// Not a volume.
	junk := &memDevice{b: randomData(1, int(h.Size))}
	if _, err := openTest(t, junk, testPass, true); !errors.Is(err, ErrNotVolume) {
		t.Fatalf("junk: %v", err)
	}
	// Primary damaged: warning, secondary used.
	d := dev.clone()
	d.b[offLabel] ^= 1
	v, err := openTest(t, d, testPass, true)
	if err != nil {
		t.Fatalf("primary damaged: %v", err)
	}
	if w := v.Warnings(); len(w) != 1 || !strings.Contains(w[0], "primary header copy is damaged (header checksum mismatch); using the secondary copy") {
		t.Fatalf("warnings %q", w)
	}
	v.Close()
	// Primary overwritten entirely (no magic): still found from the end.
	d = dev.clone()
	clear(d.b[:CopyRegion])
	if v, err = openTest(t, d, testPass, true); err != nil {
		t.Fatalf("primary wiped: %v", err)
	}
	v.Close()
	// Secondary damaged: warning only.
	d = dev.clone()
	d.b[h.SecondaryOffset+offDataLength] ^= 1
	if v, err = openTest(t, d, testPass, true); err != nil || len(v.Warnings()) != 1 || !strings.Contains(v.Warnings()[0], "secondary header copy") {
		t.Fatalf("secondary damaged: %v %q", err, v.Warnings())
	}
	v.Close()
	// Both damaged.
	d.b[offDataLength] ^= 1
	var hd *HeadersDamagedError
	if _, err = openTest(t, d, testPass, true); !errors.As(err, &hd) {
		t.Fatalf("both damaged: %v", err)
	}
	if !strings.Contains(err.Error(), "both header copies are damaged (primary: header checksum mismatch; secondary: header checksum mismatch)") {
		t.Fatalf("message: %v", err)
	}
	// A future version in both copies is refused, by number.
	d = dev.clone()
	put32(d.b, offVersion, Version+1)
	put32(d.b[h.SecondaryOffset:], offVersion, Version+1)
	var ve *VersionError
	if _, err := openTest(t, d, testPass, true); !errors.As(err, &ve) || ve.Version != Version+1 {
		t.Fatalf("future version: %v", err)
	}
	// ... in one copy only (a flipped bit): the intact copy is used.
	d = dev.clone()
	put32(d.b, offVersion, Version+2)
	if v, err = openTest(t, d, testPass, true); err != nil {
		t.Fatalf("version flipped in the primary: %v", err)
	}
	v.Close()
	// Truncated: expected and actual size.
	d = dev.clone()
	d.b = d.b[:h.Size-4096]
	var te *TruncatedError
	if _, err := openTest(t, d, testPass, true); !errors.As(err, &te) || te.Expected != h.Size || te.Actual != h.Size-4096 {
		t.Fatalf("truncated: %v", err)
	}
}

// TestStateAndRecovery: the dirty-region protocol of docs/FORMAT.md. A
// region is marked before it is written; after a crash (no Close) with a
// torn write in it, the reopened volume is dirty and its bad sector is in a
// marked region. Recover reports it and leaves it failing (and marked, so
// the next open reports it again) unless asked to repair; with repair it is
// re-tagged and the volume reads clean.
func TestStateAndRecovery(t *testing.T) {
	const ss = 4096
	ctx := context.Background()
	plain := randomData(11, 160<<10) // three 64 KiB regions, the last one short
	dev := &memDevice{}
	h, _, err := Create(ctx, dev, bytes.NewReader(plain), int64(len(plain)),
		CreateOptions{SectorSize: ss, TagSize: 32, RegionSize: 64 << 10, Passphrase: testPass}, nil)
	if err != nil {
		t.Fatal(err)
	}
	v := mustOpen(t, dev, false)
	if st := v.State(); !st.Valid || !st.Authenticated || st.Dirty || st.DigestStale {
		t.Fatalf("new volume state %+v", st)
	}
	if first, n := v.regionSectors(2); first != 32 || n != 8 {
		t.Fatalf("last region: sectors %d+%d", first, n)
	}
	sector := uint64(80 << 10 / ss) // in region 1
	if r := v.RegionOf(sector); r != 1 {
		t.Fatalf("region of sector %d = %d", sector, r)
	}
	if err := v.markRegions(1); err != nil {
		t.Fatal(err)
	}
	if err := v.WriteSectors(make([]byte, ss), sector); err != nil {
		t.Fatal(err)
	}
	// Crash: the data write reached the disk, a later tag write was torn.
	crashed := dev.clone()
	crashed.b[h.TagOffset+int64(sector)*32] ^= 0xff
	v.Close()

	w := mustOpen(t, crashed, false)
	if st := w.State(); !st.Dirty || !st.DigestStale {
		t.Fatalf("crashed volume state %+v", st)
	}
	if !strings.Contains(strings.Join(w.Warnings(), "\n"), "not closed cleanly") {
		t.Fatalf("warnings %q", w.Warnings())
	}
	if regions, err := w.DirtyRegions(); err != nil || !slices.Equal(regions, []int64{1}) {
		t.Fatalf("dirty regions %v, %v", regions, err)
	}
	if err := w.ReadSectors(make([]byte, ss), sector); err == nil {
		t.Fatal("torn sector read fine before recovery")
	}
	rec, err := w.Recover(ctx, false, nil)
	want := []BadSector{{Sector: sector, Offset: h.SectorOffset(sector)}}
	if err != nil || rec.Regions != 1 || rec.AllRegions || rec.Mismatched != 1 || !slices.Equal(rec.BadSectors, want) || rec.Repaired {
		t.Fatalf("Recover = %+v, %v", rec, err)
	}
	if err := w.ReadSectors(make([]byte, ss), sector); err == nil {
		t.Fatal("a mismatched sector was accepted without being asked")
	}
	// The session writes elsewhere in region 1 and syncs: the region stays
	// marked, because it holds a sector left mismatched.
	if err := w.WriteSectors(make([]byte, ss), sector+1); err != nil {
		t.Fatal(err)
	}
	w.Sync()
	w.clearRegions(1)
	w.Close()
	x := mustOpen(t, crashed, false)
	if st := x.State(); !st.Dirty {
		t.Fatalf("state after a session that left a mismatched sector: %+v", st)
	}
	if r, _ := x.DirtyRegions(); !slices.Equal(r, []int64{1}) {
		t.Fatalf("dirty regions %v, want [1]", r)
	}
	rec, err = x.Recover(ctx, true, nil)
	if err != nil || rec.Mismatched != 1 || !rec.Repaired || !slices.Equal(rec.BadSectors, want) {
		t.Fatalf("Recover with repair = %+v, %v", rec, err)
	}
	res, err := x.Verify(ctx, nil, nil)
	if err != nil || res.BadSectors != 0 {
		t.Fatalf("after recovery: %+v, %v", res, err)
	}
	x.Close()
	y := mustOpen(t, crashed, true)
	if st := y.State(); st.Dirty || !st.DigestStale {
		t.Fatalf("recovered state %+v", st)
	}
	if r, _ := y.DirtyRegions(); len(r) != 0 {
		t.Fatalf("bitmap not cleared: %v", r)
	}
	y.Close()

	// Closing a crashed volume without recovering keeps it dirty.
	crashed2 := crashed.clone()
	z := mustOpen(t, crashed2, false)
	z.needsRecovery = true
	z.WriteSectors(make([]byte, ss), 0)
	z.Close()
	if st, _ := ReadState(crashed2, z.h); !st.Dirty {
		t.Fatalf("a volume closed without its recovery is recorded %+v", st)
	}
}

// TestReadOnly: writes and region marks are refused.
func TestReadOnly(t *testing.T) {
	dev, _ := newTestVolume(t, make([]byte, 64<<10), 4096, 32, 64)
	v := mustOpen(t, dev, true)
	defer v.Close()
	if err := v.WriteSectors(make([]byte, 4096), 0); !errors.Is(err, ErrReadOnly) {
		t.Fatal(err)
	}
	if err := v.markRegions(0); !errors.Is(err, ErrReadOnly) {
		t.Fatal(err)
	}
}

var _ io.ReaderAt = (*memDevice)(nil)

// TestDigestIsBLAKE2b512: the digest Create returns and records, and the
// one Decrypt and Verify compute, is x/crypto's BLAKE2b-512 of the whole
// plaintext (what b2sum prints), whatever the number of chunks, where the
// last one ends, and the number of workers (one more than the cores, to
// mix up the order in which chunks finish).
func TestDigestIsBLAKE2b512(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) + 1)
	data := randomData(12, 5*stream.ChunkSize+2*4096)
	for _, c := range []struct{ n, ss, ts int }{
		{4096, 4096, 32}, {stream.ChunkSize - 512, 512, 16}, {stream.ChunkSize, 4096, 0},
		{stream.ChunkSize + 4096, 4096, 32}, {3*stream.ChunkSize + 1024, 1024, 0}, {len(data), 4096, 16},
	} {
		plain := data[:c.n]
		want := xblake2b.Sum512(plain)
		dev := &memDevice{}
		_, got, err := Create(context.Background(), dev, bytes.NewReader(plain), int64(c.n),
			CreateOptions{SectorSize: c.ss, TagSize: c.ts, KDF: testKDF, Passphrase: testPass}, nil)
		if err != nil || got != want {
			t.Fatalf("%d bytes: Create returned digest %x..., want %x... (err %v)", c.n, got[:8], want[:8], err)
		}
		v := mustOpen(t, dev, true)
		if recorded, ok, err := v.h.openDigest(v.key); err != nil || !ok || recorded != want {
			t.Fatalf("%d bytes: the header records %x... (%v, %v)", c.n, recorded[:8], ok, err)
		}
		var out bytes.Buffer
		dc, err := v.Decrypt(context.Background(), &out, true, nil)
		if err != nil || !dc.Match || dc.Computed != want || !bytes.Equal(out.Bytes(), plain) {
			t.Fatalf("%d bytes: Decrypt: %+v, %v", c.n, dc, err)
		}
		res, err := v.Verify(context.Background(), nil, nil)
		if err != nil || !res.Digest.Match || res.Digest.Computed != want {
			t.Fatalf("%d bytes: Verify: %+v, %v", c.n, res, err)
		}
		v.Close()
	}
}

// TestNoDigest: a volume made with NoDigest records none (FlagDigest
// clear, sealed field zero), decrypts to its plaintext without hashing it,
// and its tags still catch a changed sector in Decrypt and Verify.
func TestNoDigest(t *testing.T) {
	plain := randomData(11, stream.ChunkSize+3*4096)
	dev := &memDevice{}
	h, digest, err := Create(context.Background(), dev, bytes.NewReader(plain), int64(len(plain)),
		CreateOptions{SectorSize: 4096, TagSize: 32, KDF: testKDF, Passphrase: testPass, NoDigest: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if h.Flags&FlagDigest != 0 || h.SealedDigest != ([SealedDigestSize]byte{}) || digest != ([64]byte{}) {
		t.Fatalf("NoDigest recorded a digest: flags %#x", h.Flags)
	}
	v := mustOpen(t, dev, true)
	for _, hash := range []bool{false, true} {
		var out bytes.Buffer
		dc, err := v.Decrypt(context.Background(), &out, hash, nil)
		if err != nil || dc.Recorded || dc.Match || dc.Done != hash || !bytes.Equal(out.Bytes(), plain) {
			t.Fatalf("Decrypt(digest %v): %+v, %v", hash, dc, err)
		}
		if hash && dc.Computed != xblake2b.Sum512(plain) {
			t.Fatal("Decrypt computed a wrong digest")
		}
	}
	res, err := v.Verify(context.Background(), nil, nil)
	if err != nil || res.Digest.Recorded || res.BadSectors != 0 {
		t.Fatalf("Verify: %+v, %v", res, err)
	}
	v.Close()

	dev.b[h.DataOffset+4096*5] ^= 1
	v = mustOpen(t, dev, true)
	defer v.Close()
	var ie *IntegrityError
	if _, err := v.Decrypt(context.Background(), io.Discard, false, nil); !errors.As(err, &ie) || ie.Sectors[0].Sector != 5 {
		t.Fatalf("Decrypt without digest of a changed sector: %v", err)
	}
	if res, _ := v.Verify(context.Background(), nil, nil); res.BadSectors != 1 {
		t.Fatalf("Verify of a changed sector: %+v", res)
	}
}

// TestDecryptWithoutDigestSkipsIt: Decrypt(digest false) of a volume that
// records a digest neither computes nor compares it.
func TestDecryptWithoutDigestSkipsIt(t *testing.T) {
	plain := randomData(12, 8*4096)
	dev, _ := newTestVolume(t, plain, 4096, 16, 64)
	v := mustOpen(t, dev, true)
	defer v.Close()
	var out bytes.Buffer
	dc, err := v.Decrypt(context.Background(), &out, false, nil)
	if err != nil || !dc.Recorded || dc.Done || dc.Match || !bytes.Equal(out.Bytes(), plain) {
		t.Fatalf("Decrypt: %+v, %v", dc, err)
	}
}
