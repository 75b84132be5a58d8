package main

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/xtsctl/xtsctl/disk"
)

// laterFormatEnv makes the xtsctl process register laterFormat, a format
// added after this was written (TestMain).
const laterFormatEnv = "XTSCTL_TEST_LATER_FORMAT"

// laterFormat is a format that reads, writes, manages passphrases and
// restores headers, as a future one might: registered, it must appear in
// every help and completion that applies, with nothing else changed.
type laterFormat struct{}

func (laterFormat) Info() disk.FormatInfo {
	return disk.FormatInfo{Name: "later", Aliases: []string{"later2"}, Title: "a later format", Signature: true,
		SlotNoun: "lot", Passphrases: "later lots", WriteName: "later2"}
}
func (laterFormat) Probe(io.ReaderAt, int64) bool { return false }
func (laterFormat) Open(*disk.Image, disk.Options) (disk.Header, error) {
	return nil, disk.ErrNotFormat
}
func (laterFormat) PlanCreate(*disk.CreateOptions) (*disk.CreatePlan, error) {
	return nil, errors.New("not really")
}
func (laterFormat) Create(context.Context, *disk.CreatePlan, *disk.CreateInput, *disk.CreateOutput, *disk.Secret) (*disk.CreateResult, error) {
	return nil, errors.New("not really")
}
func (laterFormat) IsBackup(io.ReaderAt, int64) bool { return false }
func (laterFormat) Restore(*disk.Image, io.ReaderAt, int64, disk.RestoreOptions) (string, error) {
	return "", errors.New("not really")
}

// TestFormatsInHelp: each verb's help lists the formats it takes, from
// the registry, and --type completes to them; a format registered later
// appears in each by itself.
func TestFormatsInHelp(t *testing.T) {
	help := func(later bool, args ...string) string {
		t.Helper()
		cmd := exec.Command("xtsctl", args...)
		cmd.Env = os.Environ()
		if later {
			cmd.Env = append(cmd.Env, laterFormatEnv+"=1")
		}
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("xtsctl %s: %v", strings.Join(args, " "), err)
		}
		return string(out)
	}
	for _, c := range []struct {
		verb        []string
		has, hasNot []string
		later       string
	}{
		{[]string{"open"}, []string{"  luks      a LUKS image (also --type luks1, luks2)\n", "  volume    an xtsctl volume\n", "  plain     a plain image", "  tcrypt    a VeraCrypt", "  bitlk     BitLocker", "  fvault2   FileVault 2"}, nil,
			"  later     a later format (also --type later2)\n"},
		{[]string{"decrypt"}, []string{"  luks      a LUKS image", "  plain     ", "  tcrypt    "}, nil, "  later     a later format"},
		{[]string{"info"}, []string{"  luks      a LUKS image", "  fvault2   "}, nil, "  later     a later format"},
		{[]string{"encrypt"}, []string{"  luks2     a LUKS image\n", "  plain     a plain image", "  volume    an xtsctl volume\n"}, []string{"  tcrypt", "  bitlk"}, "  later2    a later format\n"},
		{[]string{"format"}, []string{"  luks2     a LUKS image\n", "  volume    "}, []string{"  tcrypt"}, "  later2    a later format\n"},
		{[]string{"passphrase", "add"}, []string{"  luks      a LUKS image: its LUKS2 keyslots\n", "  volume    an xtsctl volume: its key slots\n"}, []string{"  plain", "  bitlk"}, "  later     a later format: its later lots\n"},
		{[]string{"passphrase"}, []string{"volume or LUKS keyslots", "  luks      a LUKS image: its LUKS2 keyslots\n"}, nil, "  later     a later format: its later lots\n"},
		{[]string{"header", "backup"}, []string{"  luks      a LUKS image, with its keyslots\n", "  volume    an xtsctl volume, with its key slots\n"}, []string{"  plain"}, "  later     a later format, with its lots\n"},
		{[]string{"header"}, []string{"volume or LUKS keyslots"}, nil, "  later     "},
		{[]string{"verify"}, []string{"  volume    an xtsctl volume: headers"}, []string{"  luks", "  plain"}, ""},
	} {
		name := strings.Join(c.verb, " ")
		now := help(false, append(c.verb, "--help")...)
		for _, s := range c.has {
			if !strings.Contains(now, s) {
				t.Errorf("%s --help lacks %q:\n%s", name, s, now)
			}
		}
		for _, s := range c.hasNot {
			if strings.Contains(now, s) {
				t.Errorf("%s --help has %q", name, s)
			}
		}
		if c.later == "" {
			continue
		}
		if strings.Contains(now, c.later) {
			t.Errorf("%s --help names the later format before it is registered", name)
		}
		if after := help(true, append(c.verb, "--help")...); !strings.Contains(after, c.later) {
			t.Errorf("%s --help, with a later format registered, lacks %q:\n%s", name, c.later, after)
		}
	}

	// --type completes to every format the verb takes, names and aliases.
	complete := func(later bool, verb string) []string {
		out := help(later, "__complete", verb, "--type", "")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		return lines[:len(lines)-1] // the last line is the directive
	}
	want := map[string]string{
		"open":    "bitlk bitlocker fvault2 filevault2 luks luks1 luks2 plain tcrypt veracrypt truecrypt volume",
		"format":  "luks2 plain volume",
		"encrypt": "luks2 plain volume",
	}
	for verb, w := range want {
		if got := strings.Join(complete(false, verb), " "); got != w {
			t.Errorf("%s --type completes to %q, want %q", verb, got, w)
		}
	}
	if got := strings.Join(complete(true, "open"), " "); !strings.Contains(got, "later later2") {
		t.Errorf("with a later format, open --type completes to %q", got)
	}
	if got := strings.Join(complete(true, "format"), " "); !strings.Contains(got, "later2") {
		t.Errorf("with a later format, format --type completes to %q", got)
	}
}
