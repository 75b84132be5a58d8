package main

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// smallExt4 makes a 64 MiB image with mkfs.ext4's defaults, which below
// 512 MiB choose 1 KiB blocks, holding one file; it returns the image and
// the file's content.
func smallExt4(t *testing.T, dir string) (img string, data []byte) {
	t.Helper()
	tree := filepath.Join(dir, "tree")
	os.Mkdir(tree, 0o755)
	data = make([]byte, 300<<10)
	rand.Read(data)
	if err := os.WriteFile(filepath.Join(tree, "file"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	img = filepath.Join(dir, "small.img")
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", "-d", tree, img, "64M").CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v\n%s", err, out)
	}
	out, err := exec.Command("dumpe2fs", "-h", img).Output()
	if err != nil || !bytes.Contains(out, []byte("Block size:               1024\n")) {
		t.Fatalf("the test needs mkfs.ext4 to pick 1 KiB blocks: %v\n%s", err, out)
	}
	return img, data
}

// mountAndCheck opens image (flags unlock it) with --mount, reads the
// file back, writes another, closes, opens again and reads both.
func mountAndCheck(t *testing.T, dir, image string, flags []string, data []byte) {
	t.Helper()
	mnt := filepath.Join(dir, "mnt")
	os.MkdirAll(mnt, 0o755)
	mustRun(t, args("open", flags, "--mount", mnt, image, "small")...)
	if got, err := os.ReadFile(filepath.Join(mnt, "file")); err != nil || !bytes.Equal(got, data) {
		mustRun(t, "close", "small")
		t.Fatalf("the file read back from the mounted device: %v (%d bytes)", err, len(got))
	}
	more := make([]byte, 100<<10)
	rand.Read(more)
	writeSynced(t, filepath.Join(mnt, "more"), more)
	mustRun(t, "close", "small")
	mustRun(t, args("open", flags, "--read-only", "--mount", mnt, image, "small")...)
	checkFiles(t, mnt, map[string][]byte{"file": data, "more": more})
	mustRun(t, "close", "small")
}

// TestSmallExt4Mounts: issue 23's point 7. An image whose ext4 has 1 KiB
// blocks, encrypted with the defaults (a volume, a LUKS2 image, a volume
// made in place), gets 1024-byte sectors and is said so, and the device
// mounts (4096-byte sectors would give "invalid argument"). An explicit
// --sector-size above the block size is refused before anything is
// written, naming both sizes and the fix; plain images, whose default is
// 512, are refused only an explicit size too large.
func TestSmallExt4Mounts(t *testing.T) {
	skipUnlessServing(t)
	dir := servingEnv(t)
	img, data := smallExt4(t, dir)
	pass := filepath.Join(dir, "pass")
	os.WriteFile(pass, []byte("small blocks\n"), 0o600)
	kdf := []string{"--kdf-memory", "64", "--kdf-iterations", "1"}
	lowered := "holds an ext4 filesystem with 1024-byte blocks: using 1024-byte sectors (a device with 4096-byte sectors could not mount it)"

	t.Run("volume", func(t *testing.T) {
		vol := filepath.Join(dir, "small.vol")
		r := mustRun(t, args("encrypt", "--passphrase-file", pass, kdf, img, vol)...)
		if !strings.Contains(r.stderr, lowered) {
			t.Errorf("encrypt did not say it lowered the sector size: %q", r.stderr)
		}
		var info struct {
			SectorSize int `json:"sector_size"`
		}
		json.Unmarshal([]byte(mustRun(t, "info", "--json", vol).stdout), &info)
		if info.SectorSize != 1024 {
			t.Fatalf("sector size %d, want 1024", info.SectorSize)
		}
		mountAndCheck(t, dir, vol, []string{"--passphrase-file", pass}, data)
	})

	t.Run("luks2", func(t *testing.T) {
		out := filepath.Join(dir, "small.luks")
		r := mustRun(t, "encrypt", "--type", "luks2", "--key-file", pass, "--kdf-memory", "1M", "--kdf-iterations", "4", img, out)
		if !strings.Contains(r.stderr, lowered) {
			t.Errorf("encrypt did not say it lowered the sector size: %q", r.stderr)
		}
		mountAndCheck(t, dir, out, []string{"--key-file", pass}, data)
	})

	t.Run("in place", func(t *testing.T) {
		target := filepath.Join(dir, "inplace.img")
		b, err := os.ReadFile(img)
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(target, b, 0o600)
		r := mustRun(t, args("encrypt", "--in-place", "--passphrase-file", pass, kdf, target)...)
		if !strings.Contains(r.stderr, lowered) {
			t.Errorf("encrypt --in-place did not say it lowered the sector size: %q", r.stderr)
		}
		mountAndCheck(t, dir, target, []string{"--passphrase-file", pass}, data)
	})

	t.Run("refused", func(t *testing.T) {
		key := filepath.Join(dir, "key")
		k := make([]byte, 64)
		rand.Read(k)
		os.WriteFile(key, k, 0o600)
		target := filepath.Join(dir, "refused.img")
		b, _ := os.ReadFile(img)
		os.WriteFile(target, b, 0o600)
		listing := func() []string {
			des, _ := os.ReadDir(dir)
			var names []string
			for _, de := range des {
				names = append(names, de.Name())
			}
			return names
		}
		before := listing()
		for _, c := range [][]string{
			args("encrypt", "--sector-size", "4096", "--passphrase-file", pass, kdf, img, filepath.Join(dir, "out.vol")),
			args("encrypt", "--sector-size", "2048", "--passphrase-file", pass, kdf, img, filepath.Join(dir, "out.vol")),
			{"encrypt", "--type", "luks2", "--sector-size", "4096", "--key-file", pass, img, filepath.Join(dir, "out.luks")},
			{"encrypt", "--type", "plain", "--sector-size", "4096", "--key-file", key, img, filepath.Join(dir, "out.enc")},
			args("encrypt", "--in-place", "--sector-size", "4096", "--passphrase-file", pass, kdf, target),
			{"encrypt", "--in-place", "--type", "plain", "--sector-size", "4096", "--key-file", key, target},
		} {
			ss := c[slices.Index(c, "--sector-size")+1]
			r := mustFail(t, exitUsage, "--sector-size "+ss+" is too large for ", c...)
			for _, want := range []string{"it holds an ext4 filesystem with 1024-byte blocks: a device with " + ss + "-byte sectors could not mount it",
				"hint: give --sector-size 1024, or leave it out"} {
				if !strings.Contains(r.stderr, want) {
					t.Errorf("%s: stderr %q lacks %q", strings.Join(c, " "), r.stderr, want)
				}
			}
		}
		if after := listing(); !slices.Equal(after, before) {
			t.Errorf("the refusals left files: %v, before %v", after, before)
		}
		if got, _ := os.ReadFile(target); !bytes.Equal(got, b) {
			t.Error("the in-place target changed after a refusal")
		}
		// A new plain run after one that finished the other way is
		// checked too: its journal records the finished decryption of a
		// filesystem with 4 KiB blocks, then a 1 KiB one is made there.
		again := filepath.Join(dir, "again.img")
		if out, err := exec.Command("mkfs.ext4", "-q", "-F", "-b", "4096", again, "64M").CombinedOutput(); err != nil {
			t.Fatalf("mkfs.ext4: %v\n%s", err, out)
		}
		plain4k := []string{"--type", "plain", "--sector-size", "4096", "--key-file", key, again}
		mustRun(t, args("encrypt", "--in-place", plain4k)...)
		mustRun(t, args("decrypt", "--in-place", plain4k)...)
		if out, err := exec.Command("mkfs.ext4", "-q", "-F", "-b", "1024", again).CombinedOutput(); err != nil {
			t.Fatalf("mkfs.ext4: %v\n%s", err, out)
		}
		b, _ = os.ReadFile(again)
		r := mustFail(t, exitUsage, "--sector-size 4096 is too large for ", args("encrypt", "--in-place", plain4k)...)
		if !strings.Contains(r.stderr, "1024-byte blocks") {
			t.Errorf("after a finished run: %q", r.stderr)
		}
		if got, _ := os.ReadFile(again); !bytes.Equal(got, b) {
			t.Error("the in-place target changed after a refusal (after a finished run)")
		}

		// Sizes the filesystem allows are taken as given, the plain
		// default (512) among them.
		mustRun(t, args("encrypt", "--sector-size", "512", "--passphrase-file", pass, kdf, img, filepath.Join(dir, "ok.vol"))...)
		r = mustRun(t, "encrypt", "--type", "plain", "--key-file", key, img, filepath.Join(dir, "ok.enc"))
		if strings.Contains(r.stderr, "using") {
			t.Errorf("plain with its default: %q", r.stderr)
		}
	})
}
