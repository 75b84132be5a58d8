package luks

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestKernelOpensOurImages has the real kernel open LUKS2 images we wrote:
// cryptsetup open --type luks in a qemu guest (dm-crypt), which hashes the
// mapped device; the hash must be that of the plaintext we encrypted, and
// the table cryptsetup loaded must be the one DMTable prints. It needs
// XTSCTL_DM_VM=1 and XTSCTL_DMCRYPT_CHECK set to a dmcrypt-check.sh (the
// guest tool, not part of this repository); run as root. Results are in
// docs/LUKS.md.
func TestKernelOpensOurImages(t *testing.T) {
	tool := os.Getenv("XTSCTL_DMCRYPT_CHECK")
	if os.Getenv("XTSCTL_DM_VM") != "1" || tool == "" {
		t.Skip("set XTSCTL_DM_VM=1 and XTSCTL_DMCRYPT_CHECK=/path/to/dmcrypt-check.sh to open our images with the real kernel in a qemu guest")
	}
	for _, c := range []struct {
		name      string
		opt       FormatOptions
		ivTweak   string   // set the segment's iv_tweak to this
		flags     []string // set config.flags to these
		extra     int64    // bytes after the last whole sector
		wantError bool     // cryptsetup must refuse to open it
	}{
		{name: "default-4096-512bit", opt: FormatOptions{Label: "xtsctl vm"}},
		{name: "512-256bit", opt: FormatOptions{KeySize: 32, SectorSize: 512}},
		// cryptsetup maps a single segment with IV offset 0 whatever its
		// iv_tweak (SectorParams): the kernel must decrypt what Encrypt
		// wrote with offset 0.
		{name: "iv-tweak-2048", opt: FormatOptions{}, ivTweak: "2048"},
		// A dynamic segment whose device does not end on a sector
		// boundary: cryptsetup does not round the size down and the
		// kernel refuses the table (DataRange rounds down instead).
		{name: "unaligned-tail", opt: FormatOptions{}, extra: 512, wantError: true},
		// Persistent flags become dm-crypt options, in cryptsetup's order.
		{name: "persistent-flags", opt: FormatOptions{}, flags: []string{"no-read-workqueue", "allow-discards"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			img := filepath.Join(dir, "img")
			pass := []byte("kernel\n")
			pf := writeFile(t, dir, "pass", pass)
			size := int64(DefaultDataOffset + 4<<20)
			f, h, key := fastFormat(t, img, size, pass, c.opt)
			if c.ivTweak != "" || c.flags != nil {
				f.Close()
				rewriteMeta(t, img, func(m *jvalue) {
					if c.ivTweak != "" {
						m.get("segments").get("0").set("iv_tweak", jstr(c.ivTweak))
					}
					if c.flags != nil {
						var fl []*jvalue
						for _, x := range c.flags {
							fl = append(fl, jstr(x))
						}
						m.get("config").set("flags", jarr(fl...))
					}
				}, nil)
				f, h = openHeader(t, img)
			}
			plain := randBytes(t, 4<<20)
			if _, err := h.Encrypt(context.Background(), key, bytes.NewReader(plain), f, size); err != nil {
				t.Fatal(err)
			}
			if c.extra > 0 {
				if err := f.Truncate(size + c.extra); err != nil {
					t.Fatal(err)
				}
			}
			cmd := exec.Command(tool, "--luks", img, pf)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			t.Logf("%s", stderr.String())
			if c.wantError {
				if err == nil {
					t.Fatal("cryptsetup opened it")
				}
				return
			}
			if err != nil {
				t.Fatalf("%s: %v", tool, err)
			}
			lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
			sum := sha256.Sum256(plain)
			if got := lines[len(lines)-1]; got != hex.EncodeToString(sum[:]) {
				t.Fatalf("the kernel's plaintext hashes to %s, ours to %x", got, sum)
			}
			table := regexp.MustCompile(`TABLE (.*)`).FindStringSubmatch(stderr.String())
			want, err := h.DMTable(nil, "DEV", size+c.extra)
			if err != nil {
				t.Fatal(err)
			}
			if table == nil || !tableMatches(table[1], want) {
				t.Fatalf("cryptsetup loaded %q, DMTable says %q", table, want)
			}
		})
	}
}

// tableMatches compares a table dmsetup printed (device as major:minor,
// key masked or in the keyring) with ours (device and key placeholders).
func tableMatches(got, want string) bool {
	g, w := strings.Fields(got), strings.Fields(want)
	if len(g) != len(w) {
		return false
	}
	for i := range g {
		if w[i] == "DEV" || w[i] == KeyPlaceholder {
			continue
		}
		if g[i] != w[i] {
			return false
		}
	}
	return true
}
