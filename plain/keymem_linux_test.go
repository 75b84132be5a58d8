package plain

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/xtsctl/xtsctl/disk"
	"github.com/xtsctl/xtsctl/disk/disktest"
	"github.com/xtsctl/xtsctl/internal/keymem"
)

const memTestKey = "../testimages/plain/test-256.key"

// TestKeyFingerprintHelper is the memory test's helper process (it does
// nothing in a normal run): it reads the key file itself.
func TestKeyFingerprintHelper(t *testing.T) {
	h := keymem.Helper(t)
	key, err := os.ReadFile(memTestKey)
	if err != nil {
		t.Fatal(err)
	}
	h.Print(keymem.Secret{Name: "key", Key: key})
}

// TestNoKeysInMemoryAfterClose opens a copy of a plain test image through
// the format layer with its key file, reads and writes through the
// device, closes it, and then searches the process's memory for the key
// (SECURITY.md, "Keys in memory", says what Go does not let a program
// guarantee).
func TestNoKeysInMemoryAfterClose(t *testing.T) {
	keymem.Skip(t)
	if !keymem.Isolated(t) {
		return
	}
	b, err := os.ReadFile("../testimages/plain/disk-512.enc")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "disk-512.enc")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	fps := keymem.Fingerprints(t, "TestKeyFingerprintHelper", nil)
	key, err := os.ReadFile(memTestKey)
	if err != nil {
		t.Fatal(err)
	}
	dev := disktest.Attach(t, Format, path, nil, &disk.Secret{KeyFiles: [][]byte{key}, KeyFileNames: []string{memTestKey}}, false)
	dev.ReadWrite(t)
	fps.CheckClose(t, []string{"key"}, func() { dev.Close(t) })
}
