package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xtsctl/xtsctl/volume"
)

// The attacks of issue 13 as a user meets them: the attacker can write the
// image but does not know the passphrase.

// TestExpensiveKDFRefused: a key slot rewritten to ask for 4 GiB × 1000
// passes × 255 threads is not run by any command that unlocks: each says
// which slot and what it asks for, at once, with exit 4.
func TestExpensiveKDFRefused(t *testing.T) {
	dir := t.TempDir()
	vol, pass := filepath.Join(dir, "disk.vol"), filepath.Join(dir, "pass")
	os.WriteFile(pass, []byte("attack test\n"), 0o600)
	if code, _, stderr := runOut(t, "format", "-q", "--passphrase-file", pass, "--kdf-iterations", "1", "--kdf-memory", "64", "--size", "1M", vol); code != 0 {
		t.Fatal(stderr)
	}
	f, err := os.OpenFile(vol, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := f.Stat()
	hs, err := volume.ReadHeaders(f, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	h := *hs.Header
	h.Slots[0].KDF = volume.KDFParams{Time: volume.MaxKDFTime, MemoryKiB: volume.MaxKDFMemoryKiB, Threads: 255}
	b, err := h.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt(b, 0)
	f.WriteAt(b, h.SecondaryOffset)
	f.Close()

	for _, args := range [][]string{
		{"verify", "--passphrase-file", pass, vol},
		{"decrypt", "--passphrase-file", pass, vol, filepath.Join(dir, "out")},
		{"info", "--dm-table", "--show-key", "--key-output", filepath.Join(dir, "key"), "--passphrase-file", pass, vol},
		{"passphrase", "add", "--passphrase-file", pass, "--new-passphrase-file", pass, vol},
	} {
		start := time.Now()
		code, _, stderr := runOut(t, args...)
		if code != exitKey || !strings.Contains(stderr, "key slot 0 asks for Argon2id with 4 GiB × 1000 passes × 255 threads") ||
			!strings.Contains(stderr, "--allow-expensive-kdf") {
			t.Errorf("%s: exit %d, %q", args[0], code, stderr)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("%s took %v: the KDF ran", args[0], d)
		}
	}
}
