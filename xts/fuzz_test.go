package xts

import (
	"bytes"
	"testing"

	"github.com/xtsctl/xtsctl/aesni"
	"github.com/xtsctl/xtsctl/internal/impl"
)

// FuzzXTS compares every kernel this machine runs with the pure-Go
// reference on random keys, tweaks, lengths and buffer alignments, and
// checks that decryption inverts encryption.
func FuzzXTS(f *testing.F) {
	f.Add(bytes.Repeat([]byte{1}, 32), []byte("0123456789abcdef"), make([]byte, 16), uint8(0))
	f.Add(bytes.Repeat([]byte{2, 3}, 32), []byte("tweak"), make([]byte, 4096+15), uint8(7))
	f.Fuzz(func(t *testing.T, keySeed, tweakBytes, data []byte, align uint8) {
		if len(keySeed) < 32 || len(data) < BlockSize || len(data) > 1<<16 {
			return
		}
		key := keySeed[:32]
		if len(keySeed) >= 64 {
			key = keySeed[:64]
		}
		if bytes.Equal(key[:len(key)/2], key[len(key)/2:]) {
			key = append([]byte(nil), key...) // NewCipher refuses equal halves (TestEqualKeyHalves)
			key[0] ^= 1
		}
		c, err := NewCipher(key)
		if err != nil {
			t.Fatal(err)
		}
		var tweak [16]byte
		copy(tweak[:], tweakBytes)
		off := int(align % 16)

		if err := impl.Select(aesni.ImplPackage, aesni.Generic.String()); err != nil {
			t.Fatal(err)
		}
		want := make([]byte, len(data))
		c.EncryptTweak(want, data, &tweak)
		impl.Reset(aesni.ImplPackage)

		for _, name := range impl.List(aesni.ImplPackage) {
			if !impl.Available(aesni.ImplPackage, name) {
				continue
			}
			if err := impl.Select(aesni.ImplPackage, name); err != nil {
				t.Fatal(err)
			}
			src := make([]byte, len(data)+off)[off:]
			copy(src, data)
			dst := make([]byte, len(data)+2*off)[2*off%16:][:len(data)]
			c.EncryptTweak(dst, src, &tweak)
			if !bytes.Equal(dst, want) {
				impl.Reset(aesni.ImplPackage)
				t.Fatalf("%v: %d bytes, alignment %d: differs from the reference", name, len(data), off)
			}
			c.DecryptTweak(dst, dst, &tweak)
			if !bytes.Equal(dst, data) {
				impl.Reset(aesni.ImplPackage)
				t.Fatalf("%v: %d bytes: in-place decryption does not invert encryption", name, len(data))
			}
		}
		impl.Reset(aesni.ImplPackage)
	})
}
