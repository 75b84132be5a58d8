package luksimage

import (
	"context"
	"crypto/aes"
	"crypto/pbkdf2"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"fmt"
	"hash"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/crypto/argon2"
	"golang.org/x/crypto/xts"

	"github.com/xtsctl/xtsctl/disk"
	"github.com/xtsctl/xtsctl/disk/disktest"
	"github.com/xtsctl/xtsctl/internal/keymem"
	"github.com/xtsctl/xtsctl/luks"
)

// The memory test's images are cryptsetup's, and so are the keys its
// helper process looks for: the volume key from luksDump, the keyslot key
// derived with crypto/pbkdf2 or x/crypto's Argon2 from the header's
// parameters, the keyslot's split key decrypted with x/crypto's XTS. The
// test process reads the passphrase only as the command line does, from
// the key file, and never holds a key it does not wipe.

// TestKeyFingerprintHelper is the helper process (it does nothing in a
// normal run). Arguments: image|passphrase file|keyslot, one or more; the
// volume key comes from the first. An image "-" stands for none: the
// passphrase alone.
func TestKeyFingerprintHelper(t *testing.T) {
	h := keymem.Helper(t)
	var secrets []keymem.Secret
	for i, arg := range h.Args {
		f := strings.Split(arg, "|")
		if len(f) != 3 {
			t.Fatalf("argument %q: want image|passphrase file|keyslot", arg)
		}
		img, passFile := f[0], f[1]
		pass, err := os.ReadFile(passFile)
		if err != nil {
			t.Fatal(err)
		}
		if img == "-" {
			name := "passphrase " + filepath.Base(passFile)
			secrets = append(secrets, keymem.Secret{Name: name, Key: pass})
			secrets = append(secrets, keymem.HMACPads(name, pass)...)
			continue
		}
		slot, err := strconv.Atoi(f[2])
		if err != nil {
			t.Fatal(err)
		}
		name := func(what string) string { return fmt.Sprintf("%s (keyslot %d, %s)", what, slot, filepath.Base(img)) }
		if i == 0 {
			vkFile := filepath.Join(t.TempDir(), "vk")
			if out, err := exec.Command("cryptsetup", "luksDump", "--batch-mode", "--dump-volume-key", "--key-file", passFile, "--volume-key-file", vkFile, img).CombinedOutput(); err != nil {
				t.Fatalf("cryptsetup luksDump: %v\n%s", err, out)
			}
			vk, err := os.ReadFile(vkFile)
			if err != nil {
				t.Fatal(err)
			}
			secrets = append(secrets, keymem.Secret{Name: "master key", Key: vk})
			// The digest is PBKDF2 keyed with the master key.
			secrets = append(secrets, keymem.HMACPads("master key", vk)...)
		}
		li, closeImage := openImage(t, img, disk.Read)
		k := li.Header.Keyslot(slot)
		if k == nil {
			t.Fatalf("%s has no keyslot %d", img, slot)
		}
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
		closeImage()
		c, err := xts.NewCipher(aes.NewCipher, dk)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < len(split); i += 512 {
			c.Decrypt(split[i:i+512], split[i:i+512], uint64(i/512))
		}
		secrets = append(secrets,
			keymem.Secret{Name: name("passphrase"), Key: pass},
			keymem.Secret{Name: name("keyslot key"), Key: dk},
			keymem.Secret{Name: name("split key"), Key: split[:k.KeySize*4000], Step: k.KeySize})
		secrets = append(secrets, keymem.HMACPads(name("passphrase"), pass)...)
	}
	h.Print(secrets...)
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
			img, passFile := emptyImage(t, filepath.Join(dir, "img")), randomPassFile(t, filepath.Join(dir, "pass"))
			args := []string{"luksFormat", "--batch-mode", "--type", c.name, "--key-file", passFile}
			if c.name == "luks1" {
				args = append(args, "--hash", c.hash, "--pbkdf-force-iterations", "1000")
			} else {
				args = append(args, "--pbkdf", "argon2id", "--pbkdf-memory", "32768", "--pbkdf-force-iterations", "4", "--pbkdf-parallel", "1")
			}
			if out, err := exec.Command("cryptsetup", append(args, img)...).CombinedOutput(); err != nil {
				t.Fatalf("cryptsetup luksFormat: %v\n%s", err, out)
			}
			fps := keymem.Fingerprints(t, "TestKeyFingerprintHelper", nil, img+"|"+passFile+"|0")
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

// TestNoKeysInMemoryAfterKeyslotChanges adds a keyslot to a LUKS2 image
// that cryptsetup made and then changes that keyslot's passphrase, each
// through ChangeKeyslots with the passphrases read from key files as the
// command line reads them, and searches the process's memory for every
// passphrase, the keyslot keys and split keys of the keyslots (the one
// the change replaced too, from a copy of the image taken before it) and
// the master key; then again after it has opened the image with the new
// passphrase, read and written, and closed it.
func TestNoKeysInMemoryAfterKeyslotChanges(t *testing.T) {
	keymem.Skip(t)
	if _, err := exec.LookPath("cryptsetup"); err != nil {
		t.Skip("cryptsetup is not installed (scripts/install-deps.sh)")
	}
	if !keymem.Isolated(t) {
		return
	}
	dir := t.TempDir()
	img, added := filepath.Join(dir, "img"), filepath.Join(dir, "img.added")
	passFiles := make([]string, 3)
	for i := range passFiles {
		passFiles[i] = randomPassFile(t, filepath.Join(dir, fmt.Sprintf("pass%d", i)))
	}
	emptyImage(t, img)
	if out, err := exec.Command("cryptsetup", "luksFormat", "--batch-mode", "--type", "luks2", "--key-file", passFiles[0],
		"--pbkdf", "argon2id", "--pbkdf-memory", "32768", "--pbkdf-force-iterations", "4", "--pbkdf-parallel", "1", img).CombinedOutput(); err != nil {
		t.Fatalf("cryptsetup luksFormat: %v\n%s", err, out)
	}
	// What can be known before the changes: the master key and keyslot 0,
	// and every passphrase, so that a passphrase the changes leave
	// unwiped is found before later work reuses its memory.
	before := keymem.Fingerprints(t, "TestKeyFingerprintHelper", nil,
		img+"|"+passFiles[0]+"|0", "-|"+passFiles[1]+"|-", "-|"+passFiles[2]+"|-")
	readPass := func(i int) func() ([]byte, error) {
		return func() ([]byte, error) { return os.ReadFile(passFiles[i]) }
	}
	newPass := func(i int) func() ([]byte, *luks.Argon2Params, error) {
		return func() ([]byte, *luks.Argon2Params, error) {
			b, err := os.ReadFile(passFiles[i])
			return b, cheap, err
		}
	}
	change := func(c KeyslotChange) {
		t.Helper()
		li, closeImage := openImage(t, img, disk.WriteHeader)
		defer closeImage()
		if _, err := li.ChangeKeyslots(context.Background(), c); err != nil {
			t.Fatal(err)
		}
	}
	one := 1
	change(KeyslotChange{Op: AddKeyslot, Keyslot: &one, Passphrase: readPass(0), New: newPass(1)})
	if out, err := exec.Command("cp", img, added).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	change(KeyslotChange{Op: ChangeKeyslot, Keyslot: &one, Passphrase: readPass(1), New: newPass(2)})

	runtime.GC()
	found, _ := before.Scan(t)
	keymem.Report(t, "after the keyslot changes", found)
	fps := keymem.Fingerprints(t, "TestKeyFingerprintHelper", nil,
		img+"|"+passFiles[0]+"|0", added+"|"+passFiles[1]+"|1", img+"|"+passFiles[2]+"|1")

	pass, err := os.ReadFile(passFiles[2])
	if err != nil {
		t.Fatal(err)
	}
	dev := disktest.Attach(t, Format, img, nil, &disk.Secret{KeyFiles: [][]byte{pass}}, false)
	dev.ReadWrite(t)
	fps.CheckClose(t, []string{"master key"}, func() { dev.Close(t) })
}

// randomPassFile writes 32 random bytes to path with another program, so
// that this one holds the passphrase only where it reads it, and returns
// path.
func randomPassFile(t *testing.T, path string) string {
	t.Helper()
	if out, err := exec.Command("sh", "-c", "head -c 32 /dev/urandom >"+path).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return path
}

// emptyImage creates a 17 MiB file of zeros at path for luksFormat, and
// returns path.
func emptyImage(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(17 << 20); err != nil {
		t.Fatal(err)
	}
	return path
}
