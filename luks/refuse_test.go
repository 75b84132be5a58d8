package luks

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// makeLUKS2 has cryptsetup format a small LUKS2 image with a cheap
// pbkdf2 keyslot and returns its path and passphrase.
func makeLUKS2(t *testing.T, extra ...string) (string, []byte) {
	t.Helper()
	needCryptsetup(t)
	dir := t.TempDir()
	pass := randBytes(t, 12)
	pf := writeFile(t, dir, "pass", pass)
	img := filepath.Join(dir, "img")
	sparseFile(t, img, 17<<20)
	args := append([]string{"luksFormat", "--batch-mode", "--type", "luks2", "--key-file", pf}, csPBKDF2...)
	cs(t, append(append(args, extra...), img)...)
	return img, pass
}

// rewriteMeta edits the metadata of both LUKS2 copies of the image and
// recomputes their checksums, as anyone who can write the image can. bin,
// if not nil, edits each binary header first.
func rewriteMeta(t *testing.T, path string, edit func(meta *jvalue), bin func(b []byte, secondary bool)) {
	t.Helper()
	img, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	size := binary.BigEndian.Uint64(img[offHdrSize:])
	for i, off := range []uint64{0, size} {
		c := img[off : off+size]
		area := c[binHeaderSize:]
		meta, err := parseJSON(area[:bytes.IndexByte(area, 0)])
		if err != nil {
			t.Fatal(err)
		}
		if edit != nil {
			edit(meta)
		}
		text := meta.marshal()
		clear(area)
		copy(area, text)
		if bin != nil {
			bin(c[:binHeaderSize], i == 1)
		}
		sum := headerChecksum(hashByName("sha256"), c[:binHeaderSize], area)
		copy(c[offChecksum:offChecksum+checksumLen], append(sum, make([]byte, checksumLen-len(sum))...))
	}
	if err := os.WriteFile(path, img, 0o600); err != nil {
		t.Fatal(err)
	}
}

func readPath(t *testing.T, path string) (*Header, error) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return ReadHeader(f, fileSize(t, f))
}

func wantUnsupported(t *testing.T, err error, f Feature) {
	t.Helper()
	var ue *UnsupportedError
	if !errors.As(err, &ue) || ue.Feature != f || !errors.Is(err, ErrUnsupported) {
		t.Fatalf("got %v, want an *UnsupportedError for %s", err, f)
	}
}

// TestRefuses: what this package does not implement is refused with an
// error naming it, before anything is decrypted.
func TestRefuses(t *testing.T) {
	needCryptsetup(t)
	slot := func(m *jvalue) *jvalue { return m.get("keyslots").get("0") }
	seg := func(m *jvalue) *jvalue { return m.get("segments").get("0") }
	for _, c := range []struct {
		name    string
		edit    func(m *jvalue)
		feature Feature
		slotErr bool // the keyslot is refused, not the volume
	}{
		{"serpent", func(m *jvalue) { seg(m).set("encryption", jstr("serpent-xts-plain64")) }, FeatureCipher, false},
		{"twofish", func(m *jvalue) { seg(m).set("encryption", jstr("twofish-xts-plain64")) }, FeatureCipher, false},
		{"integrity", func(m *jvalue) {
			seg(m).set("integrity", jobj(jmember{"type", jstr("hmac(sha256)")}, jmember{"journal_encryption", jstr("none")}, jmember{"journal_integrity", jstr("none")}))
		}, FeatureIntegrity, false},
		{"unknown-requirement", func(m *jvalue) {
			m.get("config").set("requirements", jobj(jmember{"mandatory", jarr(jstr("frobnicate"))}))
		}, FeatureRequirement, false},
		{"opal-requirement", func(m *jvalue) {
			m.get("config").set("requirements", jobj(jmember{"mandatory", jarr(jstr("opal"))}))
		}, FeatureOPAL, false},
		{"opal-segment", func(m *jvalue) { seg(m).set("type", jstr("hw-opal-crypt")) }, FeatureOPAL, false},
		{"linear-segment", func(m *jvalue) { seg(m).set("type", jstr("linear")) }, FeatureSegmentType, false},
		{"two-segments", func(m *jvalue) {
			s := seg(m).clone()
			seg(m).set("size", jstr("4096"))
			s.set("offset", jstr("16781312"))
			m.get("segments").set("1", s)
			d := m.get("digests").get("0").get("segments")
			d.arr = append(d.arr, jstr("1"))
		}, FeatureSegments, false},
		{"segment-flag", func(m *jvalue) { seg(m).set("flags", jarr(jstr("in-reencryption"))) }, FeatureSegmentFlag, false},
		{"sector-size", func(m *jvalue) { seg(m).set("sector_size", jnum(8192)) }, FeatureSectorSize, false},
		{"key-size-384", func(m *jvalue) {
			slot(m).set("key_size", jnum(48))
			slot(m).get("area").set("key_size", jnum(48))
		}, FeatureKeySize, false},
		{"keyslot-type", func(m *jvalue) { slot(m).set("type", jstr("tokens-only")) }, FeatureKeyslotType, true},
		{"af-hash", func(m *jvalue) { slot(m).get("af").set("hash", jstr("whirlpool")) }, FeatureHash, true},
		{"kdf", func(m *jvalue) { slot(m).get("kdf").set("type", jstr("scrypt")) }, FeatureKDF, true},
		{"kdf-hash", func(m *jvalue) { slot(m).get("kdf").set("hash", jstr("whirlpool")) }, FeatureHash, true},
		{"area-cipher", func(m *jvalue) { slot(m).get("area").set("encryption", jstr("aes-cbc-essiv:sha256")) }, FeatureCipher, true},
		{"digest-type", func(m *jvalue) { m.get("digests").get("0").set("type", jstr("hmac")) }, FeatureDigest, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			img, pass := makeLUKS2(t)
			rewriteMeta(t, img, c.edit, nil)
			h, err := readPath(t, img)
			if err != nil {
				t.Fatalf("ReadHeader: %v (an unsupported header must still be readable for info)", err)
			}
			f, _ := os.Open(img)
			defer f.Close()
			_, _, uerr := h.Unlock(context.Background(), f, pass, UnlockOptions{})
			if c.slotErr {
				if err := h.Supported(); err != nil {
					t.Fatalf("Supported: %v, want only the keyslot refused", err)
				}
				wantUnsupported(t, h.Keyslots[0].Err, c.feature)
				if uerr == nil || !strings.Contains(uerr.Error(), "keyslot 0") {
					t.Fatalf("Unlock: %v", uerr)
				}
				_, _, err := h.Unlock(context.Background(), f, pass, UnlockOptions{Keyslots: []int{0}})
				wantUnsupported(t, err, c.feature)
				return
			}
			wantUnsupported(t, h.Supported(), c.feature)
			wantUnsupported(t, uerr, c.feature)
			_, _, err = h.DataRange(17 << 20)
			wantUnsupported(t, err, c.feature)
		})
	}
}

// TestRefusesCryptsetupMade: the same with headers cryptsetup itself
// made: a non-XTS cipher, and a reencryption in progress.
func TestRefusesCryptsetupMade(t *testing.T) {
	img, _ := makeLUKS2(t, "--cipher", "aes-cbc-essiv:sha256")
	h, err := readPath(t, img)
	if err != nil {
		t.Fatal(err)
	}
	wantUnsupported(t, h.Supported(), FeatureCipher)
	if !strings.Contains(h.Supported().Error(), "aes-cbc-essiv:sha256") {
		t.Fatalf("the error does not name the cipher: %v", h.Supported())
	}

	img, pass := makeLUKS2(t)
	pf := writeFile(t, t.TempDir(), "pass", pass)
	cs(t, "reencrypt", "--init-only", "--batch-mode", "--key-file", pf, "--key-slot", "0", img)
	h, err = readPath(t, img)
	if err != nil {
		t.Fatal(err)
	}
	wantUnsupported(t, h.Supported(), FeatureReencryption)
	f, _ := os.Open(img)
	defer f.Close()
	_, _, err = h.Unlock(context.Background(), f, pass, UnlockOptions{})
	wantUnsupported(t, err, FeatureReencryption)
}

// TestRefusesLUKS1Cipher: a LUKS1 header in another cipher is refused,
// naming it.
func TestRefusesLUKS1Cipher(t *testing.T) {
	needCryptsetup(t)
	dir := t.TempDir()
	pf := writeFile(t, dir, "pass", []byte("pw"))
	img := filepath.Join(dir, "img")
	sparseFile(t, img, 4<<20)
	cs(t, "luksFormat", "--batch-mode", "--type", "luks1", "--pbkdf-force-iterations", "1000", "--key-file", pf, img)
	b, _ := os.ReadFile(img)
	copy(b[8:40], append([]byte("serpent"), make([]byte, 25)...))
	os.WriteFile(img, b, 0o600)
	h, err := readPath(t, img)
	if err != nil {
		t.Fatal(err)
	}
	wantUnsupported(t, h.Supported(), FeatureCipher)
	if !strings.Contains(h.Supported().Error(), "serpent-xts-plain64") {
		t.Fatalf("the error does not name the cipher: %v", h.Supported())
	}
}
