package blockdev

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/xtsctl/xtsctl/disk"
	"github.com/xtsctl/xtsctl/luks"
	"github.com/xtsctl/xtsctl/volume"
)

// TestCipherString: the one-line summary names each parameter that is set,
// in the words cryptsetup uses for a plain mapping.
func TestCipherString(t *testing.T) {
	for _, c := range []struct {
		c    Cipher
		want string
	}{
		{Cipher{Name: "aes-xts-plain64", KeyBits: 512, SectorSize: 512}, "aes-xts-plain64, 512-bit key, 512-byte sectors"},
		{Cipher{Name: "aes-xts-plain64", KeyBits: 256, SectorSize: 4096, IVLargeSectors: true, IVOffset: 5, DataOffset: 1024},
			"aes-xts-plain64, 256-bit key, 4096-byte sectors, iv_large_sectors, skip 5, offset 2"},
		{Cipher{Name: "aes-xts-plain64", KeyBits: 512, SectorSize: 4096, DataOffset: 1 << 20, Integrity: "blake2b", TagSize: 32},
			"aes-xts-plain64, 512-bit key, 4096-byte sectors, blake2b 32-byte tags"},
		{Cipher{Name: "aes-xts-plain64", KeyBits: 512, SectorSize: 4096, DataOffset: 1 << 20, Integrity: "none"},
			"aes-xts-plain64, 512-bit key, 4096-byte sectors, no integrity tags"},
	} {
		if got := c.c.String(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.c, got, c.want)
		}
	}
}

// TestCipherJSON: fields round-trip; the text that state files of earlier
// versions hold still reads, as the name.
func TestCipherJSON(t *testing.T) {
	c := Cipher{Name: "aes-xts-plain64", KeyBits: 512, SectorSize: 4096, IVOffset: 3, DataOffset: 8192, Integrity: "blake2b", TagSize: 16}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var back Cipher
	if err := json.Unmarshal(b, &back); err != nil || back != c {
		t.Fatalf("%s read back as %+v (%v)", b, back, err)
	}
	var st State
	old := `{"name":"v","cipher":"aes-xts-plain64, 512-bit key, 4096-byte sectors, blake2b 32-byte tags"}`
	if err := json.Unmarshal([]byte(old), &st); err != nil || st.Cipher.String() != "aes-xts-plain64, 512-bit key, 4096-byte sectors, blake2b 32-byte tags" {
		t.Fatalf("old state: %+v (%v)", st.Cipher, err)
	}
	if err := json.Unmarshal([]byte(`{"cipher":7}`), &st); err == nil {
		t.Error("a number read as a cipher")
	}
}

// TestCipherOf: what the record of an open image (status) says of its
// encryption, from the layout its format unlocked, is what the header or
// the open flags say, field by field, as the command line described each
// format before the format layer: the data offset and tweak rule of a
// plain image, a volume's integrity ("none" without tags), a LUKS data
// segment's offset.
func TestCipherOf(t *testing.T) {
	dir := t.TempDir()
	plainImg := filepath.Join(dir, "p.img")
	os.WriteFile(plainImg, make([]byte, 8*512+64<<10), 0o600)
	luksImg := filepath.Join(dir, "l.luks")
	lh, _, _ := luksImage(t, luksImg, 64<<10, luks.FormatOptions{SectorSize: 2048, DataOffset: 2 << 20})
	volumeCipher := func(name string) Cipher {
		f, err := os.Open(filepath.Join("../testimages/v2", name))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		st, _ := f.Stat()
		hs, err := volume.ReadHeaders(f, st.Size())
		if err != nil {
			t.Fatal(err)
		}
		h := hs.Header
		c := Cipher{Name: "aes-xts-plain64", KeyBits: 8 * h.KeySize, SectorSize: h.SectorSize, DataOffset: h.DataOffset, Integrity: h.Integrity.String()}
		if h.Integrity != volume.IntegrityNone {
			c.TagSize = h.TagSize
		}
		return c
	}
	for _, c := range []struct {
		name string
		u    *disk.Unlocked
		want Cipher
		text string // "" when it depends on the test image
	}{
		{"plain, --sector-size 4096 --iv-large-sectors --offset 8 --skip 24",
			unlocked(t, plainImg, "plain", plainOptions(4096, 8, 24, true), keyFile(seqKey(64))),
			Cipher{Name: "aes-xts-plain64", KeyBits: 512, SectorSize: 4096, IVLargeSectors: true, IVOffset: 24, DataOffset: 4096},
			"aes-xts-plain64, 512-bit key, 4096-byte sectors, iv_large_sectors, skip 24, offset 8"},
		{"plain, AES-128",
			unlocked(t, plainImg, "plain", plainOptions(512, 0, 0, false), keyFile(seqKey(32))),
			Cipher{Name: "aes-xts-plain64", KeyBits: 256, SectorSize: 512},
			"aes-xts-plain64, 256-bit key, 512-byte sectors"},
		{"volume without tags",
			goldenVolume(t, "v2", "disk-xtsctl-nointegrity.vol"), volumeCipher("disk-xtsctl-nointegrity.vol"), ""},
		{"volume with tags",
			goldenVolume(t, "v2", "disk-4096.vol"), volumeCipher("disk-4096.vol"), ""},
		{"volume with tags, AES-128",
			goldenVolume(t, "v2", "disk-512-aes128-tag16.vol"), volumeCipher("disk-512-aes128-tag16.vol"),
			"aes-xts-plain64, 256-bit key, 512-byte sectors, blake2b 16-byte tags"},
		{"luks2, 2048-byte sectors, data at 2 MiB",
			unlocked(t, luksImg, "luks", nil, passphrase(luksPass)),
			Cipher{Name: lh.Cipher, KeyBits: 8 * lh.KeySize, SectorSize: 2048, DataOffset: 2 << 20},
			"aes-xts-plain64, 512-bit key, 2048-byte sectors, offset 4096"},
	} {
		got := cipherOf(c.u)
		if got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
		if c.text != "" && got.String() != c.text {
			t.Errorf("%s: %q, want %q", c.name, got, c.text)
		}
	}
	if c := cipherOf(goldenVolume(t, "v2", "disk-xtsctl-nointegrity.vol")); c.Integrity != "none" || c.String() != "aes-xts-plain64, 512-bit key, 1024-byte sectors, no integrity tags" {
		t.Errorf("a volume without tags: %+v (%s)", c, c)
	}
}
