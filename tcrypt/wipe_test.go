package tcrypt

import (
	"bytes"
	"reflect"
	"testing"
	"unsafe"

	"github.com/xtsctl/xtsctl/internal/secret"
)

// TestCipherSchedulesWipe checks that secret.WipeObject clears the key
// schedule of every block cipher a header is tried with: it silently does
// nothing for a type holding pointers, so a layout change would leave the
// header keys of the rows that did not match in memory.
func TestCipherSchedulesWipe(t *testing.T) {
	key := bytes.Repeat([]byte{0xa5}, 32)
	for _, c := range []blockCipher{cAES, cSerpent, cTwofish, cCamellia, cKuznyechik} {
		b, err := c.new(key)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		v := reflect.ValueOf(b)
		if v.Kind() != reflect.Pointer {
			t.Fatalf("%s: %v is not a pointer", c.name, v.Type())
		}
		mem := unsafe.Slice((*byte)(v.UnsafePointer()), v.Elem().Type().Size())
		if bytes.Equal(mem, make([]byte, len(mem))) {
			t.Fatalf("%s: the schedule is all zero before the wipe", c.name)
		}
		if !secret.WipeObject(b) || !bytes.Equal(mem, make([]byte, len(mem))) {
			t.Errorf("%s: WipeObject left %v's schedule in place", c.name, v.Type())
		}
	}
}
