package blake2b

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unsafe"

	xblake2b "golang.org/x/crypto/blake2b"
)

var _ Wiper = (*digest)(nil)

// TestSumKeyed compares SumKeyed with x/crypto's New/Write/Sum for digest
// sizes, key lengths and message lengths around the block boundaries, with
// every compression function.
func TestSumKeyed(t *testing.T) {
	msg := pattern(3*BlockSize+1, 51)
	key := pattern(Size, 52)
	forEachImpl(t, func(t *testing.T) {
		for _, size := range []int{1, 16, 32, 33, 63, 64} {
			for _, kl := range []int{0, 1, 31, 32, 63, 64} {
				for _, n := range []int{0, 1, 8, 127, 128, 129, 255, 256, 257, 3*BlockSize + 1} {
					x, err := xblake2b.New(size, key[:kl])
					if err != nil {
						t.Fatal(err)
					}
					x.Write(msg[:n])
					want := x.Sum(nil)
					got := make([]byte, size)
					SumKeyed(got, key[:kl], msg[:n])
					if !bytes.Equal(got, want) {
						t.Fatalf("size %d, key %d bytes, message %d bytes: SumKeyed = %x, x/crypto %x", size, kl, n, got, want)
					}
				}
			}
		}
	})
}

func TestSumKeyedPanics(t *testing.T) {
	for name, f := range map[string]func(){
		"size 0":  func() { SumKeyed(nil, nil, nil) },
		"size 65": func() { SumKeyed(make([]byte, 65), nil, nil) },
		"key 65":  func() { SumKeyed(make([]byte, 32), make([]byte, 65), nil) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if s := fmt.Sprint(recover()); !strings.HasPrefix(s, "blake2b: SumKeyed: ") {
					t.Fatalf("panic %q, want a blake2b: SumKeyed: one", s)
				}
			}()
			f()
		})
	}
}

// rawBytes returns the memory of d itself, every field included.
func rawBytes(d *digest) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(d)), unsafe.Sizeof(*d))
}

// keyPieces counts the places in mem where 8 consecutive bytes of key occur.
func keyPieces(mem, key []byte) int {
	n := 0
	for i := 0; i+8 <= len(key); i++ {
		n += bytes.Count(mem, key[i:i+8])
	}
	return n
}

// TestWipe checks what a keyed hash holds: after a Write, the key only in
// the field Reset needs (a short last block does not leave the rest of the
// key block behind it); after Wipe, nothing at all. Its results before
// Wipe are x/crypto's.
func TestWipe(t *testing.T) {
	r := rand.New(rand.NewPCG(53, 54))
	key := pattern(Size, 55)
	for _, kl := range []int{16, 32, 64} {
		for _, n := range []int{0, 1, 29, 128, 129, 1000} {
			msg := pattern(n, uint64(n))
			h, err := New(Size, key[:kl])
			if err != nil {
				t.Fatal(err)
			}
			writeSplit(h, msg, r)
			d := h.(*digest)
			if n > 0 {
				if k := keyPieces(rawBytes(&digest{state: d.state}), key[:kl]); k != 0 {
					t.Errorf("key %d bytes, message %d bytes: %d pieces of the key in the chaining state", kl, n, k)
				}
			}
			got := h.Sum(nil)
			x, _ := xblake2b.New(Size, key[:kl])
			x.Write(msg)
			if want := x.Sum(nil); !bytes.Equal(got, want) {
				t.Fatalf("key %d bytes, message %d bytes: %x, x/crypto %x", kl, n, got, want)
			}
			h.(Wiper).Wipe()
			if k := keyPieces(rawBytes(d), key[:kl]); k != 0 {
				t.Errorf("key %d bytes, message %d bytes: %d pieces of the key after Wipe", kl, n, k)
			}
			if !bytes.Equal(rawBytes(d), make([]byte, unsafe.Sizeof(*d))) {
				t.Errorf("key %d bytes, message %d bytes: the hash is not all zero after Wipe", kl, n)
			}
		}
	}
}

func TestUseAfterWipePanics(t *testing.T) {
	for name, f := range map[string]func(h hashWiper){
		"Write": func(h hashWiper) { h.Write([]byte("x")) },
		"Sum":   func(h hashWiper) { h.Sum(nil) },
		"Reset": func(h hashWiper) { h.Reset() },
	} {
		t.Run(name, func(t *testing.T) {
			h, _ := New(32, []byte("key"))
			hw := h.(hashWiper)
			hw.Wipe()
			defer func() {
				if s := fmt.Sprint(recover()); s != "blake2b: hash used after Wipe" {
					t.Fatalf("panic %q", s)
				}
			}()
			f(hw)
		})
	}
}

type hashWiper interface {
	Write([]byte) (int, error)
	Sum([]byte) []byte
	Reset()
	Wiper
}
