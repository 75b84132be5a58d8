package luks

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// TestEncryptLengths: Encrypt takes an input of any length up to the
// segment, in chunks or not, pads a last partial sector with zeros, counts
// what it read, and refuses an input longer than the segment; Decrypt gives
// back what was encrypted.
func TestEncryptLengths(t *testing.T) {
	const ss = 4096
	// Three stream chunks, the last one short; and a segment that ends at
	// a chunk's end.
	for _, seg := range []int64{2<<20 + 2*ss, 2 << 20} {
		encryptLengths(t, seg)
	}
}

func encryptLengths(t *testing.T, seg int64) {
	const ss = 4096
	dir := t.TempDir()
	size := int64(DefaultDataOffset) + seg
	f, h, key := fastFormat(t, filepath.Join(dir, "img"), size, []byte("lengths"), FormatOptions{KeySize: 64, SectorSize: ss})
	for _, n := range []int64{0, 100, ss, 1 << 20, seg - 1, seg} {
		plain := randBytes(t, int(n))
		m, err := h.Encrypt(context.Background(), key, bytes.NewReader(plain), f, size, nil)
		if err != nil || m != n {
			t.Fatalf("Encrypt of %d bytes: %d, %v", n, m, err)
		}
		var out bytes.Buffer
		if got, err := h.Decrypt(context.Background(), key, f, size, &out, nil); err != nil || got != seg {
			t.Fatalf("Decrypt: %d, %v", got, err)
		}
		padded := (n + ss - 1) / ss * ss
		want := append(plain, make([]byte, padded-n)...)
		if !bytes.Equal(out.Bytes()[:padded], want) {
			t.Fatalf("%d bytes: the segment does not hold them, zero-padded to a sector", n)
		}
	}
	_, err := h.Encrypt(context.Background(), key, bytes.NewReader(make([]byte, seg+1)), f, size, nil)
	if err == nil || !strings.Contains(err.Error(), "longer than the") {
		t.Fatalf("Encrypt of more than the segment: %v", err)
	}
}
