package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeUseRunsAsWritten runs the README's Use examples for plain
// images and volumes, line by line in one directory holding disk.img, with
// ./xtsctl being the command under test. Two changes only: lines that
// would ask for a passphrase on the terminal get --passphrase-file (and
// --new-passphrase-file), and the cryptsetup line is left out (it needs
// device-mapper; docs/DM.md and the VM test cover it).
func TestReadmeUseRunsAsWritten(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	use := string(readme)
	if i := strings.Index(use, "\n## Use\n"); i >= 0 {
		use = use[i:]
	} else {
		t.Fatal("README.md has no Use section")
	}
	blocks := regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(use, 2)
	if len(blocks) < 2 {
		t.Fatal("README.md's Use section lost its examples")
	}
	bin, err := exec.LookPath("xtsctl")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	img, err := os.ReadFile("../../testimages/plain/disk.img")
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"disk.img": img, "pw": []byte("readme passphrase\n"), "pw2": []byte("another one\n")} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(bin, filepath.Join(dir, "xtsctl")); err != nil {
		t.Fatal(err)
	}
	needsPass := regexp.MustCompile(`^\./xtsctl (encrypt|format|verify|decrypt|passphrase add|header backup|info)\b`)
	ran := 0
	for _, block := range blocks {
		for _, line := range strings.Split(block[1], "\n") {
			line = strings.TrimSpace(line)
			if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "cryptsetup ") || strings.HasPrefix(line, "go build ") {
				continue
			}
			if m := needsPass.FindString(line); m != "" && !strings.Contains(line, "--type plain") {
				flags := " --passphrase-file pw"
				switch {
				case strings.HasSuffix(m, "passphrase add"):
					flags += " --new-passphrase-file pw2"
				case strings.HasSuffix(m, "header backup"), strings.HasSuffix(m, "info"):
					flags = ""
				}
				line = m + flags + line[len(m):]
			}
			cmd := exec.Command("bash", "-euo", "pipefail", "-c", line)
			cmd.Dir = dir
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("README line %q: %v\n%s", line, err, out)
			}
			ran++
		}
	}
	if ran < 8 {
		t.Fatalf("only %d README lines ran", ran)
	}
	if _, err := os.Stat(filepath.Join(dir, "disk.hdr")); err != nil {
		t.Error("the header backup line wrote nothing")
	}
}
