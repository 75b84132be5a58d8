package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestKnownHeadersRefused: in-place runs and --type plain recognise every
// header xtsctl knows (our volume, LUKS1 and LUKS2, BitLocker, FileVault 2)
// and refuse it, naming it, with nothing written: encrypting in place (as a
// volume or plain) would wrap or encrypt the header away, and reading the
// image as plain would serve or write garbage. --force reads it as asked.
func TestKnownHeadersRefused(t *testing.T) {
	dir := t.TempDir()
	key := secretFile(t, dir, "key", randomBytes(64))
	pass := secretFile(t, dir, "pass", []byte("known headers"))
	plain := filepath.Join(dir, "plain.img")
	if err := os.WriteFile(plain, randomBytes(2<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	images := map[string]string{}
	vol := filepath.Join(dir, "disk.vol")
	xt(t, "encrypt", "-q", "--passphrase-file", pass, "--kdf-iterations", "1", "--kdf-memory", "64", plain, vol)
	images["an xtsctl volume"] = vol
	l2 := filepath.Join(dir, "disk.luks2")
	xt(t, "encrypt", "-q", "--type", "luks2", "--key-file", pass, plain, l2)
	images["a LUKS2 image"] = l2
	if _, err := exec.LookPath("cryptsetup"); err == nil {
		l1 := filepath.Join(dir, "disk.luks1")
		sparse(t, l1, 4<<20)
		cs(t, append(append([]string{"luksFormat", "--batch-mode", "--type", "luks1", "--key-file", pass}, csPBKDF2...), l1)...)
		images["a LUKS1 image"] = l1
	}
	if bl := extractSample(t, dir, "../../bitlk/testdata/bitlk.tar.xz", "bitlk-aes-xts-128.img"); bl != "" {
		images["BitLocker"] = bl
	}
	if fv := extractSample(t, dir, "../../fvault2/testdata/fvault2.tar.xz", "fvault2-small.img"); fv != "" {
		images["FileVault 2"] = fv
	}
	out := filepath.Join(dir, "out")
	for what, img := range images {
		t.Run(what, func(t *testing.T) {
			before := readFile(t, img)
			refuse := func(args ...string) {
				t.Helper()
				stderr := xtFail(t, exitInput, "", args...)
				if !strings.Contains(strings.ToLower(stderr), strings.ToLower(strings.TrimPrefix(strings.TrimPrefix(what, "a "), "an "))) {
					t.Errorf("xtsctl %s: the refusal does not name %s:\n%s", strings.Join(args, " "), what, stderr)
				}
				if !bytes.Equal(readFile(t, img), before) {
					t.Fatalf("xtsctl %s changed the image", strings.Join(args, " "))
				}
				if _, err := os.Stat(out); err == nil {
					t.Fatalf("xtsctl %s wrote an output", strings.Join(args, " "))
				}
			}
			refuse("encrypt", "--in-place", "--type", "plain", "--key-file", key, img)
			refuse("decrypt", "--in-place", "--type", "plain", "--key-file", key, img)
			refuse("decrypt", "--type", "plain", "--key-file", key, img, out)
			refuse("open", "--type", "plain", "--key-file", key, img, "known")
			if what != "an xtsctl volume" {
				refuse("encrypt", "--in-place", "--passphrase-file", pass, img)
			}
			if _, err := os.Stat(img + ".xtsctl-journal"); err == nil {
				t.Fatal("a refused plain run left a journal")
			}
			// Told so, it reads the image as plain mode, as asked.
			xt(t, "decrypt", "-q", "--force", "--type", "plain", "--key-file", key, img, out)
			os.Remove(out)
		})
	}
}

// extractSample extracts one image of a committed sample archive into
// dir, or returns "" (skipping nothing else) where tar or xz is missing.
func extractSample(t *testing.T, dir, archive, name string) string {
	t.Helper()
	if _, err := exec.LookPath("xz"); err != nil {
		t.Logf("xz missing: %s left out", name)
		return ""
	}
	d := filepath.Join(dir, strings.TrimSuffix(filepath.Base(archive), ".tar.xz"))
	os.MkdirAll(d, 0o700)
	if out, err := exec.Command("tar", "xJSf", archive, "-C", d).CombinedOutput(); err != nil {
		t.Fatalf("extract %s: %v\n%s", archive, err, out)
	}
	var found string
	filepath.WalkDir(d, func(p string, e os.DirEntry, err error) error {
		if err == nil && e.Name() == name {
			found = p
		}
		return nil
	})
	if found == "" {
		t.Fatalf("%s has no %s", archive, name)
	}
	return found
}
