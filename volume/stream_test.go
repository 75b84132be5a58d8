package volume

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
)

func randomBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// TestStreamOrderAndNumbering: a transform that stamps each sector with its
// number must produce the same result as doing it in one pass.
func TestStreamOrderAndNumbering(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	for _, size := range []int{0, 512, 4096 * 3, streamChunk, streamChunk + 512, 3*streamChunk + 4096*5} {
		in := randomBytes(r, size)
		stamp := func(buf []byte, first uint64) error {
			for i := 0; i < len(buf); i += 512 {
				buf[i] ^= byte(first + uint64(i/512))
				buf[i+1] ^= byte((first + uint64(i/512)) >> 8)
			}
			return nil
		}
		want := bytes.Clone(in)
		stamp(want, 0)
		var out bytes.Buffer
		var last int64
		err := Stream(context.Background(), &out, bytes.NewReader(in), int64(size), 512, stamp, func(n int64) { last = n })
		if err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		if !bytes.Equal(out.Bytes(), want) {
			t.Fatalf("size %d: output differs", size)
		}
		if last != int64(size) {
			t.Fatalf("size %d: progress ended at %d", size, last)
		}
	}
}

func TestStreamShortInput(t *testing.T) {
	err := Stream(context.Background(), io.Discard, bytes.NewReader(make([]byte, 1000)), 4096, 512,
		func([]byte, uint64) error { return nil }, nil)
	if err == nil || !strings.Contains(err.Error(), "input ended after 1000 bytes, expected 4096") {
		t.Fatalf("err = %v", err)
	}
}

type failWriter struct{ after int }

func (f *failWriter) Write(p []byte) (int, error) {
	if f.after <= 0 {
		return 0, errors.New("no space left on device")
	}
	f.after--
	return len(p), nil
}

func TestStreamErrorsStopEverything(t *testing.T) {
	size := int64(8 * streamChunk)
	in := bytes.NewReader(make([]byte, size))
	err := Stream(context.Background(), &failWriter{after: 2}, in, size, 512, func([]byte, uint64) error { return nil }, nil)
	if err == nil || !strings.Contains(err.Error(), "no space left") {
		t.Fatalf("write error: %v", err)
	}
	boom := errors.New("boom")
	in.Reset(make([]byte, size))
	err = Stream(context.Background(), io.Discard, in, size, 512, func(_ []byte, first uint64) error {
		if first > 0 {
			return boom
		}
		return nil
	}, nil)
	if !errors.Is(err, boom) {
		t.Fatalf("transform error: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	in.Reset(make([]byte, size))
	err = Stream(ctx, io.Discard, in, size, 512, func([]byte, uint64) error { cancel(); return nil }, nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}
