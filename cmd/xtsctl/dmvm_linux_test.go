//go:build linux

package main

import (
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDMBackendVM runs the dm backend for real when XTSCTL_DM_VM=1: the
// machines this project runs on have no device-mapper, so
// scripts/test-dm-vm.sh boots a stock Debian kernel under qemu and runs
// testdata/dmvm/run there with our static xtsctl. The images are made
// here, on the host, with that same binary: an ext4 filesystem (mkfs.ext4
// -d) holding known files, encrypted (1) as a volume without integrity
// tags, (2) as a plain image with --offset, --skip, 4096-byte sectors and
// iv_large_sectors, (3) as a volume with tags and 512-byte sectors, and
// (4) as a LUKS2 image (encrypt --type luks2). The guest opens each with
// --backend dm (or auto), mounts it, checks the files' SHA-256 sums,
// writes, reads status and closes, and checks that no device, loop device,
// mount or record is left; the LUKS2 image it also opens with the real
// cryptsetup (copied into the guest by the script), before and after
// xtsctl wrote to it. It takes about a minute with a cached guest.
func TestDMBackendVM(t *testing.T) {
	if os.Getenv("XTSCTL_DM_VM") != "1" {
		t.Skip("set XTSCTL_DM_VM=1 to test the dm backend against a real kernel in a qemu guest")
	}
	if _, err := exec.LookPath("mkfs.ext4"); err != nil {
		t.Fatal("mkfs.ext4 is missing (scripts/install-deps.sh installs e2fsprogs)")
	}
	payload := t.TempDir()
	work := t.TempDir()
	xtsctl := filepath.Join(payload, "xtsctl")
	build := exec.Command("go", "build", "-o", xtsctl, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	host := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}

	// The files, and their sums as the guest's sha256sum -c reads them.
	tree := filepath.Join(work, "tree")
	files := map[string][]byte{
		"hello.txt":      []byte("hello from the host\n"),
		"empty":          nil,
		"docs/fox.txt":   []byte(strings.Repeat("the quick brown fox jumps over the lazy dog\n", 100)),
		"random.bin":     make([]byte, 1<<20+7),
		"sub/dir/4k.bin": make([]byte, 4096),
	}
	rand.Read(files["random.bin"])
	rand.Read(files["sub/dir/4k.bin"])
	var sums strings.Builder
	for name, data := range files {
		p := filepath.Join(tree, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&sums, "%x  %s\n", sha256.Sum256(data), name)
	}
	write := func(name string, data []byte) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(payload, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("FILES.sha256", []byte(sums.String()))
	key := make([]byte, 64)
	rand.Read(key)
	write("plain.key", key)
	write("pass.txt", []byte("dm backend in a guest\n"))
	run, err := os.ReadFile("testdata/dmvm/run")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(payload, "run"), run, 0o755); err != nil {
		t.Fatal(err)
	}

	// 4 KiB blocks: the dm devices have 4096-byte sectors.
	fs := filepath.Join(work, "fs.img")
	host("mkfs.ext4", "-q", "-F", "-b", "4096", "-L", "xtsctl-dm", "-d", tree, fs, "8M")
	// Tiny Argon2id costs: the guest runs under software emulation.
	kdf := []string{"--passphrase-file", filepath.Join(payload, "pass.txt"), "--kdf-iterations", "1", "--kdf-memory", "1024"}
	host(append(append([]string{xtsctl, "encrypt", "--integrity", "none"}, kdf...), fs, filepath.Join(payload, "vol-none.vol"))...)
	host(append(append([]string{xtsctl, "encrypt", "--sector-size", "512"}, kdf...), fs, filepath.Join(payload, "vol-tags.vol"))...)
	host(xtsctl, "encrypt", "--type", "plain", "--key-file", filepath.Join(payload, "plain.key"),
		"--sector-size", "4096", "--iv-large-sectors", "--offset", "16", "--skip", "8", fs, filepath.Join(payload, "plain.enc"))
	// LUKS2 as cryptsetup lays it out; the key file is the passphrase as
	// cryptsetup reads it, whole.
	write("luks.pass", []byte("LUKS2 in a guest"))
	host(xtsctl, "encrypt", "--type", "luks2", "--key-file", filepath.Join(payload, "luks.pass"), "--kdf-iterations", "4", "--kdf-memory", "1024",
		fs, filepath.Join(payload, "luks.img"))
	fsData, err := os.ReadFile(fs)
	if err != nil {
		t.Fatal(err)
	}
	write("fs.sha256", fmt.Appendf(nil, "%x\n", sha256.Sum256(fsData)))

	script, err := filepath.Abs("../../scripts/test-dm-vm.sh")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", script, "--verbose", "--payload", payload)
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if err != nil || lines[len(lines)-1] != "PASS" || !strings.Contains(string(out), "DMVM-PASS") {
		t.Fatalf("test-dm-vm.sh --payload: %v", err)
	}
}
