package luks

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The tests compare with the real cryptsetup (Debian cryptsetup-bin,
// installed by scripts/install-deps.sh). It works on image files without
// device-mapper for luksFormat, luksAddKey, luksKillSlot, luksDump,
// luksHeaderBackup and open --test-passphrase. Passphrases always go
// through key files, never argv.

func needCryptsetup(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("cryptsetup"); err != nil {
		t.Skip("cryptsetup is not installed (Debian package cryptsetup-bin, see scripts/install-deps.sh): skipping the comparison with the real cryptsetup")
	}
}

func needPython(t testing.TB) {
	t.Helper()
	if err := exec.Command("/usr/bin/python3", "-c", "import cryptography").Run(); err != nil {
		t.Skip("python3-cryptography is not installed (scripts/install-deps.sh installs it): skipping the comparison with an independent AES-XTS")
	}
}

// cs runs cryptsetup and fails the test if it fails.
func cs(t testing.TB, args ...string) string {
	t.Helper()
	out, err := csErr(args...)
	if err != nil {
		t.Fatalf("cryptsetup %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func csErr(args ...string) (string, error) {
	cmd := exec.Command("cryptsetup", args...)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err := cmd.Run()
	return buf.String(), err
}

func writeFile(t testing.TB, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func randBytes(t testing.TB, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func sparseFile(t testing.TB, path string, size int64) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

// dumpKey asks cryptsetup for the volume key with a passphrase file.
func dumpKey(t testing.TB, img, hdr, pass string, extra ...string) []byte {
	t.Helper()
	vk := filepath.Join(t.TempDir(), "vk")
	args := []string{"luksDump", "--batch-mode", "--dump-volume-key", "--key-file", pass, "--volume-key-file", vk}
	if hdr != "" {
		args = append(args, "--header", hdr)
	}
	args = append(args, extra...)
	cs(t, append(args, img)...)
	b, err := os.ReadFile(vk)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// dumpJSON returns cryptsetup's view of a LUKS2 header's metadata.
func dumpJSON(t testing.TB, img string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(cs(t, "luksDump", "--dump-json-metadata", img)), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// xtsRef runs the independent AES-XTS (testdata/xts_ref.py).
func xtsRef(t testing.TB, op string, key, in []byte, sectorSize int, iv uint64) []byte {
	t.Helper()
	kf := writeFile(t, t.TempDir(), "key", key)
	cmd := exec.Command("/usr/bin/python3", "testdata/xts_ref.py", op, kf, itoa(sectorSize), itoa(int(iv)))
	cmd.Stdin = bytes.NewReader(in)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("xts_ref.py: %v\n%s", err, errb.String())
	}
	return out.Bytes()
}

func itoa(n int) string { return strconv.Itoa(n) }

// openHeader opens path and reads its header.
func openHeader(t testing.TB, path string) (*os.File, *Header) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	h, err := ReadHeader(f, fileSize(t, f))
	if err != nil {
		t.Fatalf("ReadHeader(%s): %v", filepath.Base(path), err)
	}
	return f, h
}

func fileSize(t testing.TB, f *os.File) int64 {
	t.Helper()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

func unlock(t testing.TB, h *Header, f *os.File, pass []byte, slots ...int) ([]byte, int) {
	t.Helper()
	key, slot, err := h.Unlock(context.Background(), f, pass, UnlockOptions{Keyslots: slots})
	if err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	return key, slot
}
