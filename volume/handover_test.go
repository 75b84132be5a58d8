package volume

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	xxts "golang.org/x/crypto/xts"
)

// TestReleaseMarkClean: a volume without tags handed to another writer is
// dirty with its digest stale for as long as that writer runs; what the
// writer wrote (here x/crypto XTS, as dm-crypt would write it) reads back
// once MarkClean has recorded the clean close, without a key.
func TestReleaseMarkClean(t *testing.T) {
	const ss = 1024
	plain := randomData(21, 96<<10)
	dev, h := newTestVolume(t, plain, ss, 0, 64)

	v := mustOpen(t, dev, false)
	key := v.MasterKey()
	syncs := dev.syncs
	closeRecord, err := v.Release()
	if err != nil {
		t.Fatal(err)
	}
	if dev.syncs == syncs {
		t.Error("Release did not sync")
	}
	if !allZero(v.key) {
		t.Error("Release left the master key in memory")
	}
	if err := v.WriteSectors(make([]byte, ss), 0); !errors.Is(err, ErrClosed) {
		t.Errorf("WriteSectors after Release: %v, want ErrClosed", err)
	}
	st, _ := ReadState(dev, h)
	if !st.Valid || !st.Dirty || !st.DigestStale {
		t.Fatalf("state after Release %+v, want dirty and digest stale", st)
	}

	// The other writer: sector 5 rewritten, plain64 tweaks in 512-byte
	// units from the start of the data area.
	xc, err := xxts.NewCipher(newAES, key)
	if err != nil {
		t.Fatal(err)
	}
	written := bytes.Repeat([]byte("dm-crypt wrote this sector. "), ss/28+1)[:ss]
	ct := make([]byte, ss)
	xc.Encrypt(ct, written, 5*ss/512)
	copy(dev.b[h.DataOffset+5*ss:], ct)

	// Without the record Release made, a version-2 volume cannot be
	// marked clean (it would take the key); a forged one is refused.
	if err := MarkClean(dev, dev.size(), nil); err == nil {
		t.Error("MarkClean without the close record succeeded")
	}
	syncs = dev.syncs
	if err := MarkClean(dev, dev.size(), closeRecord); err != nil {
		t.Fatal(err)
	}
	if dev.syncs == syncs {
		t.Error("MarkClean did not sync")
	}
	st, warnings := ReadState(dev, h)
	if !st.Valid || st.Dirty || !st.DigestStale || len(warnings) > 0 {
		t.Fatalf("state after MarkClean %+v %q, want clean with the digest stale", st, warnings)
	}

	w := mustOpen(t, dev, true)
	defer w.Close()
	if strings.Contains(strings.Join(w.Warnings(), "\n"), "not closed cleanly") {
		t.Errorf("warnings after MarkClean: %q", w.Warnings())
	}
	got := make([]byte, len(plain))
	if err := w.ReadSectors(got, 0); err != nil {
		t.Fatal(err)
	}
	want := bytes.Clone(plain)
	copy(want[5*ss:], written)
	if !bytes.Equal(got, want) {
		t.Error("the volume does not read back what the other writer wrote")
	}
	res, err := w.Verify(context.Background(), nil, nil)
	if err != nil || !res.Digest.Stale || res.Digest.Match {
		t.Errorf("Verify after the handover: %+v, %v; want the digest stale", res.Digest, err)
	}

	// Clean already: nothing is written.
	before := bytes.Clone(dev.b)
	if err := MarkClean(dev, dev.size(), closeRecord); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, dev.b) {
		t.Error("MarkClean rewrote a clean volume")
	}
}

// TestReleaseCrash: a volume released and never marked clean (the machine
// went down under dm-crypt) opens as not closed cleanly, and its recovery
// has no tags to redo.
func TestReleaseCrash(t *testing.T) {
	dev, h := newTestVolume(t, randomData(22, 64<<10), 4096, 0, 64)
	if _, err := mustOpen(t, dev, false).Release(); err != nil {
		t.Fatal(err)
	}
	v := mustOpen(t, dev, false)
	if !strings.Contains(strings.Join(v.Warnings(), "\n"), "not closed cleanly") {
		t.Errorf("warnings %q", v.Warnings())
	}
	if _, err := v.Release(); err == nil {
		t.Error("Release of a volume that needs recovery succeeded")
	}
	v = mustOpen(t, dev, false)
	if rec, err := v.Recover(context.Background(), false, nil); err != nil || rec.Regions != 0 || rec.Mismatched != 0 {
		t.Fatalf("Recover = %+v, %v; want 0 regions", rec, err)
	}
	if _, err := v.Release(); err != nil {
		t.Fatalf("Release after Recover: %v", err)
	}
	if st, _ := ReadState(dev, h); !st.Dirty {
		t.Fatalf("state %+v after the second Release", st)
	}
}

// TestReleaseRefusesTags: a volume with tags is never handed over, and
// neither call changes it.
func TestReleaseRefusesTags(t *testing.T) {
	dev, h := newTestVolume(t, randomData(23, 64<<10), 4096, 32, 64)
	before := bytes.Clone(dev.b)
	if _, err := mustOpen(t, dev, false).Release(); !errors.Is(err, ErrHasTags) {
		t.Errorf("Release of a tagged volume: %v, want ErrHasTags", err)
	}
	if err := MarkClean(dev, dev.size(), nil); !errors.Is(err, ErrHasTags) {
		t.Errorf("MarkClean of a tagged volume: %v, want ErrHasTags", err)
	}
	if !bytes.Equal(before, dev.b) {
		t.Error("the tagged volume was written")
	}
	if st, _ := ReadState(dev, h); st.Dirty || st.DigestStale {
		t.Errorf("state %+v", st)
	}

	dev, _ = newTestVolume(t, randomData(24, 64<<10), 4096, 0, 64)
	if _, err := mustOpen(t, dev, true).Release(); !errors.Is(err, ErrReadOnly) {
		t.Errorf("Release of a read-only volume: %v, want ErrReadOnly", err)
	}
}
