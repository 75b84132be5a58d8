package blockdev

import (
	"encoding/json"
	"testing"
)

// TestCipherString: the one-line summary names each parameter that is set,
// in the words cryptsetup uses for a plain mapping.
func TestCipherString(t *testing.T) {
	for _, c := range []struct {
		c    Cipher
		want string
	}{
		{Cipher{Name: "aes-xts-plain64", KeyBits: 512, SectorSize: 512}, "aes-xts-plain64, 512-bit key, 512-byte sectors"},
		{Cipher{Name: "aes-xts-plain64", KeyBits: 256, SectorSize: 4096, IVLargeSectors: true, IVOffset: 5, DataOffset: 1024},
			"aes-xts-plain64, 256-bit key, 4096-byte sectors, iv_large_sectors, skip 5, offset 2"},
		{Cipher{Name: "aes-xts-plain64", KeyBits: 512, SectorSize: 4096, DataOffset: 1 << 20, Integrity: "blake2b", TagSize: 32},
			"aes-xts-plain64, 512-bit key, 4096-byte sectors, blake2b 32-byte tags"},
		{Cipher{Name: "aes-xts-plain64", KeyBits: 512, SectorSize: 4096, DataOffset: 1 << 20, Integrity: "none"},
			"aes-xts-plain64, 512-bit key, 4096-byte sectors, no integrity tags"},
	} {
		if got := c.c.String(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.c, got, c.want)
		}
	}
}

// TestCipherJSON: fields round-trip; the text that state files of earlier
// versions hold still reads, as the name.
func TestCipherJSON(t *testing.T) {
	c := Cipher{Name: "aes-xts-plain64", KeyBits: 512, SectorSize: 4096, IVOffset: 3, DataOffset: 8192, Integrity: "blake2b", TagSize: 16}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var back Cipher
	if err := json.Unmarshal(b, &back); err != nil || back != c {
		t.Fatalf("%s read back as %+v (%v)", b, back, err)
	}
	var st State
	old := `{"name":"v","cipher":"aes-xts-plain64, 512-bit key, 4096-byte sectors, blake2b 32-byte tags"}`
	if err := json.Unmarshal([]byte(old), &st); err != nil || st.Cipher.String() != "aes-xts-plain64, 512-bit key, 4096-byte sectors, blake2b 32-byte tags" {
		t.Fatalf("old state: %+v (%v)", st.Cipher, err)
	}
	if err := json.Unmarshal([]byte(`{"cipher":7}`), &st); err == nil {
		t.Error("a number read as a cipher")
	}
}
