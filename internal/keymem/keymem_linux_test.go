package keymem

import (
	"crypto/rand"
	"encoding/binary"
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
		Report(t, "after clear", found)
	}
}

var heapKey []byte

func uintptrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// TestPreemptSave: a key in the shape of the runtime's saved registers is
// recognised, and not once the shape is broken.
func TestPreemptSave(t *testing.T) {
	// around, centred on byte k of register i of a block.
	block := func(i, k int) (around, b []byte) {
		around = make([]byte, 16<<10)
		b = around[len(around)/2-i*xregSlot-k:][:xregSize]
		for r := range xregSaved {
			for j := range xregWidth {
				b[r*xregSlot+j] = byte(r + j + 1)
			}
		}
		return around, b
	}
	addr := uintptr(0x10000)
	if around, _ := block(3, 0); !inPreemptSave(around, addr, 16) {
		t.Fatal("a register of the block is not recognised")
	}
	if around, _ := block(15, 4); !inPreemptSave(around, addr, 8) {
		t.Fatal("8 bytes inside a register of the block are not recognised")
	}
	if around, _ := block(3, 4); inPreemptSave(around, addr, 16) {
		t.Fatal("16 bytes across two registers are recognised")
	}
	around, b := block(3, 0)
	b[5*xregSlot+20] = 1
	if inPreemptSave(around, addr, 16) {
		t.Fatal("a block with data past a register's 16 bytes is recognised")
	}
}

// TestArgon2Hash: a secret in the buffer of a BLAKE2b-512 state still at
// its start is recognised, and not past it or in another state.
func TestArgon2Hash(t *testing.T) {
	// around, centred on the secret at addr, with the buffer starting at
	// byte at of it (the state's h before); addr is 8-aligned + at%8.
	state := func(at int, iv [8]uint64) (around []byte, addr uintptr) {
		around = make([]byte, 16<<10)
		h := around[len(around)/2-at-blake2bBlockOff:]
		for i, v := range iv {
			binary.LittleEndian.PutUint64(h[8*i:], v)
		}
		return around, uintptr(0x10000 + at%8)
	}
	if around, addr := state(28, blake2bInit); !inArgon2Hash(around, addr, 16) || !inArgon2Hash(around, addr, 12) {
		t.Fatal("a secret in the state's buffer is not recognised") // H0's passphrase
	}
	if around, addr := state(112, blake2bInit); !inArgon2Hash(around, addr, 16) {
		t.Fatal("a secret at the buffer's end is not recognised")
	}
	if around, addr := state(120, blake2bInit); inArgon2Hash(around, addr, 16) {
		t.Fatal("a secret past the buffer's end is recognised")
	}
	other := blake2bInit
	other[0] ^= 1
	if around, addr := state(0, other); inArgon2Hash(around, addr, 16) {
		t.Fatal("a state that is not BLAKE2b-512's start is recognised")
	}
}

// TestArgon2H0Input: a passphrase's piece in the buffer where x/crypto's
// Argon2 hashed H0's input is recognised by the input's layout, with the
// memory before the piece zeroed (reused), and not when the layout around
// it is off by a byte.
func TestArgon2H0Input(t *testing.T) {
	const passLen, saltLen = 32, 32
	// around, centred on bytes off.. of the passphrase; edit changes the
	// block (136 bytes: the buffer and the count after it) before it is
	// placed.
	layout := func(off int, edit func(b []byte)) []byte {
		around := make([]byte, 16<<10)
		b := make([]byte, blake2bBlockSize+8)
		binary.LittleEndian.PutUint32(b[24:], passLen)
		for i := range passLen {
			b[28+i] = byte(0xa0 + i)
		}
		binary.LittleEndian.PutUint32(b[28+passLen:], saltLen)
		for i := range saltLen {
			b[28+passLen+4+i] = byte(0x50 + i)
		}
		total := 28 + passLen + 4 + saltLen + 8
		binary.LittleEndian.PutUint64(b[blake2bBlockSize:], uint64(total))
		if edit != nil {
			edit(b)
		}
		clear(b[:28+off]) // the object's start reused
		copy(around[len(around)/2-off-28:], b)
		return around
	}
	addr := uintptr(0x10000)
	for _, off := range []int{0, 12, 16} {
		if !inArgon2H0Input(layout(off, nil), addr, off, 16) {
			t.Fatalf("bytes %d..%d of the passphrase in H0's input are not recognised", off, off+16)
		}
	}
	for name, edit := range map[string]func(b []byte){
		"count one more":     func(b []byte) { b[blake2bBlockSize]++ },
		"count one less":     func(b []byte) { b[blake2bBlockSize]-- },
		"salt length longer": func(b []byte) { b[28+passLen]++ },
		"a secret key":       func(b []byte) { b[28+passLen+4+saltLen] = 1 },
		"data after it":      func(b []byte) { b[blake2bBlockSize-1] = 1 },
		"count too big":      func(b []byte) { b[blake2bBlockSize] = blake2bBlockSize + 1 },
	} {
		if inArgon2H0Input(layout(12, edit), addr, 12, 16) {
			t.Errorf("%s: recognised", name)
		}
	}
	if inArgon2H0Input(layout(20, nil), addr, 20, 16) {
		t.Error("a piece that runs past the passphrase into the salt's length is recognised")
	}
}
