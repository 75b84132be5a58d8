package volume

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/xtsctl/xtsctl/internal/stream"
)

// shrinking is an input that ends before the size it was announced with.
type shrinking struct{ *bytes.Reader }

// TestCreateShortInput: an input that ends early is named, as a ReadError.
func TestCreateShortInput(t *testing.T) {
	in := shrinking{bytes.NewReader(make([]byte, 3*stream.ChunkSize+100))}
	_, _, err := Create(context.Background(), &memDevice{}, in, 4*stream.ChunkSize, CreateOptions{TagSize: 32, Passphrase: testPass}, nil)
	var re *ReadError
	if !errors.As(err, &re) || !strings.Contains(err.Error(), "input ended after 3145828 bytes, expected 4194304") {
		t.Fatalf("err = %v", err)
	}
}

// TestStreamingAllocations: Create, Decrypt and Verify allocate as much for
// 16 chunks as for one (their buffers and scratch space are set up once),
// so nothing is allocated per chunk or per sector, the digest included.
func TestStreamingAllocations(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation counts take a few seconds")
	}
	allocs := func(n int) (create, decrypt, verify float64) {
		plain := randomData(uint64(n), n)
		dev, _ := newTestVolume(t, plain, 4096, 32, 64)
		v := mustOpen(t, dev, true)
		defer v.Close()
		create = testing.AllocsPerRun(2, func() {
			out := &memDevice{b: make([]byte, dev.size())} // zeros, full size: no growth
			Create(context.Background(), out, bytes.NewReader(plain), int64(n), CreateOptions{TagSize: 32, KDF: testKDF, Passphrase: testPass}, nil)
		})
		decrypt = testing.AllocsPerRun(2, func() { v.Decrypt(context.Background(), io.Discard, true, nil) })
		verify = testing.AllocsPerRun(2, func() { v.Verify(context.Background(), nil, nil) })
		return
	}
	c1, d1, v1 := allocs(stream.ChunkSize)
	c16, d16, v16 := allocs(16 * stream.ChunkSize)
	// A few allocations of slack for the runtime's own (a goroutine's stack
	// growing, a timer); one per chunk would add 15.
	if c16 > c1+4 || d16 > d1+4 || v16 > v1+4 {
		t.Fatalf("allocations for 1 and 16 chunks: Create %v, %v; Decrypt %v, %v; Verify %v, %v", c1, c16, d1, d16, v1, v16)
	}
}
