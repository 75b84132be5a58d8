package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// readmeUse returns the lines of the README's Use section's shell blocks,
// in order, as printed (comments and blank lines left out).
func readmeUse(t *testing.T) []string {
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
	var lines []string
	for _, block := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(use, -1) {
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
	lines := readmeUse(t)
	if len(lines) < 20 {
		t.Fatalf("the README's Use section has only %d lines", len(lines))
	}
	bin, err := exec.LookPath("xtsctl")
	if err != nil {
		t.Fatal(err)
	}
	dir := servingEnv(t)
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
	// What the lines say they make.
	for _, name := range []string{"disk.enc", "disk.vol", "empty.vol", "disk.hdr", "disk.luks", "inplace.img.xtsctl-journal"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("the README's lines made no %s", name)
		}
	}
}
