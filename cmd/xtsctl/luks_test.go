package main

// LUKS through the command line, against the real cryptsetup (Debian
// cryptsetup-bin, installed by scripts/install-deps.sh): images it made
// decrypt to the plaintext an independent AES-XTS (golang.org/x/crypto/xts)
// wrote into them with the key it dumps; images xtsctl wrote read in
// cryptsetup with the same key and plaintext; keyslots added on either
// side open on the other; refusals name what is unsupported, exit with the
// documented code and write nothing. Passphrases go to cryptsetup through
// key files, never argv.

import (
	"bytes"
	"crypto/aes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xtsctl/xtsctl/blockdev"
	"github.com/xtsctl/xtsctl/disk"
	"github.com/xtsctl/xtsctl/luks"
	"github.com/xtsctl/xtsctl/volume"
	xxts "golang.org/x/crypto/xts"
)

// Tests make keyslots with tiny Argon2id costs and digests with 1000
// PBKDF2 iterations, unless they give --kdf-* flags; so do the xtsctl
// processes they start (this binary, TestMain).
func init() {
	testOnlyKDF["luks"] = disk.Argon2{Time: 4, MemoryKiB: 32, Threads: 1}
}

func needCryptsetup(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("cryptsetup"); err != nil {
		t.Skip("cryptsetup is not installed (Debian cryptsetup-bin; scripts/install-deps.sh installs it)")
	}
}

// cs runs cryptsetup, failing the test if it fails.
func cs(t testing.TB, args ...string) string {
	t.Helper()
	out, err := exec.Command("cryptsetup", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("cryptsetup %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// csOK reports whether cryptsetup succeeds.
func csOK(args ...string) bool { return exec.Command("cryptsetup", args...).Run() == nil }

// Cheap costs for cryptsetup's keyslots.
var (
	csPBKDF2 = []string{"--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000"}
	csArgon2 = []string{"--pbkdf-memory", "32768", "--pbkdf-force-iterations", "4", "--pbkdf-parallel", "1"}
)

func secretFile(t testing.TB, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func sparse(t testing.TB, path string, size int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// csKey is the volume key cryptsetup dumps with the passphrase in pass.
func csKey(t testing.TB, img, hdr, pass string) []byte {
	t.Helper()
	vk := filepath.Join(t.TempDir(), "vk")
	args := []string{"luksDump", "--batch-mode", "--dump-volume-key", "--key-file", pass, "--volume-key-file", vk}
	if hdr != "" {
		args = append(args, "--header", hdr)
	}
	cs(t, append(args, img)...)
	b, err := os.ReadFile(vk)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// refXTS en- or decrypts whole sectors with golang.org/x/crypto/xts, the
// way dm-crypt maps a LUKS data segment: sector i (of ss bytes) has the
// tweak i*ss/512.
func refXTS(t testing.TB, encrypt bool, key, in []byte, ss int) []byte {
	t.Helper()
	c, err := xxts.NewCipher(aes.NewCipher, key)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]byte, len(in))
	for i := 0; i < len(in)/ss; i++ {
		d, s := out[i*ss:(i+1)*ss], in[i*ss:(i+1)*ss]
		if encrypt {
			c.Encrypt(d, s, uint64(i*ss/512))
		} else {
			c.Decrypt(d, s, uint64(i*ss/512))
		}
	}
	return out
}

func writeAt(t testing.TB, path string, b []byte, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func readAt(t testing.TB, path string, n int, off int64) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, n)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	return b
}

// xt runs xtsctl in-process and fails the test unless it exits 0.
func xt(t testing.TB, args ...string) (stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	if code := run(args, strings.NewReader(""), &o, &e); code != 0 {
		t.Fatalf("xtsctl %s: exit %d\n%s", strings.Join(args, " "), code, e.String())
	}
	return o.String(), e.String()
}

// xtFail runs xtsctl in-process and checks its exit code and its one
// error line.
func xtFail(t testing.TB, code int, want string, args ...string) string {
	t.Helper()
	var o, e bytes.Buffer
	got := run(args, strings.NewReader(""), &o, &e)
	lines := strings.Split(strings.TrimSpace(e.String()), "\n")
	var errLine string
	for _, l := range lines {
		if strings.HasPrefix(l, "xtsctl: error: ") {
			if errLine != "" {
				t.Errorf("xtsctl %s: more than one error line:\n%s", strings.Join(args, " "), e.String())
			}
			errLine = l
		}
	}
	if got != code || !strings.Contains(errLine, want) {
		t.Fatalf("xtsctl %s: exit %d, stderr\n%s\nwant exit %d and an error with %q", strings.Join(args, " "), got, e.String(), code, want)
	}
	return e.String()
}

type csImage struct {
	name       string
	format     []string // luksFormat options
	dataOffset int64    // where the data starts on the data device
	sectorSize int
	detached   bool // --header in a separate file
	slot5      bool // the passphrase only in keyslot 5
	destroy    bool // the primary header's first 4 KiB zeroed
}

// TestLUKSDecryptCryptsetupImages: xtsctl decrypt of images cryptsetup
// made (every KDF and hash, LUKS1 and LUKS2, AES-128 and AES-256, 512 and
// 4096-byte sectors, a passphrase in keyslot 5 only, a detached header, a
// custom --offset, a destroyed primary header) gives the plaintext whose
// ciphertext x/crypto/xts wrote with the key cryptsetup dumps; info reads
// the same UUID and data offset as cryptsetup.
func TestLUKSDecryptCryptsetupImages(t *testing.T) {
	needCryptsetup(t)
	l1 := func(a ...string) []string {
		return append([]string{"--type", "luks1", "--pbkdf-force-iterations", "1000"}, a...)
	}
	l2 := func(kdf []string, a ...string) []string {
		return append(append([]string{"--type", "luks2"}, kdf...), a...)
	}
	const luks1Off, luks2Off = 4096 * 512, 16 << 20
	cases := []csImage{
		{name: "luks1-sha1", format: l1("--hash", "sha1"), dataOffset: luks1Off, sectorSize: 512},
		{name: "luks1-sha256-aes128", format: l1("--hash", "sha256", "--key-size", "256"), dataOffset: luks1Off, sectorSize: 512},
		{name: "luks1-sha512-slot5", format: l1("--hash", "sha512"), dataOffset: luks1Off, sectorSize: 512, slot5: true},
		{name: "luks1-offset", format: l1("--offset", "6000"), dataOffset: 6000 * 512, sectorSize: 512},
		{name: "luks1-detached", format: l1(), sectorSize: 512, detached: true},
		{name: "luks2-pbkdf2-sha1-512", format: l2(csPBKDF2, "--hash", "sha1", "--sector-size", "512"), dataOffset: luks2Off, sectorSize: 512},
		{name: "luks2-pbkdf2-sha256-aes128", format: l2(csPBKDF2, "--hash", "sha256", "--key-size", "256"), dataOffset: luks2Off, sectorSize: 4096},
		{name: "luks2-pbkdf2-sha512", format: l2(csPBKDF2, "--hash", "sha512"), dataOffset: luks2Off, sectorSize: 4096},
		{name: "luks2-argon2i", format: l2(csArgon2, "--pbkdf", "argon2i"), dataOffset: luks2Off, sectorSize: 4096},
		{name: "luks2-argon2id-aes128-512", format: l2(csArgon2, "--pbkdf", "argon2id", "--key-size", "256", "--sector-size", "512"), dataOffset: luks2Off, sectorSize: 512},
		{name: "luks2-slot5", format: l2(csArgon2), dataOffset: luks2Off, sectorSize: 4096, slot5: true},
		{name: "luks2-offset", format: l2(csPBKDF2, "--offset", "40960"), dataOffset: 40960 * 512, sectorSize: 4096},
		{name: "luks2-detached", format: l2(csPBKDF2), sectorSize: 4096, detached: true},
		{name: "luks2-destroyed-primary", format: l2(csPBKDF2), dataOffset: luks2Off, sectorSize: 4096, destroy: true},
		{name: "luks2-detached-destroyed-primary", format: l2(csPBKDF2, "--sector-size", "2048"), sectorSize: 2048, detached: true, destroy: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			testCryptsetupImage(t, c)
		})
	}
}

func testCryptsetupImage(t *testing.T, c csImage) {
	dir := t.TempDir()
	// A key file is read whole: the newline is part of the passphrase.
	pass := secretFile(t, dir, "pass", []byte("pass word\n"))
	const dataLen = 256 << 10
	img := filepath.Join(dir, "img")
	sparse(t, img, c.dataOffset+dataLen)
	args := append([]string{"luksFormat", "--batch-mode", "--key-file", pass}, c.format...)
	hdr := ""
	if c.detached {
		hdr = filepath.Join(dir, "hdr")
		sparse(t, hdr, 16<<20)
		args = append(args, "--header", hdr)
	}
	cs(t, append(args, img)...)
	hdrFile := img
	var hdrArgs []string
	if c.detached {
		hdrFile, hdrArgs = hdr, []string{"--header", hdr}
	}
	var slotArgs []string
	if c.slot5 {
		newPass := secretFile(t, dir, "pass5", []byte("only in five"))
		add := []string{"luksAddKey", "--batch-mode", "--key-file", pass, "--key-slot", "5"}
		if strings.Contains(strings.Join(c.format, " "), "luks1") {
			add = append(add, "--pbkdf-force-iterations", "1000")
		} else {
			add = append(add, csArgon2...)
		}
		cs(t, append(add, hdrFile, newPass)...)
		cs(t, "luksKillSlot", "--batch-mode", hdrFile, "0")
		pass, slotArgs = newPass, []string{"-S", "5"}
	}
	key := csKey(t, img, hdr, pass)
	uuid := strings.TrimSpace(cs(t, "luksUUID", hdrFile))
	plain := randomBytes(dataLen)
	writeAt(t, img, refXTS(t, true, key, plain, c.sectorSize), c.dataOffset)
	if c.destroy {
		writeAt(t, hdrFile, make([]byte, 4096), 0)
	}

	out := filepath.Join(dir, "out")
	xt(t, append(append(append([]string{"decrypt", "--key-file", pass}, hdrArgs...), slotArgs...), img, out)...)
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, plain) {
		t.Fatalf("decrypt: %d bytes, not the %d bytes of plaintext x/crypto/xts encrypted", len(got), len(plain))
	}

	stdout, _ := xt(t, append(append([]string{"info", "--json"}, hdrArgs...), img)...)
	var j struct {
		Schema     string `json:"schema"`
		UUID       string `json:"uuid"`
		Format     string `json:"format"`
		DataOffset int64  `json:"data_offset"`
		DataLength int64  `json:"data_length"`
		Supported  bool   `json:"supported"`
		Copies     []struct {
			Name, State string
		} `json:"copies"`
	}
	if err := json.Unmarshal([]byte(stdout), &j); err != nil {
		t.Fatal(err)
	}
	if j.Schema != luksInfoSchema || j.UUID != uuid || j.DataOffset != c.dataOffset || j.DataLength != dataLen || !j.Supported {
		t.Errorf("info --json: %+v; cryptsetup says UUID %s, data at %d", j, uuid, c.dataOffset)
	}
	if c.destroy && (len(j.Copies) != 2 || j.Copies[0].State == "ok" || j.Copies[1].State != "ok") {
		t.Errorf("info --json shows the copies %+v; the primary was destroyed", j.Copies)
	}
	// The key file's newline is part of the passphrase: read as a
	// passphrase file, without it, it opens nothing, and nothing is written.
	if !c.slot5 {
		out2 := filepath.Join(dir, "out2")
		xtFail(t, exitKey, "no keyslot opens with this passphrase", append(append([]string{"decrypt", "--passphrase-file", pass}, hdrArgs...), img, out2)...)
		if _, err := os.Stat(out2); err == nil {
			t.Error("a failed decrypt left its output")
		}
	}
}

// editLUKS2 rewrites the JSON metadata of both copies of a LUKS2 header
// and recomputes their checksums, as anyone who can write the image can:
// the checksum is no authentication.
func editLUKS2(t testing.TB, path string, edit func(m map[string]any)) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	size := binary.BigEndian.Uint64(b[8:16])
	for _, off := range []uint64{0, size} {
		c := b[off : off+size]
		area := c[4096:]
		d := json.NewDecoder(bytes.NewReader(area[:bytes.IndexByte(area, 0)]))
		d.UseNumber()
		var m map[string]any
		if err := d.Decode(&m); err != nil {
			t.Fatal(err)
		}
		edit(m)
		text, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		clear(area)
		copy(area, text)
		const csum = 448 // the checksum field of the binary header
		clear(c[csum : csum+64])
		sum := sha256.Sum256(c)
		copy(c[csum:], sum[:])
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// obj walks a JSON path of maps.
func obj(m map[string]any, path ...string) map[string]any {
	for _, p := range path {
		m = m[p].(map[string]any)
	}
	return m
}

// csLUKS2 formats a small LUKS2 image with cryptsetup (PBKDF2, cheap) and
// returns its path and passphrase file.
func csLUKS2(t testing.TB, dir, name string, extra ...string) (img, pass string) {
	t.Helper()
	pass = secretFile(t, dir, name+".pass", []byte("refusals"))
	img = filepath.Join(dir, name)
	sparse(t, img, 17<<20)
	cs(t, append(append([]string{"luksFormat", "--batch-mode", "--type", "luks2", "--key-file", pass}, csPBKDF2...), append(extra, img)...)...)
	return img, pass
}

// TestLUKSRefusals: what xtsctl does not support fails with an error
// naming it and the documented exit code, before any passphrase is asked
// (no --key-file is given: a prompt would fail with "no terminal"), and
// writes nothing; info still shows the header.
func TestLUKSRefusals(t *testing.T) {
	needCryptsetup(t)
	dir := t.TempDir()
	type refusal struct {
		name string
		img  string
		want string
	}
	var cases []refusal
	add := func(name, want string, img string) { cases = append(cases, refusal{name, img, want}) }

	// cryptsetup checks a cipher with the kernel before it formats, and
	// this kernel has no serpent: the header says so afterwards.
	serpent, _ := csLUKS2(t, dir, "serpent")
	editLUKS2(t, serpent, func(m map[string]any) { obj(m, "segments", "0")["encryption"] = "serpent-xts-plain64" })
	add("other cipher", "unsupported cipher serpent-xts-plain64", serpent)
	cbcPass := secretFile(t, dir, "cbc.pass", []byte("cbc"))
	cbc := filepath.Join(dir, "cbc")
	sparse(t, cbc, 3<<20)
	cs(t, "luksFormat", "--batch-mode", "--type", "luks1", "--pbkdf-force-iterations", "1000", "--cipher", "aes-cbc-essiv:sha256", "--key-size", "256", "--key-file", cbcPass, cbc)
	add("aes-cbc-essiv", "unsupported cipher aes-cbc-essiv:sha256", cbc)
	reenc, reencPass := csLUKS2(t, dir, "reencrypt")
	cs(t, "reencrypt", "--batch-mode", "--init-only", "--key-file", reencPass, reenc)
	add("reencryption", "unsupported reencryption in progress", reenc)

	integrity, _ := csLUKS2(t, dir, "integrity")
	editLUKS2(t, integrity, func(m map[string]any) {
		obj(m, "segments", "0")["integrity"] = map[string]any{"type": "hmac(sha256)", "journal_encryption": "none", "journal_integrity": "none"}
	})
	add("dm-integrity", "unsupported integrity protection (dm-integrity segment) hmac(sha256)", integrity)
	req, _ := csLUKS2(t, dir, "requirement")
	editLUKS2(t, req, func(m map[string]any) {
		obj(m, "config")["requirements"] = map[string]any{"mandatory": []any{"future-feature"}}
	})
	add("unknown requirement", `unsupported mandatory requirement "future-feature"`, req)
	opal, _ := csLUKS2(t, dir, "opal")
	editLUKS2(t, opal, func(m map[string]any) { obj(m, "segments", "0")["type"] = "hw-opal-crypt" })
	add("OPAL", "unsupported OPAL hardware encryption", opal)
	scrypt, _ := csLUKS2(t, dir, "scrypt")
	editLUKS2(t, scrypt, func(m map[string]any) { obj(m, "keyslots", "0", "kdf")["type"] = "scrypt" })
	add("only an unknown KDF", "no keyslot xtsctl can use: keyslot 0: unsupported key derivation function scrypt", scrypt)
	tokenOnly, _ := csLUKS2(t, dir, "token-type")
	editLUKS2(t, tokenOnly, func(m map[string]any) { obj(m, "keyslots", "0")["type"] = "systemd-tpm2-sealed" })
	add("a keyslot type only a token opens", `no keyslot xtsctl can use: keyslot 0: unsupported keyslot type "systemd-tpm2-sealed"`, tokenOnly)

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before, _ := os.ReadFile(c.img)
			out := filepath.Join(dir, "out")
			xtFail(t, exitInput, c.want, "decrypt", c.img, out)
			if _, err := os.Stat(out); err == nil {
				t.Fatal("decrypt wrote its output")
			}
			if blockdev.Available() == nil {
				xtFail(t, exitInput, c.want, "open", "--backend", "fuse", c.img, "refused")
			}
			xtFail(t, exitInput, c.want, "passphrase", "add", c.img)
			// The table needs no keyslot: only the volume's refusals apply.
			if !strings.Contains(c.want, "no keyslot") {
				xtFail(t, exitInput, c.want, "info", "--dm-table", c.img)
			}
			if after, _ := os.ReadFile(c.img); !bytes.Equal(before, after) {
				t.Fatal("the image changed")
			}
			stdout, _ := xt(t, "info", c.img)
			if !strings.Contains(stdout, "supported:       no: ") && !strings.Contains(stdout, "UNUSABLE: ") {
				t.Errorf("info does not say what is unsupported:\n%s", stdout)
			}
		})
	}

	// LUKS1 is read, not written.
	l1pass := secretFile(t, dir, "l1.pass", []byte("luks1"))
	l1 := filepath.Join(dir, "l1")
	sparse(t, l1, 3<<20)
	cs(t, "luksFormat", "--batch-mode", "--type", "luks1", "--pbkdf-force-iterations", "1000", "--key-file", l1pass, l1)
	before, _ := os.ReadFile(l1)
	xtFail(t, exitInput, "unsupported LUKS version 1 (writing)", "passphrase", "add", "--key-file", l1pass, "--new-key-file", l1pass, l1)
	xtFail(t, exitInput, "unsupported LUKS version 1 (writing)", "passphrase", "remove", "--key-file", l1pass, l1)
	if after, _ := os.ReadFile(l1); !bytes.Equal(before, after) {
		t.Fatal("a refused passphrase change wrote the LUKS1 image")
	}
}

// TestLUKSKDFBounds: KDF costs come from the image and are bounded before
// they run; --allow-expensive-kdf runs them all the same.
func TestLUKSKDFBounds(t *testing.T) {
	needCryptsetup(t)
	dir := t.TempDir()
	img, pass := csLUKS2(t, dir, "costly")
	csArgon := secretFile(t, dir, "argon.pass", []byte("argon"))
	cs(t, "luksAddKey", "--batch-mode", "--key-file", pass, "--key-slot", "1", "--pbkdf-memory", "32", "--pbkdf-force-iterations", "4", "--pbkdf-parallel", "1", img, csArgon)
	cs(t, "luksKillSlot", "--batch-mode", img, "0")
	// 1001 passes over 32 KiB: above the limit of 1000 passes, cheap
	// enough to run here when allowed (the key it gives is wrong: the
	// costs were changed after the keyslot was made).
	editLUKS2(t, img, func(m map[string]any) { obj(m, "keyslots", "1", "kdf")["time"] = json.Number("1001") })
	out := filepath.Join(dir, "out")
	stderr := xtFail(t, exitKey, "keyslot 1: argon2id time 1001 passes is above the limit of 1000 passes", "decrypt", "--key-file", csArgon, img, out)
	if !strings.Contains(stderr, "hint: the image sets these costs; if you trust it, --allow-expensive-kdf runs them") {
		t.Errorf("no hint:\n%s", stderr)
	}
	xtFail(t, exitKey, "no keyslot opens with this passphrase", "decrypt", "--allow-expensive-kdf", "--key-file", csArgon, img, out)
	if _, err := os.Stat(out); err == nil {
		t.Fatal("decrypt wrote its output")
	}
}

// TestLUKSBadUsage: flags that do not apply, keyslots not in use, key
// files that cannot be passphrases, wrong passphrases and tokens.
func TestLUKSBadUsage(t *testing.T) {
	needCryptsetup(t)
	dir := t.TempDir()
	img, pass := csLUKS2(t, dir, "img")
	out := filepath.Join(dir, "out")
	big := secretFile(t, dir, "big", make([]byte, 8<<20+1))
	empty := secretFile(t, dir, "empty", nil)
	wrong := secretFile(t, dir, "wrong", []byte("wrong"))
	for _, c := range []struct {
		code int
		want string
		args []string
	}{
		{exitUsage, "--sector-size does not apply to LUKS images", []string{"decrypt", "--key-file", pass, "--sector-size", "512", img, out}},
		{exitUsage, "--offset does not apply to LUKS images", []string{"open", "--key-file", pass, "--offset", "8", img, "x"}},
		{exitUsage, "keyslot 4 is not in use (keyslots in use: 0)", []string{"decrypt", "--key-file", pass, "-S", "4", img, out}},
		{exitUsage, `key slot "40" is not a number from 0 to 31`, []string{"decrypt", "--key-file", pass, "--key-slot", "40", img, out}},
		{exitUsage, "--key-file and --passphrase-file do not go together", []string{"decrypt", "--key-file", pass, "--passphrase-file", pass, img, out}},
		{exitKey, "key file " + big + " is larger than 8 MiB", []string{"decrypt", "--key-file", big, img, out}},
		{exitKey, "key file " + empty + " is empty", []string{"decrypt", "--key-file", empty, img, out}},
		{exitKey, img + ": no keyslot opens with this passphrase", []string{"decrypt", "--key-file", wrong, img, out}},
		{exitInput, "is not a LUKS image", []string{"decrypt", "--key-file", pass, "--header", big, img, out}},
		{exitInput, "header file " + filepath.Join(dir, "nosuch") + " does not exist", []string{"decrypt", "--key-file", pass, "--header", filepath.Join(dir, "nosuch"), img, out}},
		{exitUsage, "unknown --type \"luks3\"", []string{"format", "--type", "luks3", "--size", "1M", out}},
		{exitUsage, "UUID \"nope\" is not of the form", []string{"format", "--type", "luks2", "--uuid", "nope", "--size", "1M", out}},
		{exitUsage, "--size 1000 is not a positive whole number of 4096-byte sectors", []string{"format", "--type", "luks2", "--size", "1000", out}},
		{exitUsage, "--size 9223372036854771712 is too large", []string{"format", "--type", "luks2", "--size", "9223372036854771712", out}},
		{exitUsage, "--integrity does not apply to LUKS images", []string{"encrypt", "--type", "luks2", "--integrity", "none", img, out}},
		{exitUsage, "--kdf-iterations 2: LUKS2 Argon2 keyslots take at least 4 passes", []string{"format", "--type", "luks2", "--key-file", pass, "--kdf-iterations", "2", "--kdf-memory", "64M", "--size", "1M", out}},
	} {
		xtFail(t, c.code, c.want, c.args...)
		if _, err := os.Stat(out); err == nil {
			t.Fatalf("%s: wrote %s", strings.Join(c.args, " "), out)
		}
	}

	// Both header copies damaged (a byte of each JSON area changed): an
	// integrity failure, exit 6, for every command.
	broken := filepath.Join(dir, "broken")
	os.WriteFile(broken, readFile(t, img), 0o600)
	for _, off := range []int64{4096 + 10, 16384 + 4096 + 10} {
		b := readAt(t, broken, 1, off)
		writeAt(t, broken, []byte{b[0] ^ 1}, off)
	}
	xtFail(t, exitIntegrity, "checksum", "info", broken)
	xtFail(t, exitIntegrity, "checksum", "decrypt", "--key-file", pass, broken, out)
	// The hint is what repairs it.
	backup := filepath.Join(dir, "backup")
	xt(t, "header", "backup", img, backup)
	xtFail(t, exitInput, "has no readable LUKS header", "header", "restore", broken, backup)
	xt(t, "header", "restore", "--force", broken, backup)
	xt(t, "decrypt", "--key-file", pass, broken, out)
	os.Remove(out)

	// A keyslot bound to a token: a wrong passphrase says xtsctl runs no
	// tokens.
	cs(t, "token", "add", "--key-description", "xtsctl-test", "--key-slot", "0", img)
	stderr := xtFail(t, exitKey, "no keyslot opens with this passphrase", "decrypt", "--key-file", wrong, img, out)
	if !strings.Contains(stderr, "luks2-keyring (token 0, keyslots 0)") {
		t.Errorf("no hint naming the token:\n%s", stderr)
	}
	stdout, _ := xt(t, "info", img)
	if !strings.Contains(stdout, "token 0:         luks2-keyring, keyslots 0 (not run by xtsctl)") {
		t.Errorf("info does not show the token:\n%s", stdout)
	}
}

// TestLUKSDetection: LUKS images are recognised by their headers, other
// images are not, and an explicit --type wins.
func TestLUKSDetection(t *testing.T) {
	needCryptsetup(t)
	dir := t.TempDir()
	l2, _ := csLUKS2(t, dir, "l2")
	damaged, _ := csLUKS2(t, dir, "damaged")
	writeAt(t, damaged, make([]byte, 4096), 0)
	l1 := filepath.Join(dir, "l1")
	sparse(t, l1, 3<<20)
	cs(t, "luksFormat", "--batch-mode", "--type", "luks1", "--pbkdf-force-iterations", "1000", "--key-file", secretFile(t, dir, "p", []byte("p")), l1)
	for _, p := range []string{l2, damaged, l1} {
		if !hasLUKSHeader(p) {
			t.Errorf("%s is not recognised as LUKS", filepath.Base(p))
		}
	}
	pass := secretFile(t, dir, "vol.pass", []byte("volume\n"))
	vol := filepath.Join(dir, "vol")
	xt(t, "format", "-q", "--passphrase-file", pass, "--size", "64K", vol)
	plain := filepath.Join(dir, "plain")
	os.WriteFile(plain, randomBytes(1<<20), 0o600)
	for _, p := range []string{vol, plain, filepath.Join(dir, "nosuch")} {
		if hasLUKSHeader(p) {
			t.Errorf("%s is taken for LUKS", filepath.Base(p))
		}
	}
	stderr := xtFail(t, exitInput, "is a LUKS2 image (cryptsetup), not an xtsctl volume", "decrypt", "--type", "volume", "--passphrase-file", pass, l2, filepath.Join(dir, "out"))
	if !strings.Contains(stderr, "hint: xtsctl reads LUKS images as they are: leave --type out") {
		t.Errorf("no hint:\n%s", stderr)
	}
	// The LUKS flags are refused on volumes, not ignored.
	xtFail(t, exitUsage, "--key-slot 9: xtsctl volumes have key slots 0..7", "decrypt", "-S", "9", "--passphrase-file", pass, vol, filepath.Join(dir, "out"))
	xtFail(t, exitUsage, "--key-slot 12: xtsctl volumes have key slots 0..7", "passphrase", "add", "-S", "12", "--passphrase-file", pass, vol)
	xtFail(t, exitUsage, "--uuid applies to LUKS images only", "format", "--uuid", "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9", "--passphrase-file", pass, "--size", "64K", filepath.Join(dir, "out"))
	xtFail(t, exitUsage, "--new-key-file applies to LUKS images only", "passphrase", "add", "--new-key-file", pass, "--passphrase-file", pass, vol)
	// verify has nothing to check in a LUKS image, and says so.
	xtFail(t, exitInput, "is a LUKS image: it has no integrity tags or digest to verify", "verify", l2)
}

// TestLUKSWrittenByXtsctl: images xtsctl writes are LUKS2 as cryptsetup
// lays it out by default; cryptsetup dumps the same key and x/crypto/xts
// decrypts their data with it; keyslots added, changed and removed on
// either side open (or no longer open) on the other; header backups are
// cryptsetup's byte for byte, and restore brings back what they hold.
func TestLUKSWrittenByXtsctl(t *testing.T) {
	needCryptsetup(t)
	for _, c := range []struct {
		name    string
		flags   []string
		ss      int
		keyBits int
	}{
		{"default", []string{"--label", "xtsctl label", "--uuid", "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9"}, 4096, 512},
		{"512-aes128", []string{"--sector-size", "512", "--key-size", "256"}, 512, 256},
		{"2048", []string{"--sector-size", "2048"}, 2048, 512},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			pass := secretFile(t, dir, "pass", []byte("written by xtsctl"))
			in := filepath.Join(dir, "in")
			plain := randomBytes(1 << 20)
			os.WriteFile(in, plain, 0o600)
			img := filepath.Join(dir, "img")
			xt(t, append(append([]string{"encrypt", "--type", "luks2", "--key-file", pass}, c.flags...), in, img)...)
			fi, _ := os.Stat(img)
			if fi.Size() != 16<<20+1<<20 {
				t.Errorf("image of %d bytes, want 16 MiB of header and 1 MiB of data", fi.Size())
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(cs(t, "luksDump", "--dump-json-metadata", img)), &m); err != nil {
				t.Fatal(err)
			}
			seg := obj(m, "segments", "0")
			cfg := obj(m, "config")
			ks := obj(m, "keyslots", "0")
			if seg["offset"] != "16777216" || seg["size"] != "dynamic" || seg["encryption"] != "aes-xts-plain64" ||
				seg["sector_size"] != float64(c.ss) || cfg["json_size"] != "12288" || cfg["keyslots_size"] != "16744448" ||
				obj(ks, "kdf")["type"] != "argon2id" || ks["key_size"] != float64(c.keyBits/8) {
				t.Errorf("cryptsetup reads the metadata as %v", m)
			}
			dump := cs(t, "luksDump", img)
			if c.name == "default" && (!strings.Contains(dump, "Label:         \txtsctl label") || !strings.Contains(dump, "UUID:          \t0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9")) {
				t.Errorf("luksDump:\n%s", dump)
			}
			key := csKey(t, img, "", pass)
			if got := refXTS(t, false, key, readAt(t, img, len(plain), 16<<20), c.ss); !bytes.Equal(got, plain) {
				t.Fatal("x/crypto/xts does not decrypt the data segment with the key cryptsetup dumps")
			}
			// info --dm-table --show-key: the table with that key.
			table := filepath.Join(dir, "table")
			xt(t, "info", "--dm-table", "--show-key", "--key-file", pass, "--key-output", table, "--device", "/dev/loop9", img)
			want := fmt.Sprintf("0 2048 crypt aes-xts-plain64 %x 0 /dev/loop9 32768", key)
			if c.ss != 512 {
				want += fmt.Sprintf(" 1 sector_size:%d", c.ss)
			}
			if b, _ := os.ReadFile(table); string(b) != want+"\n" {
				t.Errorf("info --dm-table --show-key wrote %q, want %q", b, want)
			}
			if c.name == "default" {
				testLUKSKeyslots(t, dir, img, pass, plain)
			}
		})
	}
}

func testLUKSKeyslots(t *testing.T, dir, img, pass string, plain []byte) {
	out := filepath.Join(dir, "out")
	decrypts := func(args ...string) {
		t.Helper()
		os.Remove(out)
		xt(t, append(append([]string{"decrypt"}, args...), img, out)...)
		if got, _ := os.ReadFile(out); !bytes.Equal(got, plain) {
			t.Fatalf("decrypt %v: not the plaintext", args)
		}
	}
	opens := func(pf string, slot string) bool {
		return csOK("open", "--test-passphrase", "--key-file", pf, "--key-slot", slot, img)
	}
	// cryptsetup's keyslot opens here.
	p7 := secretFile(t, dir, "p7", []byte("added by cryptsetup\n"))
	cs(t, append(append([]string{"luksAddKey", "--batch-mode", "--key-file", pass, "--key-slot", "7"}, csPBKDF2...), img, p7)...)
	decrypts("--key-file", p7, "-S", "7")
	// Ours open in cryptsetup: added in keyslot 2, changed, removed.
	p2 := secretFile(t, dir, "p2", []byte("added by xtsctl"))
	xt(t, "passphrase", "add", "--key-file", p7, "--new-key-file", p2, "--key-slot", "2", img)
	if !opens(p2, "2") {
		t.Fatal("cryptsetup does not open the keyslot xtsctl added")
	}
	p3 := secretFile(t, dir, "p3", []byte("changed by xtsctl\n"))
	xt(t, "passphrase", "change", "--key-file", p2, "--new-passphrase-file", p3, "-S", "2", img)
	p3raw := secretFile(t, dir, "p3raw", []byte("changed by xtsctl"))
	if opens(p2, "2") || !opens(p3raw, "2") {
		t.Fatal("after passphrase change, cryptsetup opens keyslot 2 with the old passphrase, or not with the new one")
	}
	backup := filepath.Join(dir, "backup")
	xt(t, "header", "backup", img, backup)
	csBackup := filepath.Join(dir, "cs-backup")
	cs(t, "luksHeaderBackup", "--header-backup-file", csBackup, img)
	if a, b := readFile(t, backup), readFile(t, csBackup); !bytes.Equal(a, b) {
		t.Error("header backup differs from cryptsetup's luksHeaderBackup")
	}
	xt(t, "passphrase", "remove", "--passphrase-file", p3, img)
	if opens(p3raw, "2") {
		t.Fatal("cryptsetup still opens the keyslot xtsctl removed")
	}
	stdout, _ := xt(t, "info", img)
	if strings.Contains(stdout, "keyslot 2:") {
		t.Errorf("info still lists keyslot 2:\n%s", stdout)
	}
	// Restoring the backup brings keyslot 2 back, in cryptsetup too; as
	// for volumes it asks first, and without a terminal it changes
	// nothing unless --batch-mode says so.
	unrestored := readFile(t, img)
	xtFail(t, exitUsage, "restoring "+backup+" onto "+img+" brings back the passphrase of key slot 2 as they were (removed or changed since the backup), and there is no terminal", "header", "restore", img, backup)
	if !bytes.Equal(unrestored, readFile(t, img)) {
		t.Fatal("a refused header restore changed the image")
	}
	xt(t, "header", "restore", "--batch-mode", img, backup)
	if !opens(p3raw, "2") {
		t.Fatal("cryptsetup does not open keyslot 2 after the header was restored")
	}
	decrypts("--passphrase-file", p3)
	// open --test-passphrase names the keyslot and serves nothing.
	if _, stderr := xt(t, "open", "--test-passphrase", "--key-file", p3raw, img); !strings.Contains(stderr, "the passphrase opens keyslot 2") {
		t.Errorf("open --test-passphrase said:\n%s", stderr)
	}
	xtFail(t, exitKey, "no keyslot opens with this passphrase", "open", "--test-passphrase", "--key-file", p3raw, "-S", "7", img)
	// remove -S 7, authorised by another keyslot's passphrase, as
	// luksKillSlot.
	xt(t, "passphrase", "remove", "--key-file", pass, "-S", "7", img)
	if opens(p7, "7") || !opens(p3raw, "2") {
		t.Fatal("remove -S 7 did not remove just keyslot 7")
	}
	// A backup of another volume is refused.
	other, _ := csLUKS2(t, dir, "other")
	otherBackup := filepath.Join(dir, "other-backup")
	xt(t, "header", "backup", other, otherBackup)
	before := readFile(t, img)
	xtFail(t, exitUsage, "the backup is of another volume", "header", "restore", img, otherBackup)
	if !bytes.Equal(before, readFile(t, img)) {
		t.Fatal("a refused restore changed the image")
	}
}

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestLUKSFormat: format --type luks2 makes an image of the size asked for
// plus cryptsetup's 16 MiB of header, which cryptsetup opens and whose data
// reads as zeros, with the UUID it prints.
func TestLUKSFormat(t *testing.T) {
	needCryptsetup(t)
	dir := t.TempDir()
	pass := secretFile(t, dir, "pass", []byte("format\n"))
	img := filepath.Join(dir, "img")
	stdout, _ := xt(t, "format", "--type", "luks2", "--passphrase-file", pass, "--size", "512K", img)
	if uuid := strings.TrimSpace(cs(t, "luksUUID", img)); strings.TrimSpace(stdout) != uuid {
		t.Errorf("format printed %q, cryptsetup reads the UUID %s", stdout, uuid)
	}
	if fi, _ := os.Stat(img); fi.Size() != 16<<20+512<<10 {
		t.Errorf("image of %d bytes", fi.Size())
	}
	raw := secretFile(t, dir, "raw", []byte("format"))
	key := csKey(t, img, "", raw)
	if got := refXTS(t, false, key, readAt(t, img, 512<<10, 16<<20), 4096); !bytes.Equal(got, make([]byte, 512<<10)) {
		t.Error("the data of a formatted image does not decrypt to zeros")
	}
	// The passphrase file's newline was dropped; its key file form is
	// the passphrase without it.
	out := filepath.Join(dir, "out")
	xt(t, "decrypt", "--key-file", raw, img, out)
	if !bytes.Equal(readFile(t, out), make([]byte, 512<<10)) {
		t.Error("decrypt of a formatted image is not zeros")
	}
}

// TestLUKSNewKeyslotCosts: new keyslots are calibrated like volume key
// slots and refused above what xtsctl unlocks unasked.
func TestLUKSNewKeyslotCosts(t *testing.T) {
	dir := t.TempDir()
	pass := secretFile(t, dir, "pass", []byte("costs"))
	out := filepath.Join(dir, "out")
	xtFail(t, exitUsage, "more than xtsctl unlocks without --allow-expensive-kdf", "format", "--type", "luks2", "--key-file", pass,
		"--kdf-memory", "4G", "--kdf-iterations", "100", "--size", "1M", out)
	_, stderr := xt(t, "format", "--type", "luks2", "--key-file", pass, "--kdf-memory", "1M", "--kdf-iterations", "4", "--size", "1M", out)
	if !strings.Contains(stderr, "warning: Argon2id memory 1.0 MiB is below 32 MiB") {
		t.Errorf("no warning about cheap costs:\n%s", stderr)
	}
	h := luksHeaderOf(t, out)
	if k := h.Keyslots[0].KDF; k.Type != "argon2id" || k.Time != 4 || k.MemoryKiB != 1024 {
		t.Errorf("keyslot 0 has %v, want the costs given", k)
	}
	// Calibrated (the tests' stand-in is off for this one).
	saved := testOnlyKDF["luks"]
	delete(testOnlyKDF, "luks")
	defer func() { testOnlyKDF["luks"] = saved }()
	os.Remove(out)
	xt(t, "format", "--type", "luks2", "--key-file", pass, "--kdf-time", "1s", "--kdf-memory", "32M", "--size", "1M", out)
	k := luksHeaderOf(t, out).Keyslots[0].KDF
	if k.Type != "argon2id" || k.Time < 4 || k.MemoryKiB != 32<<10 {
		t.Errorf("calibrated keyslot has %v, want argon2id with at least 4 passes over 32 MiB", k)
	}
}

func luksHeaderOf(t testing.TB, path string) *luks.Header {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, _ := f.Stat()
	h, err := luks.ReadHeader(f, fi.Size())
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestLUKSLocked: commands that write a header refuse an image another
// holds (an open, another command), with the volumes' lock protocol.
func TestLUKSLocked(t *testing.T) {
	needCryptsetup(t)
	dir := t.TempDir()
	img, pass := csLUKS2(t, dir, "img")
	f, err := volume.LockImage(img, true, 0) // as a read-only open holds it
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	before := readFile(t, img)
	xtFail(t, exitDevice, "is in use", "passphrase", "add", "--key-file", pass, "--new-key-file", pass, img)
	xtFail(t, exitDevice, "is in use", "header", "restore", img, img)
	if !bytes.Equal(before, readFile(t, img)) {
		t.Fatal("the image changed")
	}
	// Reading takes a shared lock: decrypt goes ahead.
	xt(t, "decrypt", "--key-file", pass, img, filepath.Join(dir, "out"))
}

// TestLUKSDetachedHeaderWrites: with --header, passphrase changes and
// header backup and restore work on the header file, which cryptsetup
// then reads the same way; LUKS1 backups are cryptsetup's too.
func TestLUKSDetachedHeaderWrites(t *testing.T) {
	needCryptsetup(t)
	dir := t.TempDir()
	pass := secretFile(t, dir, "pass", []byte("detached"))
	data := filepath.Join(dir, "data")
	hdr := filepath.Join(dir, "hdr")
	sparse(t, data, 1<<20)
	sparse(t, hdr, 16<<20)
	cs(t, append(append([]string{"luksFormat", "--batch-mode", "--type", "luks2", "--header", hdr, "--key-file", pass}, csPBKDF2...), data)...)
	dataBefore := readFile(t, data)
	hdrBefore := readFile(t, hdr)
	xtFail(t, exitUsage, "the output is the header file", "decrypt", "--force", "--header", hdr, "--key-file", pass, data, hdr)
	xtFail(t, exitUsage, "input and output are the same file", "decrypt", "--force", "--header", hdr, "--key-file", pass, data, data)
	if !bytes.Equal(hdrBefore, readFile(t, hdr)) || !bytes.Equal(dataBefore, readFile(t, data)) {
		t.Fatal("a refused decrypt changed its input")
	}
	p1 := secretFile(t, dir, "p1", []byte("added to a detached header"))
	xt(t, "passphrase", "add", "--header", hdr, "--key-file", pass, "--new-key-file", p1, "-S", "1", data)
	if !csOK("open", "--test-passphrase", "--header", hdr, "--key-file", p1, "--key-slot", "1", data) {
		t.Fatal("cryptsetup does not open the keyslot added to the detached header")
	}
	if !bytes.Equal(dataBefore, readFile(t, data)) {
		t.Fatal("a change of the detached header wrote the data device")
	}
	backup, csBackup := filepath.Join(dir, "b"), filepath.Join(dir, "cs-b")
	xt(t, "header", "backup", "--header", hdr, data, backup)
	cs(t, "luksHeaderBackup", "--header-backup-file", csBackup, hdr)
	if !bytes.Equal(readFile(t, backup), readFile(t, csBackup)) {
		t.Error("backup of the detached header differs from luksHeaderBackup's")
	}
	xt(t, "passphrase", "remove", "--header", hdr, "--key-file", p1, data)
	if csOK("open", "--test-passphrase", "--header", hdr, "--key-file", p1, data) {
		t.Fatal("cryptsetup still opens the removed keyslot")
	}
	xt(t, "header", "restore", "--batch-mode", "--header", hdr, data, backup)
	if !csOK("open", "--test-passphrase", "--header", hdr, "--key-file", p1, "--key-slot", "1", data) {
		t.Fatal("restore did not bring keyslot 1 back")
	}

	l1 := filepath.Join(dir, "l1")
	sparse(t, l1, 3<<20)
	cs(t, "luksFormat", "--batch-mode", "--type", "luks1", "--pbkdf-force-iterations", "1000", "--key-file", pass, l1)
	xt(t, "header", "backup", l1, backup+"1")
	cs(t, "luksHeaderBackup", "--header-backup-file", csBackup+"1", l1)
	if !bytes.Equal(readFile(t, backup+"1"), readFile(t, csBackup+"1")) {
		t.Error("LUKS1 header backup differs from luksHeaderBackup's")
	}
	stderr := xtFail(t, exitInput, "unsupported LUKS version 1 (restore)", "header", "restore", l1, backup+"1")
	if !strings.Contains(stderr, "hint: cryptsetup writes LUKS1 headers") {
		t.Errorf("no hint:\n%s", stderr)
	}
}

// TestLUKSKeyfileWindow: --keyfile-offset and --keyfile-size pick the
// passphrase out of a key file as cryptsetup does.
func TestLUKSKeyfileWindow(t *testing.T) {
	needCryptsetup(t)
	dir := t.TempDir()
	kf := secretFile(t, dir, "kf", []byte("0123the passphrase\nand the rest"))
	img := filepath.Join(dir, "img")
	sparse(t, img, 17<<20)
	cs(t, append(append([]string{"luksFormat", "--batch-mode", "--type", "luks2", "--key-file", kf, "--keyfile-offset", "4", "--keyfile-size", "15"}, csPBKDF2...), img)...)
	out := filepath.Join(dir, "out")
	xt(t, "decrypt", "--key-file", kf, "--keyfile-offset", "4", "--keyfile-size", "15", img, out)
	os.Remove(out)
	xtFail(t, exitKey, "no keyslot opens with this passphrase", "decrypt", "--key-file", kf, "--keyfile-offset", "4", img, out)
}
