package secret

import (
	"bytes"
	"crypto/aes"
	"crypto/rand"
	"reflect"
	"testing"
	"unsafe"

	"golang.org/x/crypto/chacha20poly1305"
)

// TestWipeObject checks that WipeObject still reaches the keys inside the
// objects of other packages that the formats wipe with it: if one changes
// its layout, WipeObject does nothing, and this says so before the memory
// tests do.
func TestWipeObject(t *testing.T) {
	key := make([]byte, 32)
	rand.Read(key)
	x, err := chacha20poly1305.NewX(key)
	if err != nil {
		t.Fatal(err)
	}
	b, err := aes.NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []any{x, b} {
		v := reflect.ValueOf(o)
		if v.Kind() != reflect.Pointer {
			t.Fatalf("%v is not a pointer: WipeObject cannot reach its key", v.Type())
		}
		mem := unsafe.Slice((*byte)(v.UnsafePointer()), v.Elem().Type().Size())
		if o == any(x) && !bytes.Contains(mem, key) || bytes.Equal(mem, make([]byte, len(mem))) {
			t.Fatalf("%v does not hold the key where expected", v.Type())
		}
		if !WipeObject(o) || !bytes.Equal(mem, make([]byte, len(mem))) {
			t.Errorf("WipeObject left %v's bytes in place: its layout changed", v.Type())
		}
	}
	// Something that holds a pointer is left alone.
	s := &struct {
		k [4]byte
		p *int
	}{k: [4]byte{1, 2, 3, 4}}
	if WipeObject(s) || s.k != [4]byte{1, 2, 3, 4} {
		t.Fatal("WipeObject cleared a struct holding a pointer")
	}
}
