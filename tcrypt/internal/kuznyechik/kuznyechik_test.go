package kuznyechik

import (
	"bytes"
	"encoding/hex"
	"testing"
)

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRFC7801 is the example of RFC 7801 section 5: the round keys of the
// key schedule (5.4) and one block (5.5).
func TestRFC7801(t *testing.T) {
	key := unhex(t, "8899aabbccddeeff0011223344556677fedcba98765432100123456789abcdef")
	c, err := NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	if got := hex.EncodeToString(c.(*kuz).k[2][:]); got != "db31485315694343228d6aef8cc78c44" {
		t.Errorf("K3 = %s", got)
	}
	if got := hex.EncodeToString(c.(*kuz).k[9][:]); got != "72e9dd7416bcf45b755dbaa88e4a4043" {
		t.Errorf("K10 = %s", got)
	}
	pt := unhex(t, "1122334455667700ffeeddccbbaa9988")
	want := unhex(t, "7f679d90bebc24305a468d42b9d4edcd")
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
