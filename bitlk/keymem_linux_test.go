package bitlk

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
	"unicode/utf16"

	"github.com/xtsctl/xtsctl/disk"
	"github.com/xtsctl/xtsctl/disk/disktest"
	"github.com/xtsctl/xtsctl/internal/keymem"
)

// The memory test's helper process derives the secrets of one protector:
// the password's hash (SHA-256 twice of its UTF-16) or the recovery
// key's, the key stretched from it (crypto/sha256), and then, with this
// package's AES-CCM (x/crypto has none), the VMK that key opens and the
// FVEK the VMK opens.

// TestKeyFingerprintHelper is the helper process (it does nothing in a
// normal run). Arguments: the sample, the kind of secret (password,
// recovery or startup-key).
func TestKeyFingerprintHelper(t *testing.T) {
	h := keymem.Helper(t)
	var s sample
	for _, c := range samples {
		if c.file == h.Args[0] {
			s = c
		}
	}
	hdr := mustOpen(t, samplePath(t, s.file))
	var secrets []keymem.Secret
	var kind uint16
	var key []byte
	switch h.Args[1] {
	case "password":
		kind = protPassword
		var units []byte
		for _, u := range utf16.Encode([]rune(s.password)) {
			units = binary.LittleEndian.AppendUint16(units, u)
		}
		h1 := sha256.Sum256(units)
		initial := sha256.Sum256(h1[:])
		secrets = append(secrets,
			keymem.Secret{Name: "password", Key: []byte(s.password)},
			keymem.Secret{Name: "password in UTF-16", Key: units},
			keymem.Secret{Name: "password's hash", Key: initial[:]})
		key = protectorKey(t, hdr, kind, &initial)
	case "recovery":
		kind = protRecovery
		rk, _, err := recoveryKey([]byte(s.recovery))
		if err != nil {
			t.Fatal(err)
		}
		initial := sha256.Sum256(rk[:])
		secrets = append(secrets,
			keymem.Secret{Name: "recovery password", Key: []byte(s.recovery)},
			keymem.Secret{Name: "recovery key", Key: rk[:]},
			keymem.Secret{Name: "recovery key's hash", Key: initial[:]})
		key = protectorKey(t, hdr, kind, &initial)
	case "startup-key":
		kind = protStartupKey
		b, err := os.ReadFile(filepath.Join(sampleDir(t), s.bek))
		if err != nil {
			t.Fatal(err)
		}
		sk, err := parseBEK(b)
		if err != nil {
			t.Fatal(err)
		}
		key = sk.key
	}
	secrets = append(secrets, keymem.Secret{Name: "protector's key", Key: key})
	var vmk []byte
	for _, p := range hdr.meta.protectors {
		if p.protection == kind {
			if k, err := openVMK(key, p); err == nil {
				vmk = k
			}
		}
	}
	if vmk == nil {
		t.Fatal("the key opens no protector")
	}
	_, fvek, err := openKeyDatum(vmk, hdr.meta.fvek)
	if err != nil {
		t.Fatal(err)
	}
	meth, _ := lookupMethod(hdr.meta.method)
	h.Print(append(secrets,
		keymem.Secret{Name: "VMK", Key: vmk},
		// AES-CCM's MAC buffers a key datum's last partial block: 12
		// bytes of a 32-byte key.
		keymem.Secret{Name: "VMK's last 12 bytes", Key: vmk[len(vmk)-12:]},
		keymem.Secret{Name: "FVEK", Key: fvek},
		keymem.Secret{Name: "FVEK's last 12 bytes", Key: fvek[len(fvek)-12:]},
		keymem.Secret{Name: "data key", Key: meth.dmKey(fvek)})...)
}

// protectorKey stretches initial with the salt of the protector of kind.
func protectorKey(t *testing.T, hdr *Header, kind uint16, initial *[32]byte) []byte {
	for _, p := range hdr.meta.protectors {
		if p.protection == kind {
			k, err := stretch(context.Background(), initial, &p.salt)
			if err != nil {
				t.Fatal(err)
			}
			return k[:]
		}
	}
	t.Fatalf("no protector of kind %#x", kind)
	return nil
}

// TestNoKeysInMemoryAfterClose unlocks Windows' samples through the
// format layer, with a password, a recovery password or a startup key
// file, reads through the device (AES-XTS, AES-CBC, AES-CBC with the
// Elephant diffuser), closes it, and then searches the process's memory
// for the secret, the keys derived from it, the VMK, the FVEK and the
// data key (SECURITY.md, "Keys in memory", says what Go does not let a
// program guarantee).
func TestNoKeysInMemoryAfterClose(t *testing.T) {
	keymem.Skip(t)
	if !keymem.Isolated(t) {
		return
	}
	for _, c := range []struct{ file, secret string }{
		{"bitlk-aes-xts-128.img", "password"},
		{"bitlk-aes-xts-128.img", "recovery"},
		{"bitlk-aes-cbc-128.img", "password"},
		{"bitlk-aes-cbc-elephant-128.img", "password"},
		{"bitlk-aes-xts-128-startup-key.img", "startup-key"},
	} {
		t.Run(c.file+"/"+c.secret, func(t *testing.T) {
			var s sample
			for _, x := range samples {
				if x.file == c.file {
					s = x
				}
			}
			path := samplePath(t, c.file)
			fps := keymem.Fingerprints(t, "TestKeyFingerprintHelper", nil, c.file, c.secret)
			sec := &disk.Secret{}
			switch c.secret {
			case "password":
				sec.Passphrase = []byte(s.password)
			case "recovery":
				sec.Passphrase = []byte(s.recovery)
			case "startup-key":
				b, err := os.ReadFile(filepath.Join(sampleDir(t), s.bek))
				if err != nil {
					t.Fatal(err)
				}
				sec.KeyFiles = [][]byte{b}
			}
			dev := disktest.Attach(t, Format{}, path, nil, sec, false)
			dev.ReadWrite(t)
			fps.CheckClose(t, []string{"data key"}, func() { dev.Close(t) })
		})
	}
}
