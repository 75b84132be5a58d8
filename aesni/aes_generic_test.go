package aesni

import (
	"bytes"
	"encoding/hex"
	"testing"
)

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestExpandEncGenericFIPS197 checks the last round key against the key
// expansion examples of FIPS-197 appendix A.1 (AES-128) and A.3 (AES-256).
func TestExpandEncGenericFIPS197(t *testing.T) {
	for _, tc := range []struct{ key, first, last string }{
		{"2b7e151628aed2a6abf7158809cf4f3c", "2b7e151628aed2a6abf7158809cf4f3c", "d014f9a8c9ee2589e13f0cc8b6630ca6"},
		{"603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4", "603deb1015ca71be2b73aef0857d7781", "fe4890d1e6188d0b046df344706c631e"},
	} {
		key := mustHex(t, tc.key)
		rounds := 6 + len(key)/4
		var s schedule
		expandEncGeneric(&s, key)
		if got := s[:16]; !bytes.Equal(got, mustHex(t, tc.first)) {
			t.Errorf("key %s: round key 0 = %x", tc.key, got)
		}
		if got := s[16*rounds : 16*rounds+16]; !bytes.Equal(got, mustHex(t, tc.last)) {
			t.Errorf("key %s: round key %d = %x, want %s", tc.key, rounds, got, tc.last)
		}
	}
}

// TestInvMixColumn checks InvMixColumns against FIPS-197's MixColumns example
// state (section 5.1.3 worked through in appendix B, round 1).
func TestInvMixColumn(t *testing.T) {
	mixed := mustHex(t, "046681e5e0cb199a48f8d37a2806264c") // after MixColumns, round 1
	shifted := mustHex(t, "d4bf5d30e0b452aeb84111f11e2798e5")
	for col := 0; col < 16; col += 4 {
		invMixColumn(mixed[col : col+4])
	}
	if !bytes.Equal(mixed, shifted) {
		t.Fatalf("InvMixColumns = %x, want %x", mixed, shifted)
	}
}

func TestMulX(t *testing.T) {
	// x^127 * x = x^7 + x^2 + x + 1; x^63 * x = x^64 crosses the word boundary.
	var top, mid [16]byte
	top[15] = 0x80
	mid[7] = 0x80
	mulX(&top)
	mulX(&mid)
	if want := ([16]byte{0: 0x87}); top != want {
		t.Errorf("x^127*x = %x, want %x", top, want)
	}
	if want := ([16]byte{8: 1}); mid != want {
		t.Errorf("x^63*x = %x, want %x", mid, want)
	}
}
