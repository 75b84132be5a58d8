package xts

import (
	"bytes"
	"crypto/aes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/xtsctl/xtsctl/aesni"
	"github.com/xtsctl/xtsctl/internal/impl"
	xcxts "golang.org/x/crypto/xts"
)

// forEachImpl runs f once per kernel this machine can run, forced through
// internal/impl, so every test below covers every implementation.
func forEachImpl(t *testing.T, f func(t *testing.T)) {
	for _, name := range impl.List(aesni.ImplPackage) {
		if !impl.Available(aesni.ImplPackage, name) {
			continue
		}
		t.Run(name, func(t *testing.T) {
			if err := impl.Select(aesni.ImplPackage, name); err != nil {
				t.Fatal(err)
			}
			defer impl.Reset(aesni.ImplPackage)
			f(t)
		})
	}
}

func newCipher(t testing.TB, key []byte) *Cipher {
	t.Helper()
	c, err := NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// vectorCipher expands a known-answer vector's key. IEEE 1619's own Vector 1
// has an all-zero key, which NewCipher refuses; the engine underneath takes
// any key, so that vector still checks every kernel.
func vectorCipher(t *testing.T, key []byte) *Cipher {
	t.Helper()
	c, err := NewCipher(key)
	if errors.Is(err, ErrEqualKeyHalves) {
		c = new(Cipher)
		err = c.k.Init(key)
	}
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestVectors(t *testing.T) {
	vs := allVectors(t)
	forEachImpl(t, func(t *testing.T) {
		for _, v := range vs {
			c := vectorCipher(t, v.key)
			got := make([]byte, len(v.pt))
			c.EncryptTweak(got, v.pt, &v.tweak)
			if !bytes.Equal(got, v.ct) {
				t.Fatalf("%s: encrypt = %x, want %x", v.name, got, v.ct)
			}
			c.DecryptTweak(got, v.ct, &v.tweak)
			if !bytes.Equal(got, v.pt) {
				t.Fatalf("%s: decrypt = %x, want %x", v.name, got, v.pt)
			}
			// In place.
			copy(got, v.pt)
			c.EncryptTweak(got, got, &v.tweak)
			if !bytes.Equal(got, v.ct) {
				t.Fatalf("%s: in-place encrypt = %x, want %x", v.name, got, v.ct)
			}
			c.DecryptTweak(got, got, &v.tweak)
			if !bytes.Equal(got, v.pt) {
				t.Fatalf("%s: in-place decrypt = %x, want %x", v.name, got, v.pt)
			}
			if v.seqnoValid {
				c.Encrypt(got, v.pt, v.seqno)
				if !bytes.Equal(got, v.ct) {
					t.Fatalf("%s: Encrypt(sector %d) = %x, want %x", v.name, v.seqno, got, v.ct)
				}
				c.Decrypt(got, v.ct, v.seqno)
				if !bytes.Equal(got, v.pt) {
					t.Fatalf("%s: Decrypt(sector %d) = %x, want %x", v.name, v.seqno, got, v.pt)
				}
			}
		}
	})
}

// TestIEEEVectorsPresent guards against a parser that silently drops the
// standard's own vectors (including the ciphertext-stealing ones, 15..19).
func TestIEEEVectorsPresent(t *testing.T) {
	var n int
	for _, v := range loadCryptoPP(t) {
		if strings.HasPrefix(v.name, "Vector ") {
			n++
		}
	}
	if n != 19 {
		t.Fatalf("found %d IEEE 1619 Annex B vectors, want 19", n)
	}
}

func randomKey(r *rand.Rand, n int) []byte {
	k := make([]byte, n)
	for i := range k {
		k[i] = byte(r.Uint32())
	}
	return k
}

func TestRoundTripEveryLength(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	forEachImpl(t, func(t *testing.T) {
		for _, keyLen := range []int{32, 64} {
			c := newCipher(t, randomKey(r, keyLen))
			for n := 16; n <= 1024; n++ {
				pt := randomKey(r, n)
				sector := r.Uint64()
				ct := make([]byte, n)
				c.Encrypt(ct, pt, sector)
				if bytes.Equal(ct, pt) {
					t.Fatalf("key %d, len %d: ciphertext equals plaintext", keyLen, n)
				}
				back := make([]byte, n)
				c.Decrypt(back, ct, sector)
				if !bytes.Equal(back, pt) {
					t.Fatalf("key %d, len %d: round trip failed", keyLen, n)
				}
			}
		}
	})
}

func TestSectorEqualsPlain64Tweak(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	c := newCipher(t, randomKey(r, 64))
	for _, sector := range []uint64{0, 1, 2, 1<<32 - 1, 1 << 32, 1<<63 + 5, ^uint64(0)} {
		pt := randomKey(r, 512+7)
		var tweak [16]byte
		binary.LittleEndian.PutUint64(tweak[:], sector)
		a := make([]byte, len(pt))
		b := make([]byte, len(pt))
		c.Encrypt(a, pt, sector)
		c.EncryptTweak(b, pt, &tweak)
		if !bytes.Equal(a, b) {
			t.Fatalf("sector %d: Encrypt differs from EncryptTweak with the plain64 tweak", sector)
		}
	}
}

// TestAgainstXCrypto compares with golang.org/x/crypto/xts, an independent
// implementation, on multiples of 16 (it has no ciphertext stealing).
func TestAgainstXCrypto(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	forEachImpl(t, func(t *testing.T) {
		for _, keyLen := range []int{32, 64} {
			key := randomKey(r, keyLen)
			ours := newCipher(t, key)
			theirs, err := xcxts.NewCipher(aes.NewCipher, key)
			if err != nil {
				t.Fatal(err)
			}
			for blocks := 1; blocks <= 64; blocks++ {
				for _, sector := range []uint64{0, 1, 1<<32 - 1, ^uint64(0), r.Uint64()} {
					pt := randomKey(r, 16*blocks)
					want := make([]byte, len(pt))
					got := make([]byte, len(pt))
					theirs.Encrypt(want, pt, sector)
					ours.Encrypt(got, pt, sector)
					if !bytes.Equal(got, want) {
						t.Fatalf("key %d, %d blocks, sector %d: differs from x/crypto/xts", keyLen, blocks, sector)
					}
					ours.Decrypt(got, want, sector)
					if !bytes.Equal(got, pt) {
						t.Fatalf("key %d, %d blocks, sector %d: decrypt differs", keyLen, blocks, sector)
					}
				}
			}
			for _, n := range []int{512, 4096, 65536} {
				pt := randomKey(r, n)
				want := make([]byte, n)
				got := make([]byte, n)
				theirs.Encrypt(want, pt, 77)
				ours.Encrypt(got, pt, 77)
				if !bytes.Equal(got, want) {
					t.Fatalf("key %d, %d bytes: differs from x/crypto/xts", keyLen, n)
				}
			}
		}
	})
}

func TestEncryptSectorsEqualsLoop(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	forEachImpl(t, func(t *testing.T) {
		for _, keyLen := range []int{32, 64} {
			c := newCipher(t, randomKey(r, keyLen))
			for _, unit := range []int{16, 17, 512, 1024, 4096, 4100} {
				for _, step := range []uint64{1, 8} {
					count := 1 + r.IntN(9)
					pt := randomKey(r, unit*count)
					first := r.Uint64()
					if unit == 512 {
						first = ^uint64(0) - 2 // the tweak counter wraps inside the batch
					}
					want := make([]byte, len(pt))
					for i := 0; i < count; i++ {
						c.Encrypt(want[i*unit:], pt[i*unit:(i+1)*unit], first+uint64(i)*step)
					}
					got := make([]byte, len(pt))
					c.EncryptSectors(got, pt, unit, first, step)
					if !bytes.Equal(got, want) {
						t.Fatalf("unit %d, step %d: batch differs from one call per sector", unit, step)
					}
					c.DecryptSectors(got, got, unit, first, step)
					if !bytes.Equal(got, pt) {
						t.Fatalf("unit %d, step %d: in-place batch decrypt failed", unit, step)
					}
				}
			}
		}
	})
}

func TestKeyLengths(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for n := 0; n <= 80; n++ {
		_, err := NewCipher(randomKey(r, n))
		if ok := n == 32 || n == 64; ok != (err == nil) {
			t.Errorf("NewCipher(%d bytes): err = %v", n, err)
		}
		if err != nil && !strings.Contains(err.Error(), "invalid key length") {
			t.Errorf("NewCipher(%d bytes): err = %v, want a key length error", n, err)
		}
	}
}

// TestEqualKeyHalves checks that NewCipher refuses key1 == key2 (IEEE
// 1619-2018, FIPS 140) and nothing else: keys whose halves differ in a single
// bit, at either end of either half, are accepted and encrypt like x/crypto.
func TestEqualKeyHalves(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for _, n := range []int{32, 64} {
		half := randomKey(r, n/2)
		for name, key := range map[string][]byte{
			"all-zero":    make([]byte, n),
			"all-ones":    bytes.Repeat([]byte{0xff}, n),
			"random half": append(append([]byte(nil), half...), half...),
		} {
			c, err := NewCipher(key)
			if !errors.Is(err, ErrEqualKeyHalves) || c != nil {
				t.Errorf("%d bytes, %s: NewCipher = %v, %v; want ErrEqualKeyHalves", n, name, c, err)
			}
		}
		for _, flip := range []struct {
			i   int
			bit byte
		}{{0, 0x01}, {n/2 - 1, 0x80}, {n / 2, 0x01}, {n - 1, 0x80}} {
			key := append(append([]byte(nil), half...), half...)
			key[flip.i] ^= flip.bit
			ours, err := NewCipher(key)
			if err != nil {
				t.Errorf("%d bytes, halves differing in byte %d: %v", n, flip.i, err)
				continue
			}
			theirs, err := xcxts.NewCipher(aes.NewCipher, key)
			if err != nil {
				t.Fatal(err)
			}
			pt := randomKey(r, 512)
			got, want := make([]byte, len(pt)), make([]byte, len(pt))
			ours.Encrypt(got, pt, 9)
			theirs.Encrypt(want, pt, 9)
			if !bytes.Equal(got, want) {
				t.Errorf("%d bytes, halves differing in byte %d: differs from x/crypto/xts", n, flip.i)
			}
		}
	}
}

func expectPanic(t *testing.T, want string, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		r := recover()
		if r == nil {
			t.Fatalf("no panic, want %q", want)
		}
		if s, _ := r.(string); !strings.Contains(s, want) {
			t.Fatalf("panic %v, want %q", r, want)
		}
	}()
	f()
}

func TestMisusePanics(t *testing.T) {
	c := newCipher(t, randomKey(rand.New(rand.NewPCG(9, 9)), 64))
	buf := make([]byte, 64)
	var tw [16]byte
	expectPanic(t, "shorter than 16", func() { c.Encrypt(buf[:15], buf[16:31], 0) })
	expectPanic(t, "output smaller", func() { c.Encrypt(buf[:31], buf[32:64], 0) })
	expectPanic(t, "overlap", func() { c.Encrypt(buf[1:33], buf[:32], 0) })
	expectPanic(t, "overlap", func() { c.DecryptTweak(buf[:32], buf[8:40], &tw) })
	expectPanic(t, "whole number of sectors", func() { c.EncryptSectors(buf, buf[:48], 32, 0, 1) })
	expectPanic(t, "overlap", func() { c.EncryptSectors(buf[16:48], buf[:32], 16, 0, 1) })
	// Exactly in place is fine.
	c.Encrypt(buf[:33], buf[:33], 0)
}

func TestZeroAllocs(t *testing.T) {
	key := randomKey(rand.New(rand.NewPCG(10, 10)), 64)
	buf := make([]byte, 4096)
	var tw [16]byte
	forEachImpl(t, func(t *testing.T) {
		// Made with the implementation selected, as a process has it: the
		// portable path's crypto/aes ciphers are made by NewCipher where
		// it is the automatic choice.
		c := newCipher(t, key)
		for _, n := range []int{16, 31, 512, 4096} {
			if a := testing.AllocsPerRun(20, func() {
				c.Encrypt(buf[:n], buf[:n], 1)
				c.Decrypt(buf[:n], buf[:n], 1)
				c.EncryptTweak(buf[:n], buf[:n], &tw)
				c.DecryptTweak(buf[:n], buf[:n], &tw)
			}); a != 0 {
				t.Errorf("%d bytes: %v allocations per call", n, a)
			}
		}
		if a := testing.AllocsPerRun(20, func() { c.EncryptSectors(buf, buf, 512, 0, 1) }); a != 0 {
			t.Errorf("EncryptSectors: %v allocations", a)
		}
	})
}
