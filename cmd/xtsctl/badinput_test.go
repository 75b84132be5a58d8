package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// badInputFixture builds the files the matrix below refers to and returns
// a function expanding @name to their paths.
func badInputFixture(t *testing.T) (dir string, expand func([]string) []string) {
	t.Helper()
	dir = t.TempDir()
	write := func(name string, data []byte, mode os.FileMode) {
		if err := os.WriteFile(filepath.Join(dir, name), data, mode); err != nil {
			t.Fatal(err)
		}
	}
	write("key", []byte("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ!?"), 0o600)
	write("key31", bytes.Repeat([]byte{7}, 31), 0o600)
	write("key48", bytes.Repeat([]byte{7, 8, 9}, 16), 0o600)
	write("pass", []byte("good passphrase\n"), 0o600)
	write("wrongpass", []byte("not the passphrase\n"), 0o600)
	write("emptypass", nil, 0o600)
	write("empty.img", nil, 0o644)
	write("plain.img", make([]byte, 64<<10), 0o644)
	write("odd.img", make([]byte, 1000), 0o644)
	junk := make([]byte, 1<<20)
	for i := range junk {
		junk[i] = byte(i*131 + i>>8)
	}
	write("junk.img", junk, 0o644)
	write("exists.out", []byte("keep me"), 0o644)
	if err := os.Mkdir(filepath.Join(dir, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runOut(t, "format", "-q", "--passphrase-file", filepath.Join(dir, "pass"), "--size", "64K", filepath.Join(dir, "vol")); code != 0 {
		t.Fatalf("format: %s", stderr)
	}
	expand = func(args []string) []string {
		out := make([]string, len(args))
		for i, a := range args {
			out[i] = a
			if strings.HasPrefix(a, "@") {
				out[i] = filepath.Join(dir, a[1:])
			}
		}
		return out
	}
	return dir, expand
}

// TestBadInputMatrix runs every command with bad input of every kind. Each
// must fail with its documented exit code (docs/CLI.md) and exactly one
// error line naming the problem, print no stack trace, and change no file.
func TestBadInputMatrix(t *testing.T) {
	dir, expand := badInputFixture(t)
	plainEnc := []string{"encrypt", "--type", "plain", "--key-file", "@key"}
	plainDec := []string{"decrypt", "--type", "plain", "--key-file", "@key"}
	volEnc := []string{"encrypt", "--passphrase-file", "@pass"}
	volDec := []string{"decrypt", "--passphrase-file", "@pass"}
	cat := func(a []string, b ...string) []string { return append(append([]string(nil), a...), b...) }
	// What must never appear in any output, in any form we might print.
	var secrets []string
	for _, f := range []string{"key", "key31", "key48", "pass", "wrongpass"} {
		b, _ := os.ReadFile(filepath.Join(dir, f))
		b = bytes.TrimSuffix(b, []byte("\n"))
		secrets = append(secrets, string(b), hex.EncodeToString(b), fmt.Sprintf("%q", b))
	}

	for _, tc := range []struct {
		args []string
		code int
		want string // a regexp the error line must match
	}{
		// Missing and extra arguments, unknown commands and flags.
		{nil, exitOK, ""}, // bare xtsctl prints help
		{[]string{"frobnicate"}, exitUsage, `unknown command "frobnicate"`},
		{[]string{"encrypt"}, exitUsage, `missing argument IN OUT`},
		{[]string{"encrypt", "@plain.img"}, exitUsage, `missing argument OUT`},
		{[]string{"encrypt", "a", "b", "c"}, exitUsage, `unexpected argument "c"`},
		{[]string{"decrypt"}, exitUsage, `missing argument IN OUT`},
		{[]string{"format", "@new"}, exitUsage, `"size" not set`},
		{[]string{"verify"}, exitUsage, `missing argument IMAGE`},
		{[]string{"info"}, exitUsage, `missing argument IMAGE`},
		{[]string{"passphrase"}, exitUsage, `missing subcommand`},
		{[]string{"passphrase", "frob", "@vol"}, exitUsage, `unknown command "frob"`},
		{[]string{"passphrase", "add"}, exitUsage, `missing argument IMAGE`},
		{[]string{"header"}, exitUsage, `missing subcommand`},
		{[]string{"header", "backup", "@vol"}, exitUsage, `missing argument FILE`},
		{[]string{"open", "@vol"}, exitUsage, `missing argument NAME`},
		{[]string{"close"}, exitUsage, `missing argument NAME`},
		{[]string{"version", "extra"}, exitUsage, `takes no arguments`},
		{[]string{"encrypt", "--nope", "a", "b"}, exitUsage, `unknown flag: --nope`},
		{[]string{"verify", "-Z", "@vol"}, exitUsage, `unknown shorthand flag: 'Z'`},
		{[]string{"status", "--json=maybe"}, exitUsage, `invalid argument "maybe"`},

		// Wrong types, negative numbers, huge sizes.
		{cat(plainEnc, "--sector-size", "abc", "@plain.img", "@o"), exitUsage, `invalid argument "abc" for "--sector-size"`},
		{cat(plainEnc, "--sector-size", "-512", "@plain.img", "@o"), exitUsage, `unsupported sector size -512`},
		{cat(plainEnc, "--sector-size", "8192", "@plain.img", "@o"), exitUsage, `unsupported sector size 8192`},
		{cat(plainEnc, "--offset", "-1", "@plain.img", "@o"), exitUsage, `invalid argument "-1" for "-o, --offset"`},
		{cat(plainEnc, "--skip", "1e3", "@plain.img", "@o"), exitUsage, `invalid argument "1e3" for "-p, --skip"`},
		{cat(plainEnc, "--offset", "18446744073709551615", "@plain.img", "@o"), exitUsage, `offset 18446744073709551615 is too large`},
		{[]string{"format", "--size", "-1M", "@new"}, exitUsage, `invalid size "-1M"`},
		{[]string{"format", "--size", "abc", "@new"}, exitUsage, `invalid size "abc"`},
		{[]string{"format", "--size", "0", "@new"}, exitUsage, `--size 0 is not a positive whole number`},
		{[]string{"format", "--passphrase-file", "@pass", "--size", "1000000T", "@new"}, exitUsage, `larger than the 1 PiB maximum`},
		{[]string{"format", "--passphrase-file", "@pass", "--size", "99999999999999999999", "@new"}, exitUsage, `invalid size`},
		{cat(volEnc, "--tag-size", "7", "@plain.img", "@o"), exitUsage, `unsupported --tag-size 7`},
		{cat(volEnc, "--integrity", "sha1", "@plain.img", "@o"), exitUsage, `unknown --integrity "sha1"`},
		{cat(volEnc, "--kdf-memory", "-5", "@plain.img", "@o"), exitUsage, `--kdf-memory: invalid size "-5"`},
		{cat(volEnc, "--kdf-time", "forever", "@plain.img", "@o"), exitUsage, `--kdf-time`},
		{[]string{"encrypt", "--type", "luks3", "@plain.img", "@o"}, exitUsage, `unknown --type "luks3" \(want volume, plain or luks2\)`},
		{[]string{"encrypt", "--type", "luks1", "@plain.img", "@o"}, exitUsage, `unsupported --type luks1: xtsctl reads LUKS1 images but writes only LUKS2`},
		{cat(volEnc, "--key-file", "@key", "@plain.img", "@o"), exitUsage, `--key-file does not apply to --type volume`},
		{[]string{"bench", "--sizes", "abc"}, exitUsage, `"abc" is not a length in bytes`},
		{[]string{"bench", "--sizes", "8"}, exitUsage, `8 bytes is too short`},
		{[]string{"bench", "--threads", "-1"}, exitUsage, `--threads -1`},
		{[]string{"bench", "--time", "-1s"}, exitUsage, `--time -1s`},
		{[]string{"bench", "--variant", "nope"}, exitUsage, `unknown variant "nope"`},
		{[]string{"bench", "--key-size", "384"}, exitUsage, `--key-size`},
		{[]string{"open", "--passphrase-file", "@pass", "@vol", "bad/name"}, exitUsage, `invalid NAME "bad/name"`},
		{[]string{"info", "--json", "--dm-table", "@vol"}, exitUsage, `--json and --dm-table do not go together`},

		// Nonexistent files, directories, devices, empty files.
		{cat(plainEnc, "@nosuch", "@o"), exitInput, `input .*nosuch does not exist`},
		{cat(plainEnc, "@dir", "@o"), exitInput, `is a directory`},
		{cat(plainEnc, "/dev/null", "@o"), exitInput, `/dev/null is not a regular file or block device`},
		{cat(plainEnc, "@empty.img", "@o"), exitInput, `is empty`},
		{cat(plainEnc, "@odd.img", "@o"), exitInput, `1000 bytes, not a whole number of 512-byte sectors`},
		{cat(volDec, "@nosuch", "@o"), exitInput, `does not exist`},
		{cat(volDec, "@dir", "@o"), exitInput, `is a directory`},
		{[]string{"verify", "@nosuch"}, exitInput, `does not exist`},
		{[]string{"verify", "@dir"}, exitInput, `is a directory`},
		{[]string{"verify", "@empty.img"}, exitInput, `is empty`},
		{[]string{"verify", "/dev/zero"}, exitInput, `not a regular file or block device`},
		{[]string{"info", "@nosuch"}, exitInput, `does not exist`},
		{[]string{"open", "@nosuch", "name"}, exitInput, `does not exist`},
		{[]string{"open", "@dir", "name"}, exitInput, `is a directory`},
		{[]string{"header", "restore", "@vol", "@nosuch"}, exitInput, `does not exist`},

		// Files that are not volumes (named before any passphrase is asked).
		{[]string{"verify", "@junk.img"}, exitInput, `is not an xtsctl volume`},
		{[]string{"info", "@junk.img"}, exitInput, `is not an xtsctl volume`},
		{[]string{"info", "@plain.img"}, exitInput, `is not an xtsctl volume`},
		{cat(volDec, "@junk.img", "@o"), exitInput, `is not an xtsctl volume`},
		{[]string{"passphrase", "add", "@junk.img"}, exitInput, `is not an xtsctl volume`},
		{[]string{"header", "backup", "@junk.img", "@o"}, exitInput, `is not an xtsctl volume`},
		{[]string{"header", "restore", "@vol", "@junk.img"}, exitInput, `not a header backup`},
		{[]string{"open", "@junk.img", "name"}, exitInput, `is not an xtsctl volume`},

		// Wrong keys and passphrases.
		{cat([]string{"encrypt", "--type", "plain", "--key-file", "@key31"}, "@plain.img", "@o"), exitKey, `holds 31 bytes`},
		{cat([]string{"encrypt", "--type", "plain", "--key-file", "@key48"}, "@plain.img", "@o"), exitKey, `holds 48 bytes`},
		{cat([]string{"decrypt", "--type", "plain", "--key-file", "@nosuch"}, "@plain.img", "@o"), exitKey, `key file .*nosuch does not exist`},
		{cat([]string{"encrypt", "--type", "plain", "--key-file", "@dir"}, "@plain.img", "@o"), exitKey, `key file .*dir is a directory`},
		{[]string{"encrypt", "--type", "plain", "@plain.img", "@o"}, exitUsage, `--type plain needs --key-file`},
		{[]string{"decrypt", "--passphrase-file", "@wrongpass", "@vol", "@o"}, exitKey, `wrong passphrase`},
		{[]string{"verify", "--passphrase-file", "@wrongpass", "@vol"}, exitKey, `wrong passphrase`},
		{[]string{"passphrase", "add", "--passphrase-file", "@wrongpass", "--new-passphrase-file", "@pass", "@vol"}, exitKey, `wrong passphrase`},
		{[]string{"info", "--dm-table", "--show-key", "--passphrase-file", "@wrongpass", "--key-output", "@o", "@vol"}, exitKey, `wrong passphrase`},
		{[]string{"open", "--passphrase-file", "@wrongpass", "@vol", "name"}, exitKey, `wrong passphrase`},
		{cat(volEnc[:1], "--passphrase-file", "@emptypass", "@plain.img", "@o"), exitKey, `passphrase file .*emptypass is empty`},
		{cat(volEnc[:1], "--passphrase-file", "@nosuch", "@plain.img", "@o"), exitKey, `passphrase file .*nosuch does not exist`},
		{[]string{"verify", "--passphrase-file", "@dir", "@vol"}, exitKey, `passphrase file .*dir is a directory`},
		{[]string{"verify", "@vol"}, exitUsage, `no terminal to ask for the passphrase`},

		// Outputs that must not be overwritten.
		{cat(plainEnc, "@plain.img", "@exists.out"), exitOutput, `already exists \(use --force to overwrite\)`},
		{cat(volEnc, "@plain.img", "@exists.out"), exitOutput, `already exists`},
		{cat(plainDec, "@junk.img", "@dir"), exitOutput, `is a directory`},
		{cat(plainEnc, "@plain.img", "@nodir/o"), exitOutput, `cannot create output`},
		{[]string{"format", "--passphrase-file", "@pass", "--size", "64K", "@exists.out"}, exitOutput, `already exists`},
		{[]string{"header", "backup", "@vol", "@exists.out"}, exitOutput, `already exists`},
		{cat(plainEnc, "--force", "@plain.img", "@plain.img"), exitUsage, `input and output are the same file`},

		// Names that are not open.
		{[]string{"close", "nosuchname"}, exitUsage, `nosuchname is not open`},
		{[]string{"status", "nosuchname"}, exitUsage, `nosuchname is not open`},
	} {
		args := expand(tc.args)
		name := strings.Join(tc.args, " ")
		before := snapshot(t, dir)
		code, stdout, stderr := runOut(t, args...)
		if code != tc.code {
			t.Errorf("xtsctl %s: exit code %d, want %d\n%s", name, code, tc.code, stderr)
			continue
		}
		if strings.Contains(stderr, "goroutine ") || strings.Contains(stderr, "panic") {
			t.Errorf("xtsctl %s: stack trace or panic:\n%s", name, stderr)
		}
		for _, secret := range secrets {
			if strings.Contains(stdout+stderr, secret) {
				t.Errorf("xtsctl %s: output shows a key or passphrase", name)
			}
		}
		if tc.code == exitOK {
			if !strings.Contains(stdout, "Usage:") {
				t.Errorf("xtsctl %s: no usage text", name)
			}
			continue
		}
		var errLines []string
		for _, l := range strings.Split(strings.TrimSpace(stderr), "\n") {
			if strings.HasPrefix(l, "xtsctl: error: ") {
				errLines = append(errLines, l)
			} else if !strings.HasPrefix(l, "xtsctl: ") {
				t.Errorf("xtsctl %s: stray stderr line %q", name, l)
			}
		}
		if len(errLines) != 1 {
			t.Errorf("xtsctl %s: %d error lines, want 1:\n%s", name, len(errLines), stderr)
			continue
		}
		if !regexp.MustCompile(tc.want).MatchString(errLines[0]) {
			t.Errorf("xtsctl %s: error %q does not match %q", name, errLines[0], tc.want)
		}
		if after := snapshot(t, dir); after != before {
			t.Errorf("xtsctl %s: changed the files:\nbefore %s\nafter  %s", name, before, after)
		}
	}
}

// snapshot summarises the names, sizes and contents of dir's files.
func snapshot(t *testing.T, dir string) string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, de := range des {
		b.WriteString(de.Name())
		if !de.IsDir() {
			data, _ := os.ReadFile(filepath.Join(dir, de.Name()))
			sum := sha256.Sum256(data)
			b.WriteString("=" + string(sum[:4]))
		}
		b.WriteString(" ")
	}
	return b.String()
}
