package volume

import (
	"errors"
	"testing"
)

// TestInPlaceFlagsRefused: a volume flagged as being converted in place
// opens nowhere; ReadHeaders says which conversion; both flags at once is
// not a header.
func TestInPlaceFlagsRefused(t *testing.T) {
	plaintext := make([]byte, 64<<10)
	for _, c := range []struct {
		flag       uint32
		encrypting bool
	}{{FlagEncrypting, true}, {FlagDecrypting, false}} {
		dev, _ := buildByHand(t, plaintext, 16, c.flag)
		hs, err := ReadHeaders(dev, dev.size())
		var ie *InPlaceError
		if !errors.As(err, &ie) || ie.Encrypting != c.encrypting || hs == nil || hs.Header.Flags&c.flag == 0 {
			t.Fatalf("flag %#x: ReadHeaders: %v", c.flag, err)
		}
		if _, err := openTest(t, dev, testPass, true); !errors.As(err, &ie) {
			t.Fatalf("flag %#x: a volume being converted opened: %v", c.flag, err)
		}
	}
	h, key, err := NewHeader(64<<10, CreateOptions{KDF: testKDF, Passphrase: testPass})
	if err != nil {
		t.Fatal(err)
	}
	h.Flags |= FlagsInPlace
	h.Authenticate(key)
	if _, err := h.MarshalBinary(); err == nil {
		t.Fatal("a header saying both conversions at once was written")
	}
}
