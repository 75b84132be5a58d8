package luks

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
)

// TestCheckUnlock: the refusals that come before any passphrase, each
// with its type, and the keyslots Unlock is then given.
func TestCheckUnlock(t *testing.T) {
	const size = 17 << 20
	f, h, key := fastFormat(t, filepath.Join(t.TempDir(), "img"), size, []byte("zero"), FormatOptions{})
	three := 3
	if _, err := h.AddKeyslot(f, size, key, []byte("three"), KeyslotOptions{Argon2: fastArgon2, Keyslot: &three}); err != nil {
		t.Fatal(err)
	}
	if got, err := h.CheckUnlock(nil); got != nil || err != nil {
		t.Errorf("CheckUnlock(nil) = %v, %v; want any keyslot", got, err)
	}
	if got, err := h.CheckUnlock(&three); !slices.Equal(got, []int{3}) || err != nil {
		t.Errorf("CheckUnlock(3) = %v, %v", got, err)
	}
	five := 5
	_, err := h.CheckUnlock(&five)
	var se *KeyslotStateError
	if !errors.As(err, &se) || se.Keyslot != 5 || se.InUse || err.Error() != "keyslot 5 is not in use (keyslots in use: 0, 3)" {
		t.Errorf("CheckUnlock(5) = %v", err)
	}

	// Unusable keyslots, as cryptsetup treats them: one of another type
	// is passed over; one with an unknown KDF stops the search, so the
	// keyslots after it are never tried (and CheckUnlock says so before any
	// prompt), unless one is picked.
	path := f.Name()
	edit := func(e func(m *jvalue)) *Header {
		t.Helper()
		rewriteMeta(t, path, e, nil)
		h, err := readPath(t, path)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	h = edit(func(m *jvalue) { m.get("keyslots").get("0").set("type", jstr("frob")) })
	if got, err := h.CheckUnlock(nil); got != nil || err != nil {
		t.Errorf("keyslot 0 of another type, 3 usable: %v, %v", got, err)
	}
	h = edit(func(m *jvalue) {
		k := m.get("keyslots").get("0")
		k.set("type", jstr("luks2"))
		k.get("kdf").set("type", jstr("scrypt"))
	})
	var stop *KeyslotStopError
	if _, err := h.CheckUnlock(nil); !errors.As(err, &stop) || stop.Keyslot != 0 || !slices.Equal(stop.Untried, []int{3}) || !errors.Is(err, ErrUnsupported) {
		t.Errorf("keyslot 0 with an unknown KDF first: %v", err)
	}
	if _, _, err := h.Unlock(context.Background(), f, []byte("three"), UnlockOptions{}); !errors.As(err, &stop) {
		t.Errorf("Unlock with keyslot 3's passphrase behind keyslot 0: %v", err)
	}
	if got, err := h.CheckUnlock(&three); !slices.Equal(got, []int{3}) || err != nil {
		t.Errorf("keyslot 3 picked: %v, %v", got, err)
	}
	zero := 0
	var ue *UnsupportedError
	if _, err := h.CheckUnlock(&zero); !errors.As(err, &ue) || ue.Feature != FeatureKDF || ue.Keyslot != 0 || !reflect.DeepEqual(err, h.Keyslots[0].Err) {
		t.Errorf("CheckUnlock(0) = %v, want the keyslot's own error %v", err, h.Keyslots[0].Err)
	}
	h = edit(func(m *jvalue) {
		m.get("keyslots").get("0").set("type", jstr("frob"))
		m.get("keyslots").get("3").set("type", jstr("frob"))
	})
	var nu *UnusableKeyslotsError
	if _, err := h.CheckUnlock(nil); !errors.As(err, &nu) || len(nu.Errs) != 2 || !errors.Is(err, ErrUnsupported) {
		t.Errorf("no usable keyslot: %v", err)
	}

	// A header with no keyslot at all, and one this package cannot decrypt.
	h.Keyslots = nil
	if _, err := h.CheckUnlock(nil); !errors.Is(err, ErrNoKeyslot) {
		t.Errorf("no keyslot: %v", err)
	}
	h.Segment.Cipher = "serpent-xts-plain64"
	if _, err := h.CheckUnlock(nil); !errors.Is(err, ErrUnsupported) {
		t.Errorf("unsupported cipher: %v", err)
	}
	if _, err := h.CheckTestPassphrase(nil); !errors.Is(err, ErrNoKeyslot) {
		t.Errorf("a passphrase test does not mind the cipher: %v", err)
	}
}

// TestRollback: a backup brings back the keyslots changed or removed since
// it was taken and drops the ones added since.
func TestRollback(t *testing.T) {
	const size = 17 << 20
	f, backup, key := fastFormat(t, filepath.Join(t.TempDir(), "img"), size, []byte("zero"), FormatOptions{})
	if back, gone := Rollback(backup, backup); back != nil || gone != nil {
		t.Errorf("the same header: back %v, gone %v", back, gone)
	}
	h, err := ReadHeader(f, size)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"one", "two"} {
		if _, err := h.AddKeyslot(f, size, key, []byte(p), fastSlot); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.ChangeKeyslot(f, size, 0, key, []byte("zero again"), fastSlot); err != nil {
		t.Fatal(err)
	}
	if err := h.RemoveKeyslot(f, size, 1, RemoveOptions{}); err != nil {
		t.Fatal(err)
	}
	cur, err := ReadHeader(f, size)
	if err != nil {
		t.Fatal(err)
	}
	if ids := cur.KeyslotIDs(); !slices.Equal(ids, []int{0, 2}) {
		t.Fatalf("keyslots %v after the changes", ids)
	}
	if back, gone := Rollback(cur, backup); !slices.Equal(back, []int{0}) || !slices.Equal(gone, []int{2}) {
		t.Errorf("back %v, gone %v; want back [0] (changed), gone [2] (added)", back, gone)
	}
}

// TestDetect: LUKS headers are recognised, also with the primary copy
// gone; other data is not.
func TestDetect(t *testing.T) {
	const size = 17 << 20
	f, _, _ := fastFormat(t, filepath.Join(t.TempDir(), "img"), size, []byte("p"), FormatOptions{})
	if !Detect(f, size) {
		t.Error("a new image is not detected")
	}
	if _, err := f.WriteAt(make([]byte, 4096), 0); err != nil {
		t.Fatal(err)
	}
	if !Detect(f, size) {
		t.Error("an image with only its secondary header is not detected")
	}
	junk := bytes.Repeat([]byte("not a LUKS header "), 4096)
	if Detect(bytes.NewReader(junk), int64(len(junk))) || Detect(bytes.NewReader(nil), 0) {
		t.Error("junk or nothing is taken for LUKS")
	}
}

// TestCreate: a new image holds the plaintext (or zeros), and progress
// starts at 0 and climbs to the data segment's length.
func TestCreate(t *testing.T) {
	dir := t.TempDir()
	opt := FormatOptions{Keyslot: fastSlot, DigestIterations: 1000, SectorSize: 512}
	plain := randBytes(t, 3<<20+100) // not whole sectors: padded with zeros
	for _, withData := range []bool{true, false} {
		size := opt.ImageSize(int64(len(plain)))
		f, err := os.Create(filepath.Join(dir, "img"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := f.Truncate(size); err != nil {
			t.Fatal(err)
		}
		var seen []int64
		var src io.Reader // nil: zeros
		if withData {
			src = bytes.NewReader(plain)
		}
		h, err := Create(context.Background(), f, size, []byte("pass"), opt, src, func(n int64) { seen = append(seen, n) })
		if err != nil {
			t.Fatal(err)
		}
		_, n, _ := h.DataRange(size)
		if len(seen) < 2 || seen[0] != 0 || seen[len(seen)-1] != n || !slices.IsSorted(seen) {
			t.Errorf("progress %v, want 0 first, climbing to %d", seen, n)
		}
		key, _, err := h.Unlock(context.Background(), f, []byte("pass"), UnlockOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if _, err := h.Decrypt(context.Background(), key, f, size, &out, nil); err != nil {
			t.Fatal(err)
		}
		want := make([]byte, n)
		if withData {
			copy(want, plain)
		}
		if !bytes.Equal(out.Bytes(), want) {
			t.Errorf("with plaintext %v: the data segment does not decrypt to it", withData)
		}
	}
}
