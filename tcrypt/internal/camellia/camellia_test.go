package camellia

import (
	"bytes"
	"encoding/hex"
	"testing"
)

// TestRFC3713 is the 256-bit example of RFC 3713 appendix A.
func TestRFC3713(t *testing.T) {
	key, _ := hex.DecodeString("0123456789abcdeffedcba987654321000112233445566778899aabbccddeeff")
	pt, _ := hex.DecodeString("0123456789abcdeffedcba9876543210")
	want, _ := hex.DecodeString("9acc237dff16d76c20ef7c919e3a7509")
	c, err := NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 16)
	c.Encrypt(got, pt)
	if !bytes.Equal(got, want) {
		t.Fatalf("encrypt = %x, want %x", got, want)
	}
	c.Decrypt(got, got)
	if !bytes.Equal(got, pt) {
		t.Fatalf("decrypt = %x", got)
	}
}
