package main

import (
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xtsctl/xtsctl/volume"
	xblake2b "golang.org/x/crypto/blake2b"
)

// TestDigestIsB2sum: the digest encrypt and decrypt print is the
// BLAKE2b-512 of the whole image, as coreutils b2sum (an independent C
// implementation) and x/crypto's blake2b compute it: for one sector, for
// several 1 MiB chunks with a short last one, with and without tags.
func TestDigestIsB2sum(t *testing.T) {
	b2sum, err := exec.LookPath("b2sum")
	if err != nil {
		t.Skip("b2sum (coreutils) is not installed")
	}
	dir := t.TempDir()
	pass := filepath.Join(dir, "pass")
	os.WriteFile(pass, []byte("digest passphrase\n"), 0o600)
	r := rand.New(rand.NewPCG(5, 7))
	for _, c := range []struct {
		size int
		args []string
	}{
		{4096, nil},
		{3<<20 + 8192, nil},
		{3<<20 + 512, []string{"--sector-size", "512", "--integrity", "none"}},
	} {
		data := make([]byte, c.size)
		for i := range data {
			data[i] = byte(r.Uint32())
		}
		img := filepath.Join(dir, "plain.img")
		if err := os.WriteFile(img, data, 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(b2sum, img).Output()
		if err != nil {
			t.Fatalf("b2sum: %v", err)
		}
		want := strings.Fields(string(out))[0]
		x := xblake2b.Sum512(data)
		if hex.EncodeToString(x[:]) != want {
			t.Fatalf("%d bytes: b2sum and x/crypto disagree", c.size)
		}

		vol := filepath.Join(dir, "plain.vol")
		os.Remove(vol)
		code, stdout, stderr := runOut(t, append(append([]string{"encrypt", "--passphrase-file", pass}, c.args...), img, vol)...)
		if code != 0 || strings.TrimSpace(stdout) != want {
			t.Fatalf("%d bytes %v: encrypt exited %d, printed %q, b2sum %s (%s)", c.size, c.args, code, stdout, want, stderr)
		}
		back := filepath.Join(dir, "back.img")
		os.Remove(back)
		code, stdout, stderr = runOut(t, "decrypt", "--passphrase-file", pass, vol, back)
		if code != 0 || strings.TrimSpace(stdout) != want {
			t.Fatalf("%d bytes %v: decrypt exited %d, printed %q, b2sum %s (%s)", c.size, c.args, code, stdout, want, stderr)
		}
		code, stdout, _ = runOut(t, "verify", "--passphrase-file", pass, vol)
		if code != 0 || !strings.Contains(stdout, "digest: ok ("+want+")") {
			t.Fatalf("%d bytes %v: verify exited %d: %s", c.size, c.args, code, stdout)
		}
	}
}

// TestDecryptDigestMismatch: a sector whose ciphertext was changed and
// re-tagged with the volume's own key passes every tag check, so only the
// end-to-end digest can catch it: decrypt fails loudly (integrity exit
// code, both digests named) and writes nothing, and verify says MISMATCH.
func TestDecryptDigestMismatch(t *testing.T) {
	dir := t.TempDir()
	pass := filepath.Join(dir, "pass")
	os.WriteFile(pass, []byte("digest passphrase\n"), 0o600)
	data := make([]byte, 2<<20+4096)
	for i := range data {
		data[i] = byte(i * 7)
	}
	img, vol := filepath.Join(dir, "plain.img"), filepath.Join(dir, "plain.vol")
	os.WriteFile(img, data, 0o600)
	if code, _, stderr := runOut(t, "encrypt", "--passphrase-file", pass, img, vol); code != 0 {
		t.Fatalf("encrypt: %s", stderr)
	}

	v, err := volume.Open(vol, []byte("digest passphrase"), false)
	if err != nil {
		t.Fatal(err)
	}
	l := v.Layout()
	master := v.MasterKey()
	v.Close()
	const sector = 300 // in the second 1 MiB chunk
	f, err := os.OpenFile(vol, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	off := l.DataOffset + sector*int64(l.SectorSize) + 100
	f.ReadAt(b, off)
	b[0] ^= 0x10
	f.WriteAt(b, off)
	// Re-tag it as someone with the master key would, following
	// docs/FORMAT.md with x/crypto's BLAKE2b.
	kh, _ := xblake2b.New512(master)
	kh.Write([]byte("xtsctl volume v1: sector tags"))
	th, _ := xblake2b.New(l.TagSize, kh.Sum(nil))
	ct := make([]byte, l.SectorSize)
	f.ReadAt(ct, l.SectorOffset(sector))
	th.Write(binary.LittleEndian.AppendUint64(nil, sector))
	th.Write(ct)
	f.WriteAt(th.Sum(nil), l.TagPosition(sector))
	f.Close()

	recorded := xblake2b.Sum512(data)
	out := filepath.Join(dir, "out.img")
	code, stdout, stderr := runOut(t, "decrypt", "--passphrase-file", pass, vol, out)
	if code != exitIntegrity || stdout != "" ||
		!strings.Contains(stderr, "end-to-end digest mismatch: the header records "+hex.EncodeToString(recorded[:8])) ||
		!strings.Contains(stderr, "out.img was not written") ||
		!strings.Contains(stderr, "\nxtsctl: hint: every sector's tag matched, yet the data is not what was encrypted: xtsctl verify "+vol+" checks") ||
		!strings.Contains(stderr, "\nxtsctl: hint: --digest none decrypts without the end-to-end digest, checking only each sector's tag") {
		t.Fatalf("decrypt of a re-tagged volume: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if _, err := os.Stat(out); err == nil {
		t.Fatal("decrypt wrote its output despite the digest mismatch")
	}
	code, stdout, _ = runOut(t, "verify", "--passphrase-file", pass, vol)
	if code != exitIntegrity || !strings.Contains(stdout, "data: 513 sectors, 0 bad") || !strings.Contains(stdout, "digest: MISMATCH (recorded "+hex.EncodeToString(recorded[:])) {
		t.Fatalf("verify of a re-tagged volume: exit %d: %s", code, stdout)
	}
}
