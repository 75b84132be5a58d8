package volume

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestOpenWithPassphrase: an image that cannot be opened is refused
// before the passphrase is asked for; otherwise the passphrase is asked
// once and unlocks with the options given.
func TestOpenWithPassphrase(t *testing.T) {
	dev, _ := newTestVolume(t, make([]byte, 64<<10), 4096, 32, 64)
	path := writeTestImage(t, dev)
	asked := 0
	ask := func(p []byte) func() ([]byte, error) {
		return func() ([]byte, error) { asked++; return slices.Clone(p), nil }
	}
	opts := UnlockOptions{Slot: -1, Limits: DefaultKDFLimits()}

	junk := filepath.Join(t.TempDir(), "junk")
	if err := os.WriteFile(junk, make([]byte, 64<<10), 0o600); err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(t.TempDir(), "cut")
	if err := os.WriteFile(cut, dev.b[:len(dev.b)-4096], 0o600); err != nil {
		t.Fatal(err)
	}
	var te *TruncatedError
	for _, tc := range []struct {
		path string
		ok   func(error) bool
	}{
		{junk, func(err error) bool { return errors.Is(err, ErrNotVolume) }},
		{cut, func(err error) bool { return errors.As(err, &te) }},
		{filepath.Join(t.TempDir(), "missing"), func(err error) bool { return errors.Is(err, os.ErrNotExist) }},
	} {
		if _, err := OpenWithPassphrase(tc.path, true, ask(testPass), opts); !tc.ok(err) || asked != 0 {
			t.Errorf("%s: %v, asked %d times", filepath.Base(tc.path), err, asked)
		}
	}

	if _, err := OpenWithPassphrase(path, true, ask([]byte("wrong")), opts); !errors.Is(err, ErrWrongPassphrase) || asked != 1 {
		t.Fatalf("wrong passphrase: %v, asked %d times", err, asked)
	}
	stop := errors.New("no terminal")
	if _, err := OpenWithPassphrase(path, true, func() ([]byte, error) { return nil, stop }, opts); err != stop {
		t.Fatalf("the callback's error: %v", err)
	}
	opts.Slot = 1
	if _, err := OpenWithPassphrase(path, true, ask(testPass), opts); !errors.Is(err, ErrNoSuchSlot) {
		t.Fatalf("unlock options not used: %v", err)
	}
	opts.Slot = -1
	v, err := OpenWithPassphrase(path, false, ask(testPass), opts)
	if err != nil || v.Slot() != 0 {
		t.Fatalf("right passphrase: %v", err)
	}
	// It holds the lock of a read-write open.
	if _, err := OpenWithPassphrase(path, true, ask(testPass), opts); !errors.Is(err, ErrInUse) {
		t.Fatalf("second open while open read-write: %v", err)
	}
	v.Close()
}

// TestOpenForHeader: the image is locked as for writing (refused while a
// volume is open, even read-only, and refusing opens while held), and a
// header that cannot be read still gives the file, for a restore.
func TestOpenForHeader(t *testing.T) {
	dev, h := newTestVolume(t, make([]byte, 64<<10), 4096, 32, 64)
	path := writeTestImage(t, dev)

	ro, err := Open(path, testPass, true)
	if err != nil {
		t.Fatal(err)
	}
	if f, _, _, err := OpenForHeader(path); f != nil || !errors.Is(err, ErrInUse) {
		t.Fatalf("while open read-only: %v", err)
	}
	ro.Close()

	f, size, hs, err := OpenForHeader(path)
	if err != nil || size != dev.size() || hs.Header.UUID != h.UUID {
		t.Fatalf("OpenForHeader: size %d, %v", size, err)
	}
	if _, err := Open(path, testPass, true); !errors.Is(err, ErrInUse) {
		t.Fatalf("open while the header is being rewritten: %v", err)
	}
	f.Close()

	if f, _, _, err := OpenForHeader(filepath.Join(t.TempDir(), "missing")); f != nil || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing image: %v", err)
	}
	// Both copies damaged: the error of ReadHeaders, with the file open.
	b := slices.Clone(dev.b)
	b[100] ^= 1
	b[h.SecondaryOffset+100] ^= 1
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	f, size, _, err = OpenForHeader(path)
	var hd *HeadersDamagedError
	if f == nil || size != int64(len(b)) || !errors.As(err, &hd) {
		t.Fatalf("damaged headers: file %v, size %d, %v", f, size, err)
	}
	f.Close()
}
