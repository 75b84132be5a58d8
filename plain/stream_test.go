package plain

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"testing/iotest"

	"github.com/xtsctl/xtsctl/internal/stream"
	"github.com/xtsctl/xtsctl/sector"
	"github.com/xtsctl/xtsctl/xts"
)

func randomBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func testCodec(t *testing.T, p sector.Params) *sector.Codec {
	t.Helper()
	c, err := xts.NewCipher(randomBytes(rand.New(rand.NewPCG(7, 7)), 64))
	if err != nil {
		t.Fatal(err)
	}
	codec, err := sector.NewCodec(c, p)
	if err != nil {
		t.Fatal(err)
	}
	return codec
}

// TestPlainStreams: Encrypt gives the offset's zeros and then exactly
// what the codec makes of the whole input in one call, from a reader that
// returns a byte at a time or half of what is asked; Decrypt gives
// the input back; progress ends at the size.
func TestPlainStreams(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	p := Mapping{Sector: sector.Params{Size: 4096, IVOffset: 8}, Offset: 16}
	codec := testCodec(t, p.Sector)
	for _, size := range []int{0, 4096, 4096 * 3, stream.ChunkSize, stream.ChunkSize + 4096, 5*stream.ChunkSize + 4096*5} {
		in := randomBytes(r, size)
		want := make([]byte, size)
		codec.Encrypt(want, in, 0)
		for _, reader := range []func(io.Reader) io.Reader{iotest.HalfReader, iotest.DataErrReader} {
			var out bytes.Buffer
			var last int64
			if _, err := Encrypt(context.Background(), &out, reader(bytes.NewReader(in)), int64(size), p, codec, func(n int64) { last = n }); err != nil {
				t.Fatalf("size %d: %v", size, err)
			}
			if got := out.Bytes(); !bytes.Equal(got[:p.OffsetBytes()], make([]byte, p.OffsetBytes())) || !bytes.Equal(got[p.OffsetBytes():], want) {
				t.Fatalf("size %d: output differs", size)
			}
			if last != int64(size) {
				t.Fatalf("size %d: progress ended at %d", size, last)
			}
			var back bytes.Buffer
			if _, err := Decrypt(context.Background(), &back, reader(bytes.NewReader(want)), int64(size), p, codec, nil); err != nil || !bytes.Equal(back.Bytes(), in) {
				t.Fatalf("size %d: decrypt: %v", size, err)
			}
		}
	}
}

func TestPlainStreamShortInput(t *testing.T) {
	p := Mapping{Sector: sector.Params{Size: 512}}
	_, err := Decrypt(context.Background(), io.Discard, bytes.NewReader(make([]byte, 1000)), 4096, p, testCodec(t, p.Sector), nil)
	var re *stream.ReadError
	if !errors.As(err, &re) || !strings.Contains(err.Error(), "input ended after 1000 bytes, expected 4096") {
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

// countingReader counts the bytes read, to see reading stop.
type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

func TestPlainStreamErrorsStopEverything(t *testing.T) {
	p := Mapping{Sector: sector.Params{Size: 512}}
	codec := testCodec(t, p.Sector)
	size := int64(64 * stream.ChunkSize)
	in := &countingReader{r: bytes.NewReader(make([]byte, size))}
	_, err := Decrypt(context.Background(), &failWriter{after: 2}, in, size, p, codec, nil)
	var we *stream.WriteError
	if !errors.As(err, &we) || !strings.Contains(err.Error(), "no space left") {
		t.Fatalf("write error: %v", err)
	}
	if n := in.n.Load(); n >= size/2 {
		t.Errorf("read %d of %d bytes after the write failed", n, size)
	}
	ctx, cancel := context.WithCancel(context.Background())
	_, err = Decrypt(ctx, io.Discard, bytes.NewReader(make([]byte, size)), size, p, codec, func(int64) { cancel() })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}

// TestPlainStreamUnknownSize: from a pipe (size -1) the whole input is
// encrypted, whatever its length in sectors, and a length that is not a
// whole number of sectors is an error naming it.
func TestPlainStreamUnknownSize(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 2))
	p := Mapping{Sector: sector.Params{Size: 512}}
	codec := testCodec(t, p.Sector)
	for _, size := range []int{0, 512, stream.ChunkSize, stream.ChunkSize + 512, 3 * stream.ChunkSize, 3*stream.ChunkSize + 4096} {
		in := randomBytes(r, size)
		want := make([]byte, size)
		codec.Encrypt(want, in, 0)
		var out bytes.Buffer
		n, err := Encrypt(context.Background(), &out, iotest.HalfReader(bytes.NewReader(in)), -1, p, codec, nil)
		if err != nil || n != int64(size) || !bytes.Equal(out.Bytes(), want) {
			t.Fatalf("size %d: %d bytes, %v, equal %v", size, n, err, bytes.Equal(out.Bytes(), want))
		}
	}
	_, err := Encrypt(context.Background(), io.Discard, bytes.NewReader(make([]byte, stream.ChunkSize+100)), -1, p, codec, nil)
	var re *stream.ReadError
	if !errors.As(err, &re) || !strings.Contains(err.Error(), "not a whole number of 512-byte sectors") {
		t.Fatalf("ragged input: %v", err)
	}
}
