package study

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"

	xblake2b "golang.org/x/crypto/blake2b"
)

func pattern(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// sum512 is an unkeyed BLAKE2b-512 built on compress alone (RFC 7693,
// section 3.3), so that a compression function can be checked against an
// independent implementation.
func sum512(compress func(*[8]uint64, *[2]uint64, uint64, []byte), msg []byte) []byte {
	h := iv
	h[0] ^= 64 | 1<<16 | 1<<24
	var c [2]uint64
	for len(msg) > BlockSize {
		compress(&h, &c, 0, msg[:BlockSize])
		msg = msg[BlockSize:]
	}
	var last [BlockSize]byte
	copy(last[:], msg)
	// compress adds BlockSize first; the final block counts len(msg) bytes.
	back := uint64(BlockSize - len(msg))
	if c[0] < back {
		c[1]--
	}
	c[0] -= back
	compress(&h, &c, finalFlag, last[:])
	out := make([]byte, 64)
	for i, w := range h {
		binary.LittleEndian.PutUint64(out[8*i:], w)
	}
	return out
}

// TestReference checks the study's reference against x/crypto.
func TestReference(t *testing.T) {
	for _, n := range []int{0, 1, 127, 128, 129, 256, 1000, 4096} {
		msg := pattern(n, uint64(n))
		want := xblake2b.Sum512(msg)
		if got := sum512(compressGeneric, msg); !bytes.Equal(got, want[:]) {
			t.Fatalf("%d bytes: %x, x/crypto %x", n, got, want)
		}
	}
}
