package bitlk

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/xtsctl/xtsctl/disk"
)

// TestCheckNeeds: what Check says an unlock will try and ask for.
func TestCheckNeeds(t *testing.T) {
	xts := samplePath(t, "bitlk-aes-xts-128.img")
	startup := samplePath(t, "bitlk-aes-xts-128-startup-key.img")
	clearKey := buildImage(t, t.TempDir(), buildSpec{method: 0x8004, seed: 8, protectors: []protSpec{{protection: protPassword, secret: "x"}, {protection: protClearKey}, {protection: protRecovery, secret: testRecovery}}})
	for _, c := range []struct {
		name       string
		path       string
		req        *disk.Request
		pass, key  disk.Want
		prompt     string
		tries      string
		secretless bool
	}{
		{"password-or-recovery", xts, request(), disk.WantRequired, disk.WantNone, "password or recovery password for " + xts, "protectors 0 (password), 1 (recovery password)", false},
		{"recovery", xts, request(OptRecovery, "true"), disk.WantRequired, disk.WantNone, "recovery password for " + xts, "protector 1 (recovery password)", false},
		{"by-type", xts, request(OptProtector, "Password"), disk.WantRequired, disk.WantNone, "password for " + xts, "protector 0 (password)", false},
		{"by-guid", xts, request(OptProtector, "64311DEA-4587-4029-924A-BA299647998E"), disk.WantRequired, disk.WantNone, "recovery password for " + xts, "protector 1 (recovery password)", false},
		{"startup-or-passwords", startup, request(), disk.WantOptional, disk.WantOptional, "password or recovery password for " + startup + " (empty with a startup key file)", "protectors 0 (password), 1 (recovery password), 2 (startup key)", false},
		{"startup-only", startup, request(OptProtector, "startup-key"), disk.WantNone, disk.WantRequired, "", "protector 2 (startup key)", false},
		{"suspended", clearKey.path, request(), disk.WantNone, disk.WantNone, "", "protector 1 (clear key (protection suspended))", true},
		{"suspended-password", clearKey.path, request(OptProtector, "password"), disk.WantRequired, disk.WantNone, "password for " + clearKey.path, "protector 0 (password)", false},
		{"suspended-recovery", clearKey.path, request(OptRecovery, "true"), disk.WantRequired, disk.WantNone, "recovery password for " + clearKey.path, "protector 2 (recovery password)", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			need, err := mustOpen(t, c.path).Check(c.req)
			if err != nil {
				t.Fatal(err)
			}
			if need.Passphrase != c.pass || need.KeyFile != c.key || need.Prompt != c.prompt || need.Tries != c.tries {
				t.Errorf("need %+v, want passphrase %d, key file %d, prompt %q, tries %q", *need, c.pass, c.key, c.prompt, c.tries)
			}
			if c.secretless {
				u := mustUnlock(t, c.path, c.req, nil)
				if u.Slot != 1 || !strings.Contains(strings.Join(u.Warnings, " "), "suspended") {
					t.Errorf("clear-key unlock: slot %d, warnings %q", u.Slot, u.Warnings)
				}
			}
		})
	}
}

// bdeinfoTitles maps libbde's method names to ours.
var bdeinfoTitles = map[string]string{
	"AES-CBC 128-bit with Diffuser": "AES-CBC-128 with the Elephant diffuser",
	"AES-CBC 256-bit with Diffuser": "AES-CBC-256 with the Elephant diffuser",
	"AES-CBC 128-bit":               "AES-CBC-128",
	"AES-CBC 256-bit":               "AES-CBC-256",
	"AES-XTS 128-bit":               "AES-XTS-128",
	"AES-XTS 256-bit":               "AES-XTS-256",
}

var bdeinfoTypes = map[string]string{
	"Password": "password", "Recovery password": "recovery", "Startup key": "startup-key",
	"Clear key": "clear-key", "TPM": "tpm",
}

// TestReportAgainstPeers: what info reports of each sample is what
// bdeinfo (libbde) reads there — method, volume GUID, creation time to
// the 100 ns, description, every protector's GUID and type — and the
// metadata copies and moved boot sectors are where cryptsetup's
// bitlkDump puts them; the three copies agree.
func TestReportAgainstPeers(t *testing.T) {
	needTool(t, "bdeinfo", "libbde-utils")
	field := regexp.MustCompile(`(?m)^[ \t]*([A-Za-z ]+?)[ \t]*:[ \t]*(\S.*?)[ \t]*$`)
	for _, s := range samples {
		t.Run(s.file, func(t *testing.T) {
			path := samplePath(t, s.file)
			h := mustOpen(t, path)
			r, err := h.Report(disk.ReportOptions{})
			if err != nil {
				t.Fatal(err)
			}
			d := r.Doc.(*ReportDoc)
			if _, err := json.Marshal(d); err != nil {
				t.Fatalf("the report document does not marshal: %v", err)
			}
			out, _ := exec.Command("bdeinfo", path).Output() // exits 1: "Unable to unlock volume"
			var got []string
			for _, m := range field.FindAllStringSubmatch(string(out), -1) {
				got = append(got, m[1]+"="+m[2])
			}
			want := []string{
				"Encryption method=" + keyOf(bdeinfoTitles, d.Method),
				"Volume identifier=" + d.VolumeGUID,
				"Creation time=" + d.Created.Format("Jan 02, 2006 15:04:05.000000000 UTC"),
				"Description=" + d.Description,
				fmt.Sprintf("Number of key protectors=%d", len(d.Protectors)),
			}
			for _, p := range d.Protectors {
				want = append(want, "Identifier="+p.GUID, "Type="+keyOf(bdeinfoTypes, p.Type))
			}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("bdeinfo reads\n%s\nwe report\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			if !d.CopiesAgree || len(d.Copies) != 3 || !d.Copies[0].Used {
				t.Errorf("copies: %+v, agree %v", d.Copies, d.CopiesAgree)
			}
			if d.State != "fully encrypted" || d.Encryption != "normal" || d.Unsupported != "" {
				t.Errorf("state %q, encryption %q, unsupported %q", d.State, d.Encryption, d.Unsupported)
			}

			if _, err := exec.LookPath("cryptsetup"); err != nil {
				return
			}
			dump, err := exec.Command("cryptsetup", "bitlkDump", path).Output()
			if err != nil {
				t.Fatalf("cryptsetup bitlkDump: %v", err)
			}
			for _, w := range []string{
				"GUID:         \t" + d.VolumeGUID,
				fmt.Sprintf("Offset: \t%d [bytes]\n\tSize:   \t65536", d.Copies[0].Offset),
				fmt.Sprintf("Offset: \t%d [bytes]\n\tSize:   \t65536", d.Copies[1].Offset),
				fmt.Sprintf("Offset: \t%d [bytes]\n\tSize:   \t65536", d.Copies[2].Offset),
				fmt.Sprintf("Volume header\n\tOffset: \t%d [bytes]\n\tSize:   \t%d [bytes]", d.BootSectors.Offset, d.BootSectors.Size),
				"Cipher name:  \taes\nCipher mode:  \t" + strings.TrimPrefix(d.Cipher, "aes-"),
			} {
				if !strings.Contains(string(dump), w) {
					t.Errorf("cryptsetup bitlkDump does not say %q:\n%s", w, dump)
				}
			}
		})
	}
}

func keyOf(m map[string]string, v string) string {
	for k, x := range m {
		if x == v {
			return k
		}
	}
	return "?" + v
}

// TestReportShowKey: with the unlocked volume, info shows the dm-crypt
// key as cryptsetup's bitlkDump --dump-volume-key does.
func TestReportShowKey(t *testing.T) {
	path := samplePath(t, "bitlk-aes-cbc-elephant-128.img")
	u := mustUnlock(t, path, request(), &disk.Secret{Passphrase: []byte("anaconda")})
	r, err := mustOpen(t, path).Report(disk.ReportOptions{ShowKey: true, Unlocked: u})
	if err != nil {
		t.Fatal(err)
	}
	key := r.Doc.(*ReportDoc).Key
	if len(key) != 64 {
		t.Fatalf("key %q: want the 32-byte CBC and diffuser key in hex", key)
	}
	if _, err := exec.LookPath("cryptsetup"); err != nil {
		return
	}
	cmd := exec.Command("cryptsetup", "bitlkDump", "--dump-volume-key", "--batch-mode", "--key-file", "-", path)
	cmd.Stdin = strings.NewReader("anaconda")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("cryptsetup bitlkDump --dump-volume-key: %v: %s", err, out)
	}
	mk := strings.Join(strings.Fields(strings.SplitN(string(out), "MK dump:", 2)[len(strings.SplitN(string(out), "MK dump:", 2))-1]), "")
	if !strings.HasPrefix(mk, key) {
		t.Errorf("our key %s, cryptsetup's %s", key, mk)
	}
}
