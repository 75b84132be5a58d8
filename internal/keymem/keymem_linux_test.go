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
	if got["key"] != 40-Window+1 || got["short"] != 1 {
		t.Errorf("found %v at the key's address, want every window of the key and the short secret", got)
	}
	clear(key)
	if found, _ := fps.Scan(t); len(found) > 0 {
		fps.Report(t, "after clear", found)
	}
}

var heapKey []byte

func uintptrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// TestPreemptSave: a key in the shape of the runtime's saved registers is
// recognised, and not once the shape is broken.
func TestPreemptSave(t *testing.T) {
	around := make([]byte, 16<<10)
	mid := len(around) / 2
	block := around[mid-3*xregSlot:][:xregSize] // the key in X3
	for i := range xregSaved {
		for k := range xregWidth {
			block[i*xregSlot+k] = byte(i + k + 1)
		}
	}
	addr := uintptr(0x10000)
	if !inPreemptSave(around, addr, 16) || !inPreemptSave(around, addr+4, 8) {
		t.Fatal("a register of the block is not recognised")
	}
	block[5*xregSlot+20] = 1
	if inPreemptSave(around, addr, 16) {
		t.Fatal("a block with data past a register's 16 bytes is recognised")
	}
}
