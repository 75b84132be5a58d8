package volume

import (
	"reflect"
	"unsafe"
)

// Keys that x/crypto handles for us (Argon2id's output, the XChaCha20-
// Poly1305 key and per-message subkey) are copied where this package cannot
// clear them with clear(): inside the AEAD object, and in the frames the
// calls leave on the goroutine stack. These two functions reach what can be
// reached; TestNoKeysInMemoryAfterClose checks the result, and SECURITY.md
// ("Keys in memory") states what is left.

// wipeAEAD zeroes the copy of the key that x/crypto's chacha20poly1305
// objects keep inside them; they have no method for it. It clears the
// object only if it is a pointer to a struct of byte arrays and nothing
// else (x/crypto's layout: one key array), which is safe to overwrite; with
// any other layout it does nothing, and TestNoKeysInMemoryAfterClose fails.
// What x/crypto copies while sealing or opening is out of reach
// (SECURITY.md, "Keys in memory").
func wipeAEAD(a any) {
	v := reflect.ValueOf(a)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return
	}
	t := v.Elem().Type()
	for i := range t.NumField() {
		if f := t.Field(i).Type; f.Kind() != reflect.Array || f.Elem().Kind() != reflect.Uint8 {
			return
		}
	}
	clear(unsafe.Slice((*byte)(v.UnsafePointer()), t.Size()))
}

// burnDepth is how much stack burnStack clears: several times the deepest
// frames Argon2id's final hash and XChaCha20-Poly1305 leave keys in.
const burnDepth = 8 << 10

// reserveStack makes the goroutine stack hold burnDepth bytes (and a
// margin) below its caller's frame. A function that handles a key calls it
// before the key exists, then defers burnStack: a stack that has to grow
// is copied to a new one, and the old one is freed as it is, with whatever
// keys its dead frames held; growing here, keyless, means the burn and the
// frames it clears do not make the stack grow later. (A garbage collection
// may still shrink a stack that uses less than a quarter of it, which is
// also a copy; SECURITY.md, "Keys in memory".)
//
//go:noinline
func reserveStack() {
	var b [burnDepth + 1<<10]byte
	clearStack(b[:])
}

// burnStack zeroes burnDepth bytes of the goroutine stack below its
// caller's frame, where the functions the caller has returned from left
// their locals: defer it, after reserveStack, where x/crypto handles a key.
//
//go:noinline
func burnStack() {
	var b [burnDepth]byte
	clearStack(b[:])
}

//go:noinline
func clearStack(b []byte) { clear(b) }
