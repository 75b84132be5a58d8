package tcrypt

import (
	"errors"
	"strings"
	"testing"

	"github.com/xtsctl/xtsctl/disk"
)

var (
	passA = []byte("aaaaaaaaaaaa")
	passB = []byte("bbbbbbbbbbbb")
)

// sampleImages are the images made by VeraCrypt and TrueCrypt, from
// cryptsetup's test suite (testdata/README.md), with what opens them and
// the FAT serial number (blkid's UUID) their notes give.
var sampleImages = []struct {
	file     string
	opts     disk.Options
	pass     []byte
	keyfiles []string
	uuid     string
	// product, kdf and data offset the header must show.
	product string
	kdf     string
	iv      uint64
}{
	{file: "vc_1-sha512-xts-aes", pass: passA, uuid: "DEAD-BABE", product: "VeraCrypt", kdf: "PBKDF2-SHA-512 500000 (VeraCrypt)", iv: 256},
	{file: "tc_5-sha512-xts-aes", pass: passA, uuid: "DEAD-BABE", product: "TrueCrypt", kdf: "PBKDF2-SHA-512 1000 (TrueCrypt)", iv: 256},
	{file: "tc_4-sha512-xts-aes-hidden", pass: passA, uuid: "DEAD-BABE", product: "TrueCrypt", kdf: "PBKDF2-SHA-512 1000 (TrueCrypt)", iv: 256},
	{file: "tc_4-sha512-xts-aes-hidden", opts: disk.Options{OptHidden: "true"}, pass: passB, uuid: "CAFE-BABE", product: "TrueCrypt", kdf: "PBKDF2-SHA-512 1000 (TrueCrypt)", iv: 157696 / 512},
	{file: "tck_5-sha512-xts-aes", pass: passA, keyfiles: []string{"keyfile1", "keyfile2"}, uuid: "DEAD-BABE", product: "TrueCrypt", kdf: "PBKDF2-SHA-512 1000 (TrueCrypt)", iv: 256},
	{file: "tck_5-sha512-xts-aes", pass: passA, keyfiles: []string{"keyfile2", "keyfile1"}, uuid: "DEAD-BABE", product: "TrueCrypt", kdf: "PBKDF2-SHA-512 1000 (TrueCrypt)", iv: 256},
	{file: "sys_vc_1_mbr_part-sha256-xts-aes.gz", opts: disk.Options{OptSystem: "true"}, pass: passA, uuid: "DEAD-BABE", product: "VeraCrypt", kdf: "PBKDF2-SHA-256 200000 (VeraCrypt system)", iv: 1048576 / 512},
}

// TestSampleImages unlocks every sample image without --tcrypt-hash (so
// the whole parallel search runs) and reads its plaintext through the
// generic extent device: the FAT boot sector's serial is the UUID the
// image's notes give, and blkid -p says the same.
func TestSampleImages(t *testing.T) {
	for _, s := range sampleImages {
		name := s.file + strings.TrimSpace(" "+s.opts[OptHidden])
		t.Run(name, func(t *testing.T) {
			path := testImage(t, s.file)
			img := openImage(t, path, false)
			sec := &disk.Secret{Passphrase: s.pass}
			for _, k := range s.keyfiles {
				sec.KeyFiles = append(sec.KeyFiles, keyfile(t, k))
			}
			h, u, err := unlockImage(t, img, s.opts, sec)
			if err != nil {
				t.Fatal(err)
			}
			if u.Layout.Extents[0].Sector.IVOffset != s.iv || u.Layout.Extents[0].Sector.Size != 512 {
				t.Errorf("tweak rule %+v, want 512-byte units from %d", u.Layout.Extents[0].Sector, s.iv)
			}
			if !strings.Contains(u.SlotName, s.product) || !strings.Contains(u.SlotName, s.kdf) {
				t.Errorf("opened by %q, want %s and %s", u.SlotName, s.product, s.kdf)
			}
			plain := plaintext(t, path, u)
			got, err := fatSerial(plain[:512])
			if err != nil {
				t.Fatalf("the plaintext does not start with a FAT boot sector: %v", err)
			}
			if got != s.uuid {
				t.Errorf("FAT serial %s, want %s", got, s.uuid)
			}
			if id, ok := blkidUUID(t, plain); ok && id != s.uuid {
				t.Errorf("blkid -p says UUID %q, want %s", id, s.uuid)
			}
			rep, err := h.Report(disk.ReportOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var text strings.Builder
			for _, l := range rep.Lines {
				text.WriteString(l.Key + ": " + l.Value + "\n")
			}
			if !strings.Contains(text.String(), "cipher: aes-xts") || strings.Contains(text.String(), "key:") {
				t.Errorf("info shows:\n%s", text.String())
			}
		})
	}
}

// TestCascadeRefused: the AES-Twofish-Serpent image is named and refused,
// saying the passphrase was right; with TestOnly it unlocks unservable.
func TestCascadeRefused(t *testing.T) {
	path := testImage(t, "vc_1-sha512-xts-aes-twofish-serpent")
	img := openImage(t, path, false)
	_, _, err := unlockImage(t, img, disk.Options{OptHash: "sha512"}, &disk.Secret{Passphrase: passA})
	if err == nil || !errors.Is(err, disk.ErrUnsupported) || disk.KindOf(err) != disk.KindInput ||
		!strings.Contains(err.Error(), "AES-Twofish-Serpent") || !strings.Contains(err.Error(), "passphrase is right") {
		t.Fatalf("unlock = %v (kind %v)", err, disk.KindOf(err))
	}
	t.Log(err)
}
