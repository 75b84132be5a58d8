package keymem

import (
	"crypto/rand"
	"testing"
	"unsafe"
)

// TestHelper prints the fingerprints of what it reads, whole and its
// first 11 bytes as a short secret.
func TestHelper(t *testing.T) {
	h := Helper(t)
	b := h.ReadStdin()
	h.Print(Secret{Name: "key", Key: b}, Secret{Name: "short", Key: b[:11]})
}

// TestScan: the scan finds a key in the heap at every window, and a
// short secret whole; once the key is cleared it finds nothing.
func TestScan(t *testing.T) {
	Skip(t)
	// On the heap: a key on the stack would be copied, and the copy
	// left, when the stack grows.
	key := make([]byte, 40)
	heapKey = key
	rand.Read(key)
	fps := Fingerprints(t, "TestHelper", key, "")
	found, _ := fps.Scan(t)
	got := map[string]int{}
	for _, p := range found {
		if p.Addr == uintptrOf(key)+uintptr(p.Offset) {
			got[p.Secret]++
		}
	}
	if got["key"] != 4 || got["short"] != 1 {
		t.Errorf("found %v at the key's address, want 4 windows of the key and the short secret", got)
	}
	clear(key)
	if found, _ := fps.Scan(t); len(found) > 0 {
		Report(t, "after clear", found)
	}
}

var heapKey []byte

func uintptrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }
