package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLUKSTestPassphraseUnservable: open --test-passphrase checks the
// passphrase of headers whose data xtsctl cannot serve, as cryptsetup does
// (it needs only the keyslot and its digest), and says afterwards what
// cannot be served; decrypt refuses them (exit 3), pointing to cryptsetup
// only where cryptsetup opens them. A header alone given as an image is
// wrong input (exit 3), with the --header hint.
func TestLUKSTestPassphraseUnservable(t *testing.T) {
	needCryptsetup(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	for _, c := range []struct {
		name      string
		edit      func(m map[string]any)
		cryptsetp bool // the hint to use cryptsetup is right
	}{
		{"cipher", func(m map[string]any) { obj(m, "segments", "0")["encryption"] = "serpent-xts-plain64" }, true},
		{"requirement", func(m map[string]any) {
			obj(m, "config")["requirements"] = map[string]any{"mandatory": []any{"future-feature"}}
		}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			img, pass := csLUKS2(t, dir, c.name)
			editLUKS2(t, img, c.edit)
			if !csOK("open", "--test-passphrase", "--key-file", pass, img) {
				t.Fatal("cryptsetup does not take the passphrase of this header: the case tests nothing")
			}
			_, stderr := xt(t, "open", "--test-passphrase", "--key-file", pass, img)
			if !strings.Contains(stderr, "the passphrase opens keyslot 0") || !strings.Contains(stderr, "its data cannot be served") {
				t.Errorf("--test-passphrase on a header whose data cannot be served:\n%s", stderr)
			}
			xtFail(t, exitKey, "no keyslot opens", "open", "--test-passphrase", "--key-file", secretFile(t, dir, c.name+".wrong", []byte("wrong")), img)
			stderr = xtFail(t, exitInput, "", "decrypt", "--key-file", pass, img, out)
			if hinted := strings.Contains(stderr, "cryptsetup, with device-mapper, opens"); hinted != c.cryptsetp {
				t.Errorf("decrypt: the cryptsetup hint is given: %v, want %v:\n%s", hinted, c.cryptsetp, stderr)
			}
			if _, err := os.Stat(out); err == nil {
				t.Fatal("decrypt wrote an output")
			}
		})
	}
	t.Run("header only", func(t *testing.T) {
		img, pass := csLUKS2(t, dir, "full")
		hdr := filepath.Join(dir, "hdr")
		cs(t, "luksHeaderBackup", "--header-backup-file", hdr, img)
		stderr := xtFail(t, exitInput, "", "decrypt", "--key-file", pass, hdr, out)
		if !strings.Contains(stderr, "--header") {
			t.Errorf("a header alone as the image: no hint to give it with --header:\n%s", stderr)
		}
	})
}
