package tcrypt

import (
	"errors"
	"strings"
	"testing"

	xxts "golang.org/x/crypto/xts"

	"github.com/xtsctl/xtsctl/disk"
)

// TestRefusals: headers that open (the passphrase is right) but ask for
// what xtsctl does not serve, or describe data the image cannot hold, are
// refused with what they ask for; with TestOnly they unlock unservable.
func TestRefusals(t *testing.T) {
	const size = 256<<10 + 64<<10
	pim1 := disk.Options{OptHash: "sha512", OptPIM: "1"}
	tc := disk.Options{OptHash: "sha512"}
	trueCryptSynth := func() synth {
		s := defaultSynth()
		s.magic, s.minProg, s.iter = "TRUE", 0x0700, 1000
		return s
	}
	for _, c := range []struct {
		name   string
		edit   func(*synth)
		opts   disk.Options
		kind   disk.Kind
		is     error
		want   string
		tcOnly bool
	}{
		{"VeraCrypt header version 6", func(s *synth) { s.version = 6 }, pim1, disk.KindInput, disk.ErrUnsupported, "header version 6", false},
		{"VeraCrypt header version 4", func(s *synth) { s.version = 4 }, pim1, disk.KindInput, disk.ErrUnsupported, "VeraCrypt writes 5", false},
		{"newer VeraCrypt", func(s *synth) { s.minProg = 0x0200 }, pim1, disk.KindInput, disk.ErrUnsupported, "VeraCrypt 2.00 or later", false},
		{"4096-byte sectors", func(s *synth) { s.sectorSize = 4096 }, pim1, disk.KindInput, disk.ErrUnsupported, "4096-byte sectors", false},
		{"data past the end", func(s *synth) { s.volSize = 1 << 40 }, pim1, disk.KindInput, nil, "past the end", false},
		{"data offset overflow", func(s *synth) { s.dataOff = 1<<64 - 512 }, pim1, disk.KindInput, nil, "past the end", false},
		{"data over the header", func(s *synth) { s.dataOff = 0 }, pim1, disk.KindInput, nil, "covers the header", false},
		{"partial sectors", func(s *synth) { s.volSize = 1000 }, pim1, disk.KindInput, nil, "whole 512-byte sectors", false},
		{"no data", func(s *synth) { s.volSize = 0 }, pim1, disk.KindInput, nil, "no data", false},
		{"newer TrueCrypt", func(s *synth) { *s = trueCryptSynth(); s.minProg = 0x0800 }, tc, disk.KindInput, disk.ErrUnsupported, "TrueCrypt 8.00", false},
		{"AES-LRW", func(s *synth) { *s = trueCryptSynth(); s.version, s.minProg, s.encrypt = 2, 0x0410, encryptAESLRW }, tc, disk.KindInput, disk.ErrUnsupported, "AES in LRW mode", true},
		{"AES-CBC", func(s *synth) { *s = trueCryptSynth(); s.version, s.minProg, s.encrypt = 1, 0x0100, encryptAESCBC }, tc, disk.KindInput, disk.ErrUnsupported, "AES in CBC mode", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := defaultSynth()
			c.edit(&s)
			path := s.volume(t, passA, size, 0)
			_, _, err := unlockImage(t, openImage(t, path, false), c.opts, &disk.Secret{Passphrase: passA})
			if err == nil || disk.KindOf(err) != c.kind || (c.is != nil && !errors.Is(err, c.is)) ||
				!strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "passphrase is right") {
				t.Fatalf("err = %v (kind %v), want kind %v with %q", err, disk.KindOf(err), c.kind, c.want)
			}
			if errors.Is(err, disk.ErrWrongSecret) {
				t.Fatal("a refusal reads as a wrong secret")
			}
			// With TestOnly the passphrase checks out.
			h, err := Format.Open(openImage(t, path, false), c.opts)
			if err != nil {
				t.Fatal(err)
			}
			u, err := h.Unlock(t.Context(), &disk.Request{Slot: -1, TestOnly: true, Options: c.opts}, &disk.Secret{Passphrase: passA})
			if strings.Contains(c.name, "version") || strings.Contains(c.name, "newer") {
				if err == nil {
					t.Fatal("a header of an unknown version passed a passphrase test")
				}
				return
			}
			if err != nil || u.Unservable == "" || len(u.Key) != 0 && c.tcOnly {
				t.Fatalf("TestOnly: %+v, %v", u, err)
			}
		})
	}
}

// TestLegacyHidden: a TrueCrypt 5 hidden volume (header version 3), whose
// header is 1536 bytes before the end and whose data ends there.
func TestLegacyHidden(t *testing.T) {
	const size = 300 << 10
	s := defaultSynth()
	s.magic, s.version, s.minProg, s.iter, s.dataOff, s.volSize = "TRUE", 3, 0x0500, 1000, 0, 0
	s.hiddenSize = 64 << 10
	path := s.volume(t, passB, size, size-1536)
	_, u, err := unlockImage(t, openImage(t, path, false), disk.Options{OptHidden: "true", OptHash: "sha512"}, &disk.Secret{Passphrase: passB})
	if err != nil {
		t.Fatal(err)
	}
	e := u.Layout.Extents[0]
	if want := int64(size - 1536 - 64<<10); e.Source != want || e.Length != 64<<10 || e.Sector.IVOffset != uint64(want/512) {
		t.Fatalf("legacy hidden extent %+v, want %d bytes at %d", e, 64<<10, want)
	}
}

// TestSystemFlagWarning: a header marked as system encryption, opened as
// a volume, warns that its units may count from the drive's start.
func TestSystemFlagWarning(t *testing.T) {
	s := defaultSynth()
	s.flags = flagSystemEncryption
	path := s.volume(t, passA, 256<<10+64<<10, 0)
	_, u, err := unlockImage(t, openImage(t, path, false), disk.Options{OptHash: "sha512", OptPIM: "1"}, &disk.Secret{Passphrase: passA})
	if err != nil {
		t.Fatal(err)
	}
	if len(u.Warnings) != 1 || !strings.Contains(u.Warnings[0], "--tcrypt-system") {
		t.Fatalf("warnings %q", u.Warnings)
	}
}

// encryptChain is xtsChain's decryption undone: the first cipher of the
// chain first, each with its key and tweak key.
func encryptChain(chain []blockCipher) func(dst, src, dk []byte) {
	return func(dst, src, dk []byte) {
		n := len(chain)
		copy(dst, src)
		for i := range n {
			key := append(append([]byte(nil), dk[32*i:32*i+32]...), dk[32*n+32*i:32*n+32*i+32]...)
			c, err := xxts.NewCipher(chain[i].new, key)
			if err != nil {
				panic(err)
			}
			c.Encrypt(dst, dst, 0)
		}
	}
}

// TestEveryCascadeNamed makes a synthetic VeraCrypt header with every
// cipher and cascade VeraCrypt offers besides AES and checks that it is
// refused under VeraCrypt's name for it. (The key order and naming were
// checked on real images: the sample AES-Twofish-Serpent volume and
// tcplay's cascades.)
func TestEveryCascadeNamed(t *testing.T) {
	for _, c := range []struct {
		chain []blockCipher
		name  string
	}{
		{[]blockCipher{cSerpent}, "Serpent"},
		{[]blockCipher{cTwofish}, "Twofish"},
		{[]blockCipher{cCamellia}, "Camellia"},
		{[]blockCipher{cKuznyechik}, "Kuznyechik"},
		{[]blockCipher{cTwofish, cAES}, "AES-Twofish"},
		{[]blockCipher{cSerpent, cTwofish, cAES}, "AES-Twofish-Serpent"},
		{[]blockCipher{cKuznyechik, cCamellia}, "Camellia-Kuznyechik"},
		{[]blockCipher{cSerpent, cCamellia}, "Camellia-Serpent"},
		{[]blockCipher{cAES, cKuznyechik}, "Kuznyechik-AES"},
		{[]blockCipher{cCamellia, cSerpent, cKuznyechik}, "Kuznyechik-Serpent-Camellia"},
		{[]blockCipher{cTwofish, cKuznyechik}, "Kuznyechik-Twofish"},
		{[]blockCipher{cAES, cSerpent}, "Serpent-AES"},
		{[]blockCipher{cAES, cTwofish, cSerpent}, "Serpent-Twofish-AES"},
		{[]blockCipher{cSerpent, cTwofish}, "Twofish-Serpent"},
	} {
		s := defaultSynth()
		s.encrypt = encryptChain(c.chain)
		path := s.volume(t, passA, 256<<10+64<<10, 0)
		_, _, err := unlockImage(t, openImage(t, path, false), disk.Options{OptHash: "sha512", OptPIM: "1"}, &disk.Secret{Passphrase: passA})
		if err == nil || !errors.Is(err, disk.ErrUnsupported) || !strings.Contains(err.Error(), "with "+c.name+" in XTS mode") {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}
