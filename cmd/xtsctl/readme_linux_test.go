package main

import (
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// readmeUse returns the lines of the README's Use section's shell blocks,
// in order, as printed (comments and blank lines left out): those before
// the part on other tools' formats, or (others) those after it.
func readmeUse(t *testing.T, others bool) []string {
	t.Helper()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	use, ok := strings.CutPrefix(string(readme)[max(strings.Index(string(readme), "\n## Use\n"), 0):], "\n## Use\n")
	if !ok {
		t.Fatal("README.md has no Use section")
	}
	if i := strings.Index(use, "\n## "); i >= 0 {
		use = use[:i]
	}
	// The blocks after the one naming the samples of other tools' formats
	// are TestReadmeOtherFormats's: their files come from the repository.
	own, rest, _ := strings.Cut(use, otherFormatsMark)
	if others {
		return readmeBlocks(t, rest)
	}
	return readmeBlocks(t, own)
}

// otherFormatsMark starts the README's part on other tools' formats.
const otherFormatsMark = "VeraCrypt/TrueCrypt containers, BitLocker and FileVault 2"

// readmeBlocks returns the lines of the shell blocks in text.
func readmeBlocks(t *testing.T, text string) []string {
	t.Helper()
	var lines []string
	for _, block := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(text, -1) {
		for line := range strings.SplitSeq(block[1], "\n") {
			line = strings.TrimSpace(line)
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			if strings.HasSuffix(line, "\\") {
				t.Fatalf("README line %q continues on the next: keep each line whole", line)
			}
			lines = append(lines, line)
		}
	}
	return lines
}

// TestReadmeUseRunsAsWritten runs the README's Use blocks exactly as
// printed, line after line as a user pasting them would, each in bash
// with pipefail, in an empty directory with xtsctl (this test binary)
// on PATH, as root: every file a line uses must come from an earlier
// line, passphrases come from the files the lines make, and whatever a
// failed line leaves open or mounted is closed at the end (servingEnv).
func TestReadmeUseRunsAsWritten(t *testing.T) {
	skipUnlessServing(t)
	lines := readmeUse(t, false)
	if len(lines) < 20 {
		t.Fatalf("the README's Use section has only %d lines", len(lines))
	}
	dir := servingEnv(t)
	runReadmeLines(t, dir, lines)
	// What the lines say they make.
	for _, name := range []string{"disk.enc", "disk.vol", "empty.vol", "disk.hdr", "disk.luks", "inplace.img.xtsctl-journal"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("the README's lines made no %s", name)
		}
	}
}

// runReadmeLines runs each line in dir as a user pasting it would: in
// bash with pipefail, with xtsctl (this test binary) on PATH.
func runReadmeLines(t *testing.T, dir string, lines []string) {
	t.Helper()
	bin, err := exec.LookPath("xtsctl")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "bin")
	if err := os.Mkdir(path, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(bin, filepath.Join(path, "xtsctl")); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "PATH="+path+":"+os.Getenv("PATH"))
	for _, line := range lines {
		if strings.Contains(line, "/dev/sd") || strings.HasPrefix(line, "cryptsetup ") {
			t.Fatalf("README line %q needs what a fresh machine may not have: make it a comment", line)
		}
		cmd := exec.Command("bash", "-o", "pipefail", "-c", line)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("README line %q: %v\n%s", line, err, out)
		}
	}
}

// TestReadmeOtherFormats runs the README's lines on other tools' formats
// as printed, over the repository's sample images copied under the names
// the README gives, and checks what they decrypt against the samples'
// notes (the SHA-256 of the BitLocker device and of the FileVault 2
// logical volume).
func TestReadmeOtherFormats(t *testing.T) {
	skipUnlessServing(t)
	lines := readmeUse(t, true)
	if len(lines) < 4 {
		t.Fatalf("the README's part on other formats has only %d lines", len(lines))
	}
	dir := servingEnv(t)
	samples := t.TempDir()
	bitlocker := extractSample(t, samples, "../../bitlk/testdata/bitlk.tar.xz", "bitlk-aes-xts-128.img")
	mac := extractSample(t, samples, "../../fvault2/testdata/fvault2.tar.xz", "fvault2-small.img")
	if bitlocker == "" || mac == "" {
		t.Skip("xz missing: the samples cannot be unpacked")
	}
	for name, from := range map[string]string{"bitlocker.img": bitlocker, "mac.img": mac, "vc.img": "../../tcrypt/testdata/vc_1-sha512-xts-aes"} {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for name, pw := range map[string]string{"bitlocker.pw": "anaconda", "mac.pw": "heslo123", "vc.pw": "aaaaaaaaaaaa"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(pw+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "mnt"), 0o755); err != nil {
		t.Fatal(err)
	}
	runReadmeLines(t, dir, lines)
	for name, want := range map[string]string{
		"bitlocker.dec": "674e3a976927fd62f3fc26df2c695cac75b8d364e3b45393717efa971f16db0f", // bitlk/testdata/README.md
		"mac.dec":       "2c662e36c0f7e2f5583e6a939bbcbdc660805692d0fccaa45ad4052beb3b8e18", // fvault2/testdata/README.md
	} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatalf("the README's lines made no %s: %v", name, err)
		}
		if got := fmt.Sprintf("%x", sha256.Sum256(b)); got != want {
			t.Errorf("%s: SHA-256 %s, the sample's notes say %s", name, got, want)
		}
	}
}
