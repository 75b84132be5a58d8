package streebog

import (
	"bytes"
	"crypto/hmac"
	"encoding"
	"encoding/hex"
	"slices"
	"strings"
	"testing"
)

// rfcHex decodes a number as RFC 6986 prints it (most significant byte
// first) into the byte order of messages and digests.
func rfcHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	slices.Reverse(b)
	return b
}

// The examples of RFC 6986 section 10: M1 is the 63 ASCII digits
// "0123...012", M2 a line of the Igor Tale in CP1251.
var examples = []struct{ name, msg, h512, h256 string }{
	{"M1",
		"323130393837363534333231303938373635343332313039383736353433323130393837363534333231303938373635343332313039383736353433323130",
		"486f64c1917879417fef082b3381a4e211c324f074654c38823a7b76f830ad00fa1fbae42b1285c0352f227524bc9ab16254288dd6863dccd5b9f54a1ad0541b",
		"00557be5e584fd52a449b16b0251d05d27f94ab76cbaa6da890b59d8ef1e159d"},
	{"M2",
		"fbe2e5f0eee3c820fbeafaebef20fffbf0e1e0f0f520e0ed20e8ece0ebe5f0f2f120fff0eeec20f120faf2fee5e2202ce8f6f3ede220e8e6eee1e8f0f2d1202ce8f0f2e5e220e5d1",
		"28fbc9bada033b1460642bdcddb90c3fb3e56c497ccd0f62b8a2ad4935e85f037613966de4ee00531ae60f3b5a47f8dae06915d5f2f194996fcabf2622e6881e",
		"508f7e553c06501d749a66fc28c6cac0b005746d97537fa85d9e40904efed29d"},
}

func TestRFC6986(t *testing.T) {
	for _, e := range examples {
		msg := rfcHex(t, e.msg)
		if e.name == "M1" && string(msg) != strings.Repeat("0123456789", 6)+"012" {
			t.Fatalf("M1 reads %q", msg)
		}
		for _, c := range []struct {
			new  func() hashWriter
			want []byte
		}{
			{want: rfcHex(t, e.h512), new: func() hashWriter { return New512().(hashWriter) }},
			{want: rfcHex(t, e.h256), new: func() hashWriter { return New256().(hashWriter) }},
		} {
			for step := 1; step <= len(msg); step++ {
				d := c.new()
				for i := 0; i < len(msg); i += step {
					d.Write(msg[i:min(i+step, len(msg))])
				}
				if got := d.Sum(nil); !bytes.Equal(got, c.want) {
					t.Fatalf("%s, %d-byte digest written %d bytes at a time: %x, want %x", e.name, len(c.want), step, got, c.want)
				}
			}
		}
	}
}

type hashWriter interface {
	Write([]byte) (int, error)
	Sum([]byte) []byte
}

// TestBlockBoundaries checks that messages of whole blocks, which end in
// a block of padding only, hash the same whether written at once or byte
// by byte, and that Sum does not change the state.
func TestBlockBoundaries(t *testing.T) {
	for _, n := range []int{0, 63, 64, 65, 127, 128, 129, 200} {
		msg := bytes.Repeat([]byte{0xa5, 0x3c, 0x01}, n)[:n]
		want := Sum512(msg)
		d := New512()
		for i := range msg {
			d.Write(msg[i : i+1])
			d.Sum(nil)
		}
		if got := d.Sum(nil); !bytes.Equal(got, want[:]) {
			t.Fatalf("%d bytes byte by byte: %x, at once %x", n, got, want)
		}
	}
}

func TestMarshal(t *testing.T) {
	msg := []byte(strings.Repeat("streebog state ", 10))
	for _, nw := range []func() interface{}{func() interface{} { return New512() }, func() interface{} { return New256() }} {
		for cut := range len(msg) {
			d := nw().(hashWriter)
			d.Write(msg[:cut])
			state, err := d.(encoding.BinaryMarshaler).MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			e := nw().(hashWriter)
			if err := e.(encoding.BinaryUnmarshaler).UnmarshalBinary(state); err != nil {
				t.Fatal(err)
			}
			e.Write(msg[cut:])
			f := nw().(hashWriter)
			f.Write(msg)
			if !bytes.Equal(e.Sum(nil), f.Sum(nil)) {
				t.Fatalf("state saved after %d bytes does not resume", cut)
			}
		}
	}
	if err := New512().(encoding.BinaryUnmarshaler).UnmarshalBinary([]byte("stbg\x01")); err == nil {
		t.Fatal("a short state was accepted")
	}
}

// TestHMAC checks HMAC-Streebog-512 through crypto/hmac against HMAC
// from its definition (RFC 2104) over Sum512.
func TestHMAC(t *testing.T) {
	key := []byte("a key of some length")
	msg := []byte("The quick brown fox jumps over the lazy dog")
	m := hmac.New(New512, key)
	m.Write(msg)
	m.Sum(nil)
	m.Reset()
	m.Write(msg)
	got := m.Sum(nil)
	var ipad, opad [BlockSize]byte
	copy(ipad[:], key)
	copy(opad[:], key)
	for i := range ipad {
		ipad[i] ^= 0x36
		opad[i] ^= 0x5c
	}
	inner := Sum512(append(ipad[:], msg...))
	want := Sum512(append(opad[:], inner[:]...))
	if !bytes.Equal(got, want[:]) {
		t.Fatalf("HMAC %x, by definition %x", got, want)
	}
}
