package volume

import (
	"bytes"
	"reflect"
	"testing"
	"unsafe"

	"golang.org/x/crypto/chacha20poly1305"
)

// TestWipeAEAD checks that wipeAEAD still reaches the key inside x/crypto's
// XChaCha20-Poly1305 object: if x/crypto changes its layout, wipeAEAD does
// nothing, and this says so before the memory test does.
func TestWipeAEAD(t *testing.T) {
	key := randomData(90, chacha20poly1305.KeySize)
	a, err := chacha20poly1305.NewX(key)
	if err != nil {
		t.Fatal(err)
	}
	v := reflect.ValueOf(a)
	obj := unsafe.Slice((*byte)(v.UnsafePointer()), v.Elem().Type().Size())
	if !bytes.Contains(obj, key) {
		t.Fatalf("x/crypto's %v does not hold the key where expected", v.Type())
	}
	wipeAEAD(a)
	if !bytes.Equal(obj, make([]byte, len(obj))) {
		t.Fatalf("wipeAEAD left %v's bytes in place: x/crypto's layout changed", v.Type())
	}
	// Something that is not a struct of byte arrays is left alone.
	s := &struct {
		k [4]byte
		p *int
	}{k: [4]byte{1, 2, 3, 4}}
	wipeAEAD(s)
	if s.k != [4]byte{1, 2, 3, 4} {
		t.Fatal("wipeAEAD cleared a struct holding a pointer")
	}
}
