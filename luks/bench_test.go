package luks

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"golang.org/x/crypto/argon2"
)

// Costs cryptsetup 2.6.1 picked on the benchmark machine for its default
// 2 s target (luksFormat without PBKDF options; docs/LUKS.md): an unlock
// spends its time in these, and the rest is what these benchmarks weigh.
const (
	benchArgonTime    = 4
	benchArgonMemory  = 473823 // KiB
	benchArgonThreads = 2
	benchDigestIter   = 240499  // volume key digest, PBKDF2-SHA256 (cryptsetup: 125 ms)
	benchPBKDF2Iter   = 4433724 // a LUKS1 keyslot, PBKDF2-SHA256, 64-byte key
)

// BenchmarkUnlockParts times each step of opening one keyslot with a
// 512-bit key: the KDF (Argon2id and, for LUKS1, PBKDF2), then what this
// package adds around it: decrypting the 256000-byte keyslot area, the AF
// merge, and the digest check. "overhead" is the last three together.
func BenchmarkUnlockParts(b *testing.B) {
	key := make([]byte, 64)
	dk := make([]byte, 64)
	rand.Read(key)
	rand.Read(dk)
	salt := make([]byte, 32)
	mat := make([]byte, afMaterialSize(64, stripesLUKS))
	if err := afSplit(mat, key, stripesLUKS, hashByName("sha256"), rand.Reader); err != nil {
		b.Fatal(err)
	}
	if err := encryptArea(dk, mat); err != nil {
		b.Fatal(err)
	}
	dval, _ := pbkdf2Key(hashByName("sha256"), key, salt, benchDigestIter, 32)
	d := &Digest{Type: "pbkdf2", Hash: "sha256", Iterations: benchDigestIter, Salt: salt, Value: dval}
	work := make([]byte, len(mat))
	got := make([]byte, 64)

	b.Run("kdf=argon2id-t4-m463MiB-p2", func(b *testing.B) {
		for b.Loop() {
			argon2.IDKey([]byte("passphrase"), salt, benchArgonTime, benchArgonMemory, benchArgonThreads, 64)
		}
	})
	b.Run("kdf=pbkdf2-sha256-"+strconv.Itoa(benchPBKDF2Iter), func(b *testing.B) {
		for b.Loop() {
			pbkdf2Key(hashByName("sha256"), []byte("passphrase"), salt, benchPBKDF2Iter, 64)
		}
	})
	b.Run("area-decrypt", func(b *testing.B) {
		b.SetBytes(int64(len(mat)))
		for b.Loop() {
			copy(work, mat)
			decryptArea(dk, work)
		}
	})
	copy(work, mat)
	decryptArea(dk, work)
	b.Run("af-merge-sha256", func(b *testing.B) {
		for b.Loop() {
			afMerge(got, work, stripesLUKS, hashByName("sha256"))
		}
	})
	b.Run("digest-pbkdf2-sha256-"+strconv.Itoa(benchDigestIter), func(b *testing.B) {
		for b.Loop() {
			if ok, _ := d.matches(key); !ok {
				b.Fatal("digest mismatch")
			}
		}
	})
	b.Run("overhead", func(b *testing.B) {
		for b.Loop() {
			copy(work, mat)
			decryptArea(dk, work)
			afMerge(got, work, stripesLUKS, hashByName("sha256"))
			if ok, _ := d.matches(got); !ok {
				b.Fatal("digest mismatch")
			}
		}
	})
}

// BenchmarkUnlockVsCryptsetup opens the same image, formatted by
// cryptsetup with the Argon2id costs above, with Unlock and with
// cryptsetup open --test-passphrase (a process start included).
func BenchmarkUnlockVsCryptsetup(b *testing.B) {
	needCryptsetup(b)
	dir := b.TempDir()
	pass := []byte("bench")
	pf := writeFile(b, dir, "pass", pass)
	img := filepath.Join(dir, "img")
	sparseFile(b, img, 17<<20)
	cs(b, "luksFormat", "--batch-mode", "--type", "luks2", "--key-file", pf, "--pbkdf", "argon2id",
		"--pbkdf-force-iterations", strconv.Itoa(benchArgonTime), "--pbkdf-memory", strconv.Itoa(benchArgonMemory),
		"--pbkdf-parallel", strconv.Itoa(benchArgonThreads), img)
	f, h := openHeader(b, img)
	b.Run("impl=xtsctl", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := h.Unlock(context.Background(), f, pass, UnlockOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("impl=cryptsetup", func(b *testing.B) {
		for b.Loop() {
			if out, err := exec.Command("cryptsetup", "open", "--test-passphrase", "--key-file", pf, img).CombinedOutput(); err != nil {
				b.Fatalf("%v: %s", err, out)
			}
		}
	})
}

// memImage is an in-memory data device for the data benchmarks.
type memImage []byte

func (m memImage) ReadAt(p []byte, off int64) (int, error)  { return copy(p, m[off:]), nil }
func (m memImage) WriteAt(p []byte, off int64) (int, error) { return copy(m[off:], p), nil }

// BenchmarkData: Encrypt and Decrypt of a 64 MiB data segment in memory,
// on every core (MB/s of plaintext).
func BenchmarkData(b *testing.B) {
	const seg = 64 << 20
	f, h, key := fastFormat(b, filepath.Join(b.TempDir(), "img"), DefaultDataOffset+seg, []byte("bench"), FormatOptions{KeySize: 64, SectorSize: 4096})
	f.Close()
	img := make(memImage, DefaultDataOffset+seg)
	plain := make([]byte, seg)
	b.Run("Encrypt", func(b *testing.B) {
		b.SetBytes(seg)
		for b.Loop() {
			if _, err := h.Encrypt(context.Background(), key, bytes.NewReader(plain), img, int64(len(img)), nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Decrypt", func(b *testing.B) {
		b.SetBytes(seg)
		for b.Loop() {
			if _, err := h.Decrypt(context.Background(), key, img, int64(len(img)), io.Discard, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}
