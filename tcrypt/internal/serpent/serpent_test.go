package serpent

import (
	"bytes"
	"encoding/hex"
	"testing"
)

// TestVector is the 256-bit vector of the Linux kernel's testmgr
// (serpent_tv_template: key 00..1f, plaintext 00..0f), the byte order
// libgcrypt and VeraCrypt share.
func TestVector(t *testing.T) {
	key := make([]byte, 32)
	for i := range key {
		key[i] = byte(i)
	}
	pt := key[:16]
	want, _ := hex.DecodeString("de269ff833e432b85b2e88d2701ce75c")
	c, err := NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 16)
	c.Encrypt(got, pt)
	if !bytes.Equal(got, want) {
		t.Fatalf("Serpent-256(00..1f, 00..0f) = %x, want %x", got, want)
	}
	c.Decrypt(got, got)
	if !bytes.Equal(got, pt) {
		t.Fatalf("decrypt gives %x", got)
	}
	if _, err := NewCipher(key[:16]); err == nil {
		t.Fatal("a 16-byte key was taken")
	}
}
