//go:build linux

package main

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/xtsctl/xtsctl/internal/mount"
)

// TestLUKSOpenMount: open --mount of LUKS2 images holding an ext4
// filesystem reads its files, through the FUSE backend (this host has no
// device-mapper; the dm backend is tested in a qemu guest, TestDMBackendVM).
// Three images: one xtsctl encrypt --type luks2 wrote; one whose header
// cryptsetup made and whose data x/crypto/xts encrypted with the key
// cryptsetup dumps; and that one with a detached header. A file written
// through the mount is there after close and a read-only reopen, and, in
// the cryptsetup images, where x/crypto/xts and debugfs find it.
func TestLUKSOpenMount(t *testing.T) {
	skipUnlessServing(t)
	needCryptsetup(t)
	dir := servingEnv(t)

	tree := filepath.Join(dir, "tree")
	files := map[string][]byte{
		"hello.txt":    []byte("hello from a LUKS2 image\n"),
		"random.bin":   randomBytes(1<<20 + 7),
		"sub/4k.bin":   randomBytes(4096),
		"empty":        nil,
		"sub/deep/odd": randomBytes(513),
	}
	for name, data := range files {
		p := filepath.Join(tree, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fs := filepath.Join(dir, "fs.img")
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", "-b", "4096", "-d", tree, fs, "8M").CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v\n%s", err, out)
	}
	fsData := readFile(t, fs)
	pass := secretFile(t, dir, "pass", []byte("mount me\n"))

	ours := filepath.Join(dir, "ours.luks")
	mustRun(t, "encrypt", "--type", "luks2", "--key-file", pass, fs, ours)

	theirs := filepath.Join(dir, "theirs.luks")
	sparse(t, theirs, 16<<20+int64(len(fsData)))
	cs(t, append(append([]string{"luksFormat", "--batch-mode", "--type", "luks2", "--key-file", pass}, csPBKDF2...), theirs)...)
	theirsKey := csKey(t, theirs, "", pass)
	writeAt(t, theirs, refXTS(t, true, theirsKey, fsData, 4096), 16<<20)

	data := filepath.Join(dir, "detached.data")
	hdr := filepath.Join(dir, "detached.hdr")
	sparse(t, data, int64(len(fsData)))
	sparse(t, hdr, 16<<20)
	cs(t, append(append([]string{"luksFormat", "--batch-mode", "--type", "luks2", "--sector-size", "512", "--header", hdr, "--key-file", pass}, csPBKDF2...), data)...)
	detachedKey := csKey(t, data, hdr, pass)
	writeAt(t, data, refXTS(t, true, detachedKey, fsData, 512), 0)

	mnt := filepath.Join(dir, "mnt")
	os.Mkdir(mnt, 0o755)
	for _, c := range []struct {
		name, img string
		extra     []string
		key       []byte // to check the write with x/crypto/xts; nil: xtsctl wrote the image
		offset    int64
		ss        int
	}{
		{"ours", ours, nil, nil, 16 << 20, 4096},
		{"theirs", theirs, nil, theirsKey, 16 << 20, 4096},
		{"detached", data, []string{"--header", hdr}, detachedKey, 0, 512},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := mustRun(t, args("open", "--key-file", pass, c.extra, "--mount", mnt, c.img, "lk")...)
			dev := strings.TrimSpace(r.stdout)
			if src := mount.Source(mnt); src == "" || src != dev {
				t.Fatalf("%s is mounted from %q, open printed %q", mnt, src, dev)
			}
			for name, want := range files {
				if got, err := os.ReadFile(filepath.Join(mnt, name)); err != nil || !bytes.Equal(got, want) {
					t.Errorf("%s: %v, equal %v", name, err, bytes.Equal(got, want))
				}
			}
			vs := statusOf(t, "lk")
			if vs.Type != "luks" || vs.Backend != "fuse" || vs.Cipher == nil || vs.Cipher.Name != "aes-xts-plain64" ||
				vs.Cipher.KeyBits != 512 || vs.Cipher.SectorSize != c.ss || vs.Cipher.DataOffset != c.offset {
				t.Errorf("status: %+v, cipher %+v", vs, vs.Cipher)
			}
			written := []byte(strings.Repeat("written through the LUKS mount\n", 300))
			writeSynced(t, filepath.Join(mnt, "new.txt"), written)
			mustRun(t, "close", "lk")
			if mount.Source(mnt) != "" {
				t.Fatal("close left the filesystem mounted")
			}

			mustRun(t, args("open", "--key-file", pass, c.extra, "--read-only", "--mount", mnt, c.img, "lk")...)
			if got, _ := os.ReadFile(filepath.Join(mnt, "new.txt")); !bytes.Equal(got, written) {
				t.Error("new.txt is not there after a reopen")
			}
			if err := os.WriteFile(filepath.Join(mnt, "x"), nil, 0o600); !errors.Is(err, syscall.EROFS) {
				t.Errorf("writing to a read-only open: %v, want EROFS", err)
			}
			mustRun(t, "close", "lk")

			// Without xtsctl: x/crypto/xts decrypts the data segment
			// and e2fsprogs find the file in it.
			plain := filepath.Join(dir, c.name+".plain")
			if c.key != nil {
				ct := readAt(t, c.img, len(fsData), c.offset)
				os.WriteFile(plain, refXTS(t, false, c.key, ct, c.ss), 0o600)
			} else {
				mustRun(t, "decrypt", "--key-file", pass, c.img, plain)
			}
			if out, err := exec.Command("e2fsck", "-f", "-n", plain).CombinedOutput(); err != nil {
				t.Fatalf("e2fsck: %v\n%s", err, out)
			}
			dump := filepath.Join(dir, c.name+".new")
			if out, err := exec.Command("debugfs", "-R", "dump /new.txt "+dump, plain).CombinedOutput(); err != nil {
				t.Fatalf("debugfs: %v\n%s", err, out)
			}
			if got := readFile(t, dump); sha256.Sum256(got) != sha256.Sum256(written) {
				t.Error("debugfs finds another new.txt in the decrypted image")
			}
		})
	}
}
