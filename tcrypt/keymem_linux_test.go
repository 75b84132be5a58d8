package tcrypt

import (
	"crypto/aes"
	"crypto/pbkdf2"
	"crypto/sha512"
	"errors"
	"os"
	"runtime"
	"testing"

	"golang.org/x/crypto/argon2"
	"golang.org/x/crypto/xts"

	"github.com/xtsctl/xtsctl/disk"
	"github.com/xtsctl/xtsctl/disk/disktest"
	"github.com/xtsctl/xtsctl/internal/keymem"
)

// The memory test's helper process derives the header keys of both
// PBKDF2-SHA-512 rows the test tries (TrueCrypt's 1000 iterations,
// VeraCrypt's 500000) with crypto/pbkdf2, and decrypts the header with
// x/crypto's XTS for the master key.

const memTestPass = "aaaaaaaaaaaa" // testdata/README.md

// TestKeyFingerprintHelper is the helper process (it does nothing in a
// normal run). Arguments: the image, the KDF, then the keyfiles.
func TestKeyFingerprintHelper(t *testing.T) {
	h := keymem.Helper(t)
	img, err := os.ReadFile(h.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	var kfs [][]byte
	for _, name := range h.Args[2:] {
		kfs = append(kfs, keyfile(t, name))
	}
	pw, err := kdfPassword([]byte(memTestPass), kfs)
	if err != nil {
		t.Fatal(err)
	}
	secrets := []keymem.Secret{{Name: "passphrase", Key: []byte(memTestPass)}}
	if len(kfs) > 0 {
		secrets = append(append(secrets, keymem.Secret{Name: "keyfile pool", Key: pw}), keymem.HMACPads("keyfile pool", pw)...)
	}
	if h.Args[1] == hashArgon2id {
		t, m := argon2Params(1)
		dk := argon2.IDKey(pw, img[:saltSize], t, m, 1, dkLen)
		h.Print(append(secrets,
			keymem.Secret{Name: "header key of Argon2id", Key: dk[:96]},
			// x/crypto's Argon2 computes a key over 64 bytes with a
			// BLAKE2b object that it does not clear, whose buffer keeps
			// the 64-byte piece before the last: 32 bytes of key.
			keymem.Secret{Name: "header key of Argon2id, bytes 96..127", Key: dk[96:128],
				OutOfReach: "where x/crypto's Argon2 keeps them"},
			keymem.Secret{Name: "header key of Argon2id, bytes 128..191", Key: dk[128:]})...)
		return
	}
	var master []byte
	for _, iter := range []int{1000, 500000} {
		dk, err := pbkdf2.Key(sha512.New, string(pw), img[:saltSize], iter, dkLen)
		if err != nil {
			t.Fatal(err)
		}
		secrets = append(secrets, keymem.Secret{Name: "header key of " + kdf{row: kdfRow{hash: hashSHA512}, iter: iter}.String(), Key: dk})
		c, err := xts.NewCipher(aes.NewCipher, dk[:64])
		if err != nil {
			t.Fatal(err)
		}
		dec := make([]byte, encSize)
		c.Decrypt(dec, img[saltSize:headerSize], 0)
		if _, ok := parseHeader(dec); ok {
			master = dec[keyAreaOff : keyAreaOff+64]
		}
	}
	if master == nil {
		t.Fatal("no header key opens the header")
	}
	h.Print(append(secrets, keymem.Secret{Name: "master key", Key: master})...)
}

// TestNoKeysInMemoryAfterClose unlocks a VeraCrypt volume (passphrase)
// and a TrueCrypt one (passphrase and keyfiles) through the format layer,
// with the SHA-512 rows of both programs tried in parallel, reads and
// writes through the device, closes it, and then searches the process's memory for the
// passphrase, the keyfile pool, the header keys and the master key; and
// after an unlock with VeraCrypt's Argon2id (PIM 1, the wrong KDF for the
// volume: it fails), for the key that Argon2id derived (SECURITY.md,
// "Keys in memory", says what Go does not let a program guarantee).
func TestNoKeysInMemoryAfterClose(t *testing.T) {
	keymem.Skip(t)
	if !keymem.Isolated(t) {
		return
	}
	for _, c := range []struct {
		image, kdf string
		keyfiles   []string
	}{
		{"vc_1-sha512-xts-aes", hashSHA512, nil},
		{"tck_5-sha512-xts-aes", hashSHA512, []string{"keyfile1", "keyfile2"}},
		{"vc_1-sha512-xts-aes", hashArgon2id, nil},
	} {
		t.Run(c.image+"/"+c.kdf, func(t *testing.T) {
			path := testImage(t, c.image)
			fps := keymem.Fingerprints(t, "TestKeyFingerprintHelper", nil, append([]string{path, c.kdf}, c.keyfiles...)...)
			sec := &disk.Secret{Passphrase: []byte(memTestPass)}
			for _, name := range c.keyfiles {
				sec.KeyFiles = append(sec.KeyFiles, keyfile(t, name))
			}
			if c.kdf == hashArgon2id {
				// Nothing opens: what is left must be gone once the unlock
				// has returned.
				img := openImage(t, path, false)
				runtime.GC()
				runtime.GC()
				_, _, err := unlockImage(t, img, disk.Options{OptHash: hashArgon2id, OptPIM: "1"}, sec)
				sec.Wipe()
				if !errors.Is(err, disk.ErrWrongSecret) {
					t.Fatalf("unlock with Argon2id: %v, want the wrong secret", err)
				}
				fps.CheckClose(t, nil, func() {})
				return
			}
			dev := disktest.Attach(t, Format, path, disk.Options{OptHash: c.kdf}, sec, false)
			dev.ReadWrite(t)
			fps.CheckClose(t, []string{"master key"}, func() { dev.Close(t) })
		})
	}
}
