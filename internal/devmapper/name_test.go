package devmapper

import (
	"strings"
	"testing"
)

// seqKey returns n bytes 0, 1, 2, ..., whose hex is easy to write by hand.
func seqKey(n int) []byte {
	k := make([]byte, n)
	for i := range k {
		k[i] = byte(i)
	}
	return k
}

const (
	hex32 = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
	hex64 = hex32 + "202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f"
)

func TestCheckName(t *testing.T) {
	for _, good := range []string{"a", "vol0", "xtsctl_home-1.2", "A#+-.:=@_z", strings.Repeat("n", maxNameLen)} {
		if err := CheckName(good); err != nil {
			t.Errorf("CheckName(%q): %v", good, err)
		}
	}
	for _, bad := range []string{"", ".", "..", "control", "a/b", "../x", "a b", "a\x00b", "ü", "a\n",
		strings.Repeat("n", maxNameLen+1)} {
		if err := CheckName(bad); err == nil {
			t.Errorf("CheckName(%q) accepted it", bad)
		}
	}
	// The UUID of the longest name fits DM_UUID_LEN with its NUL.
	if n := len(uuidPrefix) + maxNameLen; n != 128 {
		t.Errorf("longest UUID is %d bytes, want 128", n)
	}
}
