package plain

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/xtsctl/xtsctl/sector"
)

func TestPlainSizes(t *testing.T) {
	p := Mapping{Sector: sector.Params{Size: 4096}, Offset: 8} // data at byte 4096
	for _, c := range []struct {
		size int64
		err  string
	}{
		{-1, ""}, {0, ""}, {4096, ""}, {3 * 4096, ""},
		{512, "input in is 512 bytes, not a whole number of 4096-byte sectors"},
		{4097, "input in is 4097 bytes, not a whole number of 4096-byte sectors"},
	} {
		err := p.CheckPlaintext("in", c.size)
		if (c.err == "") != (err == nil) || (err != nil && (err.Error() != c.err || !errors.Is(err, ErrInputSize))) {
			t.Errorf("CheckPlaintext(%d) = %v, want %q", c.size, err, c.err)
		}
	}
	for _, c := range []struct {
		image, want int64
		err         string
	}{
		{-1, -1, ""},
		{2 * 4096, 4096, ""},
		{9 * 4096, 8 * 4096, ""},
		{4096, 0, "input in is 4096 bytes: nothing after the offset of 4096 bytes"},
		{100, 0, "input in is 100 bytes: nothing after the offset of 4096 bytes"},
		{4096 + 512, 0, "input in holds 512 bytes after the offset, not a whole number of 4096-byte sectors"},
	} {
		got, err := p.DataSize("in", c.image)
		if got != c.want || (c.err == "") != (err == nil) || (err != nil && (err.Error() != c.err || !errors.Is(err, ErrInputSize))) {
			t.Errorf("DataSize(%d) = %d, %v; want %d, %q", c.image, got, err, c.want, c.err)
		}
	}
}

// TestSkipOffset: a seekable input is positioned by seeking (from
// wherever it was), a stream by reading past the offset; a stream that
// ends within the offset is an error saying where.
func TestSkipOffset(t *testing.T) {
	p := Mapping{Sector: sector.Params{Size: 512}, Offset: 2}
	img := append(bytes.Repeat([]byte{'o'}, 1024), "data"...)
	seeker := bytes.NewReader(img)
	seeker.Seek(7, io.SeekStart)
	if err := p.SkipOffset(seeker); err != nil {
		t.Fatal(err)
	}
	if rest, _ := io.ReadAll(seeker); string(rest) != "data" {
		t.Fatalf("after seeking: %q", rest)
	}
	stream := iotest.HalfReader(bytes.NewReader(img)) // no Seek
	if err := p.SkipOffset(stream); err != nil {
		t.Fatal(err)
	}
	if rest, _ := io.ReadAll(stream); string(rest) != "data" {
		t.Fatalf("after reading past: %q", rest)
	}
	err := p.SkipOffset(iotest.HalfReader(strings.NewReader(strings.Repeat("x", 1000))))
	if err == nil || err.Error() != "the input ended after 1000 bytes, within the offset of 1024" {
		t.Fatalf("short stream: %v", err)
	}
	if err := (Mapping{Sector: p.Sector}).SkipOffset(iotest.ErrReader(errors.New("unread"))); err != nil {
		t.Fatalf("no offset reads nothing: %v", err)
	}
}

// failSeeker cannot seek (like a pipe opened as a file): SkipOffset reads.
type failSeeker struct{ io.Reader }

func (failSeeker) Seek(int64, int) (int64, error) { return 0, errors.New("illegal seek") }

func TestSkipOffsetUnseekable(t *testing.T) {
	p := Mapping{Sector: sector.Params{Size: 512}, Offset: 1}
	r := failSeeker{bytes.NewReader(append(make([]byte, 512), "tail"...))}
	if err := p.SkipOffset(r); err != nil {
		t.Fatal(err)
	}
	if rest, _ := io.ReadAll(r); string(rest) != "tail" {
		t.Fatalf("%q", rest)
	}
}
