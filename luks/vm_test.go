package luks

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/xtsctl/xtsctl/internal/dmtable"
)

// TestKernelOpensOurImages has the real kernel open LUKS2 images we wrote:
// scripts/test-dm-vm.sh boots a kernel with dm-crypt in a qemu guest
// (the host has no device-mapper), and there cryptsetup (the host's,
// copied into the guest) opens each image with cryptsetup open --type
// luks, dmsetup prints the table it loaded, and sha256sum hashes the
// mapped device. The hash must be that of the plaintext Encrypt wrote, and
// the table the one DMTable gives. It runs with XTSCTL_DM_VM=1, as root
// (scripts/test.bash does); docs/LUKS.md has the results.
func TestKernelOpensOurImages(t *testing.T) {
	if os.Getenv("XTSCTL_DM_VM") != "1" {
		t.Skip("set XTSCTL_DM_VM=1 to open our images with cryptsetup and the real kernel in a qemu guest")
	}
	type vmCase struct {
		name      string
		opt       FormatOptions
		data      int64    // bytes of plaintext
		ivTweak   string   // set the segment's iv_tweak to this
		flags     []string // set config.flags to these
		extra     int64    // bytes after the last whole sector
		wantError bool     // cryptsetup must refuse to open it
		fullKey   bool     // cryptsetup --disable-keyring: the table holds the hex key
		notLoaded []string // flags cryptsetup 2.6.1 leaves out of the table (it does not know them)
	}
	// Small data offsets but for the default case: the images travel in
	// the guest's initramfs, and the keyslots area is random bytes.
	small := uint64(2 << 20)
	cases := []vmCase{
		{name: "default", opt: FormatOptions{Label: "xtsctl vm"}, data: 4 << 20, fullKey: true},
		{name: "keyring", opt: FormatOptions{DataOffset: small}, data: 1 << 20},
		{name: "sector512-aes128", opt: FormatOptions{KeySize: 32, SectorSize: 512, DataOffset: small}, data: 1 << 20, fullKey: true},
		{name: "sector1024", opt: FormatOptions{SectorSize: 1024, DataOffset: small}, data: 1 << 20, fullKey: true},
		// cryptsetup maps a single segment with IV offset 0 whatever its
		// iv_tweak (SectorParams): the kernel must decrypt what Encrypt
		// wrote with offset 0.
		{name: "iv-tweak-2048", opt: FormatOptions{DataOffset: small}, data: 1 << 20, ivTweak: "2048", fullKey: true},
		// A dynamic segment whose device does not end on a sector
		// boundary: cryptsetup does not round the size down and the
		// kernel refuses the table (DataRange rounds down instead).
		{name: "unaligned-tail", opt: FormatOptions{DataOffset: small}, data: 1 << 20, extra: 512, wantError: true},
		// Persistent flags become dm-crypt options, in the kernel's order.
		{name: "flags", opt: FormatOptions{DataOffset: small}, data: 1 << 20, fullKey: true,
			flags: []string{"no-write-workqueue", "submit-from-crypt-cpus", "no-read-workqueue", "same-cpu-crypt", "allow-discards"}},
		// high-priority is newer than cryptsetup 2.6.1 (and kernel 6.1):
		// it ignores it; DMTable keeps it (cryptsetup 2.7 loads it).
		{name: "high-priority", opt: FormatOptions{DataOffset: small}, data: 1 << 20, fullKey: true,
			flags: []string{"high-priority", "allow-discards"}, notLoaded: []string{"high_priority"}},
	}

	payload := t.TempDir()
	type prepared struct {
		sum   string
		table dmtable.CryptTable
		key   []byte
	}
	want := map[string]prepared{}
	var run strings.Builder
	run.WriteString(`#!/bin/sh
# The guest half of TestKernelOpensOurImages (luks/vm_test.go).
mkdir -p /run && mount -t tmpfs tmpfs /run
rc=0
# check NAME [cryptsetup options]: open NAME/img read-only, print the table
# and the hash of the mapped device, close it.
check() {
	c=$1; shift
	if cryptsetup open --type luks --key-file "$c/pass" --readonly "$@" "$c/img" "vm-$c" > "$c/log" 2>&1; then
		echo "LUKSVM-TABLE $c $(dmsetup table --showkeys "vm-$c")"
		echo "LUKSVM-SUM $c $(sha256sum < "/dev/mapper/vm-$c" | cut -d' ' -f1)"
		cryptsetup close "vm-$c" || { echo "LUKSVM-FAIL $c: close"; rc=1; }
	else
		echo "LUKSVM-REFUSED $c $(tail -n 1 "$c/log")"
	fi
}
`)
	for _, c := range cases {
		dir := filepath.Join(payload, c.name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		img := filepath.Join(dir, "img")
		pass := []byte("kernel " + c.name)
		writeFile(t, dir, "pass", pass)
		size := c.opt.ImageSize(c.data)
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
		plain := randBytes(t, int(c.data))
		if _, err := h.Encrypt(context.Background(), key, bytes.NewReader(plain), f, size, nil); err != nil {
			t.Fatal(err)
		}
		if c.extra > 0 {
			if err := f.Truncate(size + c.extra); err != nil {
				t.Fatal(err)
			}
		}
		table, err := h.DMTable(size + c.extra)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(plain)
		want[c.name] = prepared{hex.EncodeToString(sum[:]), table, key}
		opts := ""
		if c.fullKey {
			opts = " --disable-keyring"
		}
		fmt.Fprintf(&run, "check %s%s\n", c.name, opts)
	}
	run.WriteString("echo LUKSVM-DONE\nexit $rc\n")
	writeFile(t, payload, "run", []byte(run.String()))
	if err := os.Chmod(filepath.Join(payload, "run"), 0o755); err != nil {
		t.Fatal(err)
	}

	script, err := filepath.Abs("../scripts/test-dm-vm.sh")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("bash", script, "--verbose", "--payload", payload).CombinedOutput()
	t.Logf("%s", out)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if err != nil || lines[len(lines)-1] != "PASS" || !strings.Contains(string(out), "LUKSVM-DONE") {
		t.Fatalf("test-dm-vm.sh --payload: %v", err)
	}
	got := func(kind, name string) (string, bool) {
		m := regexp.MustCompile(`(?m)LUKSVM-` + kind + ` ` + regexp.QuoteMeta(name) + ` (.*)$`).FindStringSubmatch(string(out))
		if m == nil {
			return "", false
		}
		return strings.TrimSpace(m[1]), true
	}
	for _, c := range cases {
		w := want[c.name]
		if c.wantError {
			if why, ok := got("REFUSED", c.name); !ok {
				t.Errorf("%s: cryptsetup opened it", c.name)
			} else {
				t.Logf("%s: refused as expected: %s", c.name, why)
			}
			continue
		}
		if why, ok := got("REFUSED", c.name); ok {
			t.Errorf("%s: cryptsetup open failed: %s", c.name, why)
			continue
		}
		if sum, _ := got("SUM", c.name); sum != w.sum {
			t.Errorf("%s: the kernel's plaintext hashes to %q, ours to %s", c.name, sum, w.sum)
		}
		table, _ := got("TABLE", c.name)
		wantTable := w.table
		for _, f := range c.notLoaded {
			if f == "high_priority" {
				wantTable.HighPriority = false
			}
		}
		if !tableMatches(table, wantTable, w.key, c.fullKey) {
			t.Errorf("%s: cryptsetup loaded\n  %s\nDMTable says\n  %s", c.name, table, wantTable.Template())
		}
	}
}

// tableMatches compares a table cryptsetup loaded, as dmsetup table
// --showkeys prints it (the device as major:minor, the key in hex, or a
// keyring reference), with ours: equal but for the device, and for the key
// unless fullKey.
func tableMatches(got string, want dmtable.CryptTable, key []byte, fullKey bool) bool {
	want.Key, want.Device = key, "DEV"
	line, err := want.AppendLine(nil)
	if err != nil {
		return false
	}
	g, w := strings.Fields(got), strings.Fields(string(line))
	if len(g) != len(w) || len(g) < 7 {
		return false
	}
	for i := range g {
		switch {
		case i == 6: // the device
		case i == 4 && !fullKey:
			if !strings.HasPrefix(g[i], fmt.Sprintf(":%d:logon:cryptsetup:", len(key))) {
				return false
			}
		case g[i] != w[i]:
			return false
		}
	}
	return true
}
