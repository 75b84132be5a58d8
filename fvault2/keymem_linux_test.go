package fvault2

import (
	"crypto/pbkdf2"
	"crypto/sha256"
	"testing"

	"github.com/xtsctl/xtsctl/disk"
	"github.com/xtsctl/xtsctl/disk/disktest"
	"github.com/xtsctl/xtsctl/internal/keymem"
)

// The memory test's helper process derives the passphrase key with
// crypto/pbkdf2, unwraps the KEK and the volume key with this package's
// RFC 3394 key unwrap (x/crypto has none), and hashes the tweak key with
// crypto/sha256.

// TestKeyFingerprintHelper is the helper process (it does nothing in a
// normal run). Argument: the image.
func TestKeyFingerprintHelper(t *testing.T) {
	hk := keymem.Helper(t)
	h := openHeader(t, hk.Args[0])
	u := h.v.ctx.Users[0]
	pk, err := pbkdf2.Key(sha256.New, samplePass, u.Salt, int(u.Iterations), 16)
	if err != nil {
		t.Fatal(err)
	}
	kek, err := unwrapKey(pk, u.WrappedKEK)
	if err != nil {
		t.Fatal(err)
	}
	vk, err := h.volumeKey(kek, u)
	if err != nil {
		t.Fatal(err)
	}
	tweak := sha256.Sum256(append(append([]byte(nil), vk...), h.v.lv.family[:]...))
	pass := []byte(samplePass)
	hk.Print(append(keymem.HMACPads("passphrase", pass),
		keymem.Secret{Name: "passphrase", Key: pass},
		keymem.Secret{Name: "passphrase key", Key: pk},
		keymem.Secret{Name: "KEK", Key: kek},
		keymem.Secret{Name: "volume key", Key: vk},
		keymem.Secret{Name: "tweak key", Key: tweak[:16]})...)
}

// TestNoKeysInMemoryAfterClose unlocks the sample through the format
// layer, reads through the device, closes it, and then searches the
// process's memory for the passphrase, the key PBKDF2 derives from it,
// the KEK, the volume key and the tweak key (SECURITY.md, "Keys in
// memory", says what Go does not let a program guarantee).
func TestNoKeysInMemoryAfterClose(t *testing.T) {
	keymem.Skip(t)
	if !keymem.Isolated(t) {
		return
	}
	path := sampleImage(t)
	fps := keymem.Fingerprints(t, "TestKeyFingerprintHelper", nil, path)
	dev := disktest.Attach(t, Format{}, path, nil, &disk.Secret{Passphrase: []byte(samplePass)}, true)
	dev.ReadWrite(t)
	fps.CheckClose(t, []string{"volume key"}, func() { dev.Close(t) })
}
