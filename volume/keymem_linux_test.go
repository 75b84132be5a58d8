package volume

import (
	"context"
	"encoding/hex"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/xtsctl/xtsctl/internal/keymem"
	"golang.org/x/crypto/argon2"
	xblake2b "golang.org/x/crypto/blake2b"
	"golang.org/x/crypto/chacha20"
	"golang.org/x/crypto/chacha20poly1305"
)

// The memory test's helper process (internal/keymem) gets the master key
// on stdin and derives the other keys with x/crypto, not with this
// package's code, so the test process never holds a key it does not wipe
// itself (and the open volume's tag key, which the scan must find, checks
// the derivation on the way). Its arguments: the digest's nonce, then
// each slot's salt:nonce.

// TestKeyFingerprintHelper is the helper process (it does nothing in a normal run).
func TestKeyFingerprintHelper(t *testing.T) {
	h := keymem.Helper(t)
	master := h.ReadStdin()
	derive := func(size int, purpose string) []byte {
		b, err := xblake2b.New(size, master)
		if err != nil {
			t.Fatal(err)
		}
		b.Write([]byte(purpose))
		return b.Sum(nil)
	}
	// XChaCha20-Poly1305 seals with HChaCha20(key, nonce[:16]): that
	// per-message subkey opens the sealed value as well as the key does.
	subkey := func(key []byte, nonceHex string) []byte {
		nonce, err := hex.DecodeString(nonceHex)
		if err != nil {
			t.Fatal(err)
		}
		k, err := chacha20.HChaCha20(key, nonce[:16])
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	digestKey := derive(chacha20poly1305.KeySize, purposeDigest)
	secrets := []keymem.Secret{
		{Name: "master key", Key: master},
		{Name: "tag key", Key: derive(xblake2b.Size, purposeTags)},
		{Name: "header MAC key", Key: derive(64, purposeMAC)},
		{Name: "state record key", Key: derive(xblake2b.Size, purposeStateRecords)},
		{Name: "bitmap key", Key: derive(xblake2b.Size, purposeBitmap)},
		{Name: "digest key", Key: digestKey},
		{Name: "digest subkey", Key: subkey(digestKey, h.Args[0])},
	}
	for i, s := range h.Args[1:] {
		saltHex, nonceHex, _ := strings.Cut(s, ":")
		salt, err := hex.DecodeString(saltHex)
		if err != nil {
			t.Fatal(err)
		}
		wk := argon2.IDKey(testPass, salt, testKDF.Time, testKDF.MemoryKiB, testKDF.Threads, chacha20poly1305.KeySize)
		secrets = append(secrets,
			keymem.Secret{Name: fmt.Sprintf("wrapping key of slot %d", i), Key: wk},
			keymem.Secret{Name: fmt.Sprintf("subkey of slot %d", i), Key: subkey(wk, nonceHex)})
	}
	h.Print(secrets...)
}

// TestNoKeysInMemoryAfterClose goes through a volume's whole life in this
// process (create, unlock, tagged writes and reads, digest check, a second
// passphrase, close), then searches the process's memory for any 16 bytes of
// the master key, the keys derived from it and the slots' wrapping keys.
// After Close there must be none (SECURITY.md, "Keys in memory", says what
// Go does not let a program guarantee; the test runs with those limits).
func TestNoKeysInMemoryAfterClose(t *testing.T) {
	keymem.Skip(t)
	plain := randomData(77, 64<<10)
	dev, _ := newTestVolume(t, plain, 4096, 32, 64)
	v := mustOpen(t, dev, false)
	if err := v.WriteSectors(randomData(78, 3*4096), 2); err != nil {
		t.Fatal(err)
	}
	if err := v.ReadSectors(make([]byte, 4*4096), 1); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(context.Background(), nil, nil); err != nil {
		t.Fatal(err)
	}
	master := v.MasterKey()
	// A collection shrinks the test goroutine's shallow stack, so that
	// the key handling below starts on a small one, as on a busy machine
	// (a stack that then grows while holding a key leaves a copy behind).
	runtime.GC()
	runtime.GC()
	if _, err := AddSlot(dev, v.Headers(), master, testPass, testKDF, -1); err != nil {
		t.Fatal(err)
	}
	hs, err := ReadHeaders(dev, dev.size())
	if err != nil {
		t.Fatal(err)
	}
	var slots []string
	for _, i := range hs.Header.ActiveSlots() {
		s := &hs.Header.Slots[i]
		slots = append(slots, hex.EncodeToString(s.Salt[:])+":"+hex.EncodeToString(s.Nonce[:]))
	}
	if len(slots) != 2 || hs.Header.Flags&FlagDigest == 0 {
		t.Fatalf("%d active slots, flags %#x: want 2 slots and a digest", len(slots), hs.Header.Flags)
	}
	digestNonce := hex.EncodeToString(hs.Header.SealedDigest[:chacha20poly1305.NonceSizeX])
	// The second slot must unlock: it has been through newSlot.
	runtime.GC() // a small stack again
	runtime.GC()
	if key, _, err := hs.Unlock(testPass); err != nil {
		t.Fatal(err)
	} else {
		clear(key)
	}

	fps := keymem.Fingerprints(t, "TestKeyFingerprintHelper", master, append([]string{digestNonce}, slots...)...)
	clear(master)
	fps.CheckClose(t, []string{"master key", "tag key"}, func() {
		if err := v.Close(); err != nil {
			t.Fatal(err)
		}
	})
}
