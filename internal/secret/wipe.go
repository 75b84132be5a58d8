package secret

import (
	"reflect"
	"unsafe"
)

// Keys that other packages handle for us (x/crypto's Argon2id output and
// XChaCha20-Poly1305 keys, crypto/aes key schedules, PBKDF2's hashes) are
// copied where clear() cannot reach them: inside objects with no method
// to erase them, and in the frames the calls leave on the goroutine stack.
// The functions below reach what can be reached; the formats' memory
// tests (TestNoKeysInMemoryAfterClose) check the result, and SECURITY.md
// ("Keys in memory") states what is left.

// WipeObject zeroes the object p points to, a key holder of another
// package that has no method for it (x/crypto's chacha20poly1305 objects,
// crypto/aes's Block). It clears the object only if it is a pointer to a
// struct that holds no pointers (numbers and arrays of them, as those
// packages lay them out), which is safe to overwrite, and reports whether
// it did; with any other layout it does nothing, and the tests that check
// the layouts fail. p must not be used afterwards.
func WipeObject(p any) bool {
	v := reflect.ValueOf(p)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct || !plainData(v.Elem().Type()) {
		return false
	}
	clear(unsafe.Slice((*byte)(v.UnsafePointer()), v.Elem().Type().Size()))
	return true
}

// plainData reports whether t holds nothing but numbers.
func plainData(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	case reflect.Array:
		return plainData(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if !plainData(t.Field(i).Type) {
				return false
			}
		}
		return true
	}
	return false
}

// burnDepth is how much stack BurnStack clears: several times the deepest
// frames that Argon2id's final hash, XChaCha20-Poly1305, the SHA-2 blocks
// of PBKDF2 and AES key expansion leave keys in.
const burnDepth = 8 << 10

// ReserveStack makes the goroutine stack hold burnDepth bytes (and a
// margin) below its caller's frame. A function that handles a key calls it
// before the key exists, then defers BurnStack: a stack that has to grow
// is copied to a new one, and the old one is freed as it is, with whatever
// keys its dead frames held; growing here, keyless, means the burn and the
// frames it clears do not make the stack grow later. (A garbage collection
// may still shrink a stack that uses less than a quarter of it, which is
// also a copy; SECURITY.md, "Keys in memory".)
//
//go:noinline
func ReserveStack() {
	var b [burnDepth + 1<<10]byte
	clearStack(b[:])
}

// BurnStack zeroes burnDepth bytes of the goroutine stack below its
// caller's frame, where the functions the caller has returned from left
// their locals: defer it, after ReserveStack, where a key is handed to
// code that leaves copies in its frames.
//
//go:noinline
func BurnStack() {
	var b [burnDepth]byte
	clearStack(b[:])
}

//go:noinline
func clearStack(b []byte) { clear(b) }
