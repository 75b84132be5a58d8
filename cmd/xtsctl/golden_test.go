package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// goldenDir holds the golden volumes of the current format version;
// goldenV1Dir those of version 1, which must still open.
const (
	goldenDir   = "../../testimages/v2"
	goldenV1Dir = "../../testimages/v1"
)

// plainSHA256 is the SHA-256 of testimages/plain/disk.img, which every
// golden volume holds, and plainDigest its end-to-end digest: what
// coreutils b2sum prints for it (testimages/README.md).
const (
	plainSHA256 = "8ac5289b0af3c93b624b36ac57cc08f8500b471357b5cd09b5ba99b96e4e6384"
	plainDigest = "95f3bc62655707bf2e1e3ff849702875d85ab6e82c444d9a784d6be6a2a0f18433d59fe5aed33a0a0720c14b3061098f4365ac69554d39b1cccd0f0f4a02aea9"
)

// goldenCopy copies a golden volume and the passphrase (mode 0600) into a
// temporary directory: tests never touch testimages/.
func goldenCopy(t *testing.T, name string) (dir, vol, pass string) {
	return goldenCopyFrom(t, goldenDir, name)
}

func goldenCopyFrom(t *testing.T, from, name string) (dir, vol, pass string) {
	t.Helper()
	dir = t.TempDir()
	for _, f := range []string{name, "passphrase.txt"} {
		b, err := os.ReadFile(filepath.Join(from, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir, filepath.Join(dir, name), filepath.Join(dir, "passphrase.txt")
}

func runOut(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(args, strings.NewReader(""), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// TestGoldenVolumes: every committed volume, of version 1 and of version
// 2, verifies, decrypts to the known plaintext, and shows the parameters it
// was made with.
func TestGoldenVolumes(t *testing.T) {
	for _, c := range []struct {
		name                    string
		sectorSize, keyBits, ts int
		label                   string
	}{
		{"disk-4096.vol", 4096, 512, 32, ""},
		{"disk-512-aes128-tag16.vol", 512, 256, 16, "xtsctl-golden"},
		{"disk-xtsctl-nointegrity.vol", 1024, 512, 0, "xtsctl-made"},
	} {
		for version, from := range map[int]string{1: goldenV1Dir, 2: goldenDir} {
			t.Run(fmt.Sprintf("v%d/%s", version, c.name), func(t *testing.T) { goldenVolume(t, from, version, c.name, c.sectorSize, c.keyBits, c.ts, c.label) })
		}
	}
}

func goldenVolume(t *testing.T, from string, version int, name string, sectorSize, keyBits, ts int, label string) {
	c := struct {
		sectorSize, keyBits, ts int
		label                   string
	}{sectorSize, keyBits, ts, label}
	{
		{
			dir, vol, pass := goldenCopyFrom(t, from, name)
			if code, _, stderr := runOut(t, "verify", "--passphrase-file", pass, vol); code != 0 {
				t.Fatalf("verify exited %d: %s", code, stderr)
			}
			out := filepath.Join(dir, "disk.img")
			code, stdout, stderr := runOut(t, "decrypt", "--passphrase-file", pass, vol, out)
			if code != 0 {
				t.Fatalf("decrypt exited %d: %s", code, stderr)
			}
			got, _ := os.ReadFile(out)
			if sum := sha256.Sum256(got); hex.EncodeToString(sum[:]) != plainSHA256 {
				t.Fatal("decrypted image differs from testimages/plain/disk.img")
			}
			if strings.TrimSpace(stdout) != plainDigest {
				t.Fatalf("digest %q is not disk.img's", stdout)
			}
			code, stdout, _ = runOut(t, "info", "--json", vol)
			var info infoJSON
			if code != 0 || json.Unmarshal([]byte(stdout), &info) != nil {
				t.Fatalf("info --json exited %d: %s", code, stdout)
			}
			if info.SectorSize != c.sectorSize || info.KeyBits != c.keyBits || info.TagSize != c.ts ||
				info.Label != c.label || info.DataLength != 2<<20 || !info.State.Clean || info.Version != version || info.Schema != infoSchema {
				t.Fatalf("info: %+v", info)
			}
			if code, _, stderr := runOut(t, "verify", "--passphrase-file", filepath.Join(dir, "nosuch"), vol); code != exitKey {
				t.Fatalf("missing passphrase file: exit %d: %s", code, stderr)
			}
		}
	}
}

// TestGoldenFutureVersion: a volume of a later format version is refused
// by every command, naming both versions.
func TestGoldenFutureVersion(t *testing.T) {
	dir, vol, pass := goldenCopy(t, "future-version.vol")
	orig, _ := os.ReadFile(vol)
	for _, args := range [][]string{
		{"decrypt", "--passphrase-file", pass, vol, filepath.Join(dir, "out")},
		{"verify", "--passphrase-file", pass, vol},
		{"info", vol},
		{"passphrase", "add", "--passphrase-file", pass, "--new-passphrase-file", pass, vol},
		{"header", "backup", vol, filepath.Join(dir, "hdr")},
	} {
		code, _, stderr := runOut(t, args...)
		if code != exitInput || !strings.Contains(stderr, "unsupported volume format version 3 (this xtsctl reads versions 1 and 2)") {
			t.Errorf("%s: exit %d, stderr %q", args[0], code, stderr)
		}
	}
	if now, _ := os.ReadFile(vol); !bytes.Equal(now, orig) {
		t.Fatal("a refused volume was modified")
	}
	for _, f := range []string{"out", "hdr"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			t.Errorf("%s was written", f)
		}
	}
}
