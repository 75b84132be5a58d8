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

// A Stack, a local variable of a function that hands keys to code that
// leaves copies of them in its stack frames (x/crypto's Argon2 and
// XChaCha20-Poly1305, hashes, ciphers), keeps the goroutine stack from
// moving while the function runs, and clears what those frames left:
//
//	var stack secret.Stack
//	stack.Reserve() // before any key exists
//	defer stack.Burn()
//
// A stack that moves is copied to a new one, and the old one is freed as
// it is, with whatever keys its frames held. It moves when it grows, so
// Reserve grows it, keyless, to hold what the calls below and Burn need;
// and when a garbage collection finds it using less than a quarter of its
// size, it is shrunk (copied to one half as big): the Stack, in the
// function's frame, keeps more than a quarter in use. A KDF that
// allocates much, as Argon2 does, runs many collections. (A goroutine
// whose stack was already more than four times what it uses, with the
// Stack, can still be shrunk once; SECURITY.md, "Keys in memory".)
type Stack struct {
	keep [keepDepth]byte
}

// keepDepth is the size of a Stack: a stack that Reserve grew uses less
// than twice that.
const keepDepth = 16 << 10

// Reserve makes the goroutine stack big enough below the caller's frame
// for the calls that handle keys and for Burn.
//
//go:noinline
func (s *Stack) Reserve() {
	clearStack(s.keep[:]) // in the caller's frame, whatever the compiler sees
	reserveStack()
}

// Burn zeroes the stack below the caller's frame, where the functions the
// caller has returned from left their locals.
//
//go:noinline
func (s *Stack) Burn() { burnStack() }

// burnDepth is how much stack Burn clears: several times the deepest
// frames that Argon2's final hash, XChaCha20-Poly1305, the hashes of
// PBKDF2 and key expansions leave keys in.
const burnDepth = 8 << 10

//go:noinline
func reserveStack() {
	var b [burnDepth + 1<<10]byte
	clearStack(b[:])
}

//go:noinline
func burnStack() {
	var b [burnDepth]byte
	clearStack(b[:])
}

//go:noinline
func clearStack(b []byte) { clear(b) }
