package main

import (
	"bytes"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// refPython is Debian's python, which has the modules volume_ref.py needs.
const refPython = "/usr/bin/python3"

// needReference skips the test where scripts/volume_ref.py cannot run (its
// modules are missing); scripts/install-deps.sh installs them for CI.
func needReference(t *testing.T) {
	t.Helper()
	if err := exec.Command(refPython, "-c", "import cryptography, argon2, nacl").Run(); err != nil {
		t.Skip("python3-cryptography, python3-argon2 and python3-nacl are needed (scripts/install-deps.sh)")
	}
}

func reference(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(refPython, append([]string{"../../scripts/volume_ref.py"}, args...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		return stderr.String(), err
	}
	return strings.TrimSpace(stdout.String()), nil
}

// TestVolumeReference: xtsctl and volume_ref.py, an independent Python
// implementation of docs/FORMAT.md, read each other's volumes, for every
// sector size, tag size and key size; and the reference reader rejects an
// xtsctl volume with a flipped data bit, so its checks are real.
func TestVolumeReference(t *testing.T) {
	needReference(t)
	dir := t.TempDir()
	pass := filepath.Join(dir, "pass")
	os.WriteFile(pass, []byte("reference passphrase\n"), 0o600)
	plain := filepath.Join(dir, "plain.img")
	r := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, 96<<10)
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	os.WriteFile(plain, data, 0o600)

	for _, c := range []struct {
		ss, ts, bits string
		noDigest     bool
	}{{"512", "16", "256", false}, {"1024", "32", "512", false}, {"2048", "16", "512", false}, {"4096", "32", "256", false}, {"4096", "0", "512", false},
		{"1024", "16", "512", true}} {
		name := "ss" + c.ss + "-tag" + c.ts + "-key" + c.bits
		if c.noDigest {
			name += "-nodigest"
		}
		// xtsctl writes, the reference reads.
		vol := filepath.Join(dir, name+".vol")
		args := []string{"encrypt", "--passphrase-file", pass, "--sector-size", c.ss, "--key-size", c.bits}
		if c.ts == "0" {
			args = append(args, "--integrity", "none")
		} else {
			args = append(args, "--tag-size", c.ts)
		}
		if c.noDigest {
			args = append(args, "--digest", "none")
		}
		code, stdout, stderr := runOut(t, append(args, plain, vol)...)
		if code != 0 {
			t.Fatalf("%s: encrypt: %s", name, stderr)
		}
		out := filepath.Join(dir, name+".ref.img")
		digest, err := reference(t, "read", vol, pass, out)
		if err != nil {
			t.Fatalf("%s: the reference cannot read xtsctl's volume: %s", name, digest)
		}
		if got, _ := os.ReadFile(out); !bytes.Equal(got, data) {
			t.Fatalf("%s: the reference decrypts xtsctl's volume wrong", name)
		}
		if c.noDigest {
			if stdout != "" {
				t.Fatalf("%s: encrypt --digest none printed %q", name, stdout)
			}
			continue // what the reference writes has a digest
		}
		if strings.TrimSpace(stdout) != digest {
			t.Fatalf("%s: digests differ: xtsctl %q, reference %q", name, stdout, digest)
		}

		// The reference writes, xtsctl reads.
		if c.ts == "0" {
			continue // the reference writes tagged volumes only
		}
		refVol := filepath.Join(dir, name+".ref.vol")
		if _, err := reference(t, "write", plain, refVol, pass, "--sector-size", c.ss, "--tag-size", c.ts, "--key-bits", c.bits); err != nil {
			t.Fatalf("%s: reference write: %v", name, err)
		}
		if code, _, stderr := runOut(t, "verify", "--passphrase-file", pass, refVol); code != 0 {
			t.Fatalf("%s: xtsctl verify of the reference's volume: %s", name, stderr)
		}
		back := filepath.Join(dir, name+".back.img")
		if code, _, stderr := runOut(t, "decrypt", "--passphrase-file", pass, refVol, back); code != 0 {
			t.Fatalf("%s: xtsctl decrypt of the reference's volume: %s", name, stderr)
		}
		if got, _ := os.ReadFile(back); !bytes.Equal(got, data) {
			t.Fatalf("%s: xtsctl decrypts the reference's volume wrong", name)
		}
	}

	// The reference's own checks fire.
	vol := filepath.Join(dir, "ss4096-tag32-key256.vol")
	b, _ := os.ReadFile(vol)
	b[1<<20+5000] ^= 1
	os.WriteFile(vol, b, 0o600)
	if msg, err := reference(t, "read", vol, pass, filepath.Join(dir, "x")); err == nil || !strings.Contains(msg, "bad sectors: 1") {
		t.Fatalf("the reference reader accepted a damaged volume: %q", msg)
	}
}
