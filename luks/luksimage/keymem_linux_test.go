package luksimage

import (
	"crypto/aes"
	"crypto/pbkdf2"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"hash"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"golang.org/x/crypto/argon2"
	"golang.org/x/crypto/xts"

	"github.com/xtsctl/xtsctl/disk"
	"github.com/xtsctl/xtsctl/disk/disktest"
	"github.com/xtsctl/xtsctl/internal/keymem"
)

// The memory test's images are cryptsetup's, and so are the keys its
// helper process looks for: the volume key from luksDump, the keyslot key
// derived with crypto/pbkdf2 or x/crypto's Argon2 from the header's
// parameters, the keyslot's split key decrypted with x/crypto's XTS. The
// test process reads the passphrase only as the command line does, from
// the key file, and never holds a key it does not wipe.

// TestKeyFingerprintHelper is the helper process (it does nothing in a
// normal run). Arguments: the image, the passphrase file.
func TestKeyFingerprintHelper(t *testing.T) {
	h := keymem.Helper(t)
	img, passFile := h.Args[0], h.Args[1]
	pass, err := os.ReadFile(passFile)
	if err != nil {
		t.Fatal(err)
	}
	vkFile := filepath.Join(t.TempDir(), "vk")
	if out, err := exec.Command("cryptsetup", "luksDump", "--batch-mode", "--dump-volume-key", "--key-file", passFile, "--volume-key-file", vkFile, img).CombinedOutput(); err != nil {
		t.Fatalf("cryptsetup luksDump: %v\n%s", err, out)
	}
	vk, err := os.ReadFile(vkFile)
	if err != nil {
		t.Fatal(err)
	}
	li, closeImage := openImage(t, img, disk.Read)
	defer closeImage()
	k := li.Header.Keyslots[0]
	var dk []byte
	switch k.KDF.Type {
	case "pbkdf2":
		dk, err = pbkdf2.Key(hashOf(t, k.KDF.Hash), string(pass), k.KDF.Salt, int(k.KDF.Iterations), k.Area.KeySize)
	case "argon2id":
		dk = argon2.IDKey(pass, k.KDF.Salt, k.KDF.Time, k.KDF.MemoryKiB, uint8(k.KDF.Threads), uint32(k.Area.KeySize))
	default:
		t.Fatalf("keyslot KDF %s", k.KDF.Type)
	}
	if err != nil {
		t.Fatal(err)
	}
	split := make([]byte, (k.KeySize*4000+511)&^511)
	if _, err := li.HeaderFile.ReadAt(split, int64(k.Area.Offset&^511)); err != nil {
		t.Fatal(err)
	}
	c, err := xts.NewCipher(aes.NewCipher, dk)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(split); i += 512 {
		c.Decrypt(split[i:i+512], split[i:i+512], uint64(i/512))
	}
	secrets := []keymem.Secret{
		{Name: "passphrase", Key: pass},
		{Name: "keyslot key", Key: dk},
		{Name: "split key", Key: split[:k.KeySize*4000], Step: k.KeySize},
		{Name: "master key", Key: vk},
	}
	secrets = append(secrets, keymem.HMACPads("passphrase", pass)...)
	// The digest is PBKDF2 keyed with the master key.
	h.Print(append(secrets, keymem.HMACPads("master key", vk)...)...)
}

func hashOf(t *testing.T, name string) func() hash.Hash {
	switch name {
	case "sha1":
		return sha1.New
	case "sha256":
		return sha256.New
	case "sha512":
		return sha512.New
	}
	t.Fatalf("hash %s", name)
	return nil
}

// TestNoKeysInMemoryAfterClose unlocks a LUKS1 and a LUKS2 image that
// cryptsetup made, through the format layer as the command line does
// (the passphrase from a key file), reads and writes through the device,
// closes it, and then searches the process's memory for the passphrase, the keyslot
// key, the keyslot's split key and the master key (SECURITY.md, "Keys in
// memory", says what Go does not let a program guarantee).
func TestNoKeysInMemoryAfterClose(t *testing.T) {
	keymem.Skip(t)
	if _, err := exec.LookPath("cryptsetup"); err != nil {
		t.Skip("cryptsetup is not installed (scripts/install-deps.sh)")
	}
	for _, c := range []struct{ name, hash string }{
		{"luks1", "sha256"}, // PBKDF2 keyslots
		{"luks2", ""},       // Argon2id keyslots
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			img, passFile := filepath.Join(dir, "img"), filepath.Join(dir, "pass")
			// The passphrase is made by another program, so that this one
			// holds it only where the unlock reads it.
			if out, err := exec.Command("sh", "-c", "head -c 32 /dev/urandom >"+passFile).CombinedOutput(); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			f, err := os.Create(img)
			if err != nil {
				t.Fatal(err)
			}
			f.Truncate(17 << 20)
			f.Close()
			args := []string{"luksFormat", "--batch-mode", "--type", c.name, "--key-file", passFile}
			if c.name == "luks1" {
				args = append(args, "--hash", c.hash, "--pbkdf-force-iterations", "1000")
			} else {
				args = append(args, "--pbkdf", "argon2id", "--pbkdf-memory", "32768", "--pbkdf-force-iterations", "4", "--pbkdf-parallel", "1")
			}
			if out, err := exec.Command("cryptsetup", append(args, img)...).CombinedOutput(); err != nil {
				t.Fatalf("cryptsetup luksFormat: %v\n%s", err, out)
			}
			fps := keymem.Fingerprints(t, "TestKeyFingerprintHelper", nil, img, passFile)
			pass, err := os.ReadFile(passFile)
			if err != nil {
				t.Fatal(err)
			}
			dev := disktest.Attach(t, Format, img, nil, &disk.Secret{KeyFiles: [][]byte{pass}}, false)
			dev.ReadWrite(t)
			fps.CheckClose(t, []string{"master key"}, func() { dev.Close(t) })
		})
	}
}
