package whirlpool

import (
	"bytes"
	"crypto/hmac"
	"encoding"
	"encoding/hex"
	"math/rand/v2"
	"os/exec"
	"strings"
	"testing"
)

// The test vectors of the Whirlpool submission to NESSIE, as ISO/IEC
// 10118-3:2004 gives them for the final version.
var vectors = []struct{ in, out string }{
	{"", "19fa61d75522a4669b44e39c1d2e1726c530232130d407f89afee0964997f7a73e83be698b288febcf88e3e03c4f0757ea8964e59b63d93708b138cc42a66eb3"},
	{"a", "8aca2602792aec6f11a67206531fb7d7f0dff59413145e6973c45001d0087b42d11bc645413aeff63a42391a39145a591a92200d560195e53b478584fdae231a"},
	{"abc", "4e2448a4c6f486bb16b6562c73b4020bf3043e3a731bce721ae1b303d97e6d4c7181eebdb6c57e277d0e34957114cbd6c797fc9d95d8b582d225292076d4eef5"},
	{"message digest", "378c84a4126e2dc6e56dcc7458377aac838d00032230f53ce1f5700c0ffb4d3b8421557659ef55c106b4b52ac5a4aaa692ed920052838f3362e86dbd37a8903e"},
	{"abcdefghijklmnopqrstuvwxyz", "f1d754662636ffe92c82ebb9212a484a8d38631ead4238f5442ee13b8054e41b08bf2a9251c30b6a0b8aae86177ab4a6f68f673e7207865d5d9819a3dba4eb3b"},
	{"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789", "dc37e008cf9ee69bf11f00ed9aba26901dd7c28cdec066cc6af42e40f82f3a1e08eba26629129d8fb7cb57211b9281a65517cc879d7b962142c65f5a7af01467"},
	{strings.Repeat("1234567890", 8), "466ef18babb0154d25b9d38a6414f5c08784372bccb204d6549c4afadb6014294d5bd8df2a6c44e538cd047b2681a51a2c60481e88c5a20b2c2a80cf3a9a083b"},
	{"abcdbcdecdefdefgefghfghighijhijk", "2a987ea40f917061f5d6f0a0e4644f488a7a5a52deee656207c562f988e95c6916bdc8031bc5be1b7b947639fe050b56939baaa0adff9ae6745b7b181c3be3fd"},
	{strings.Repeat("a", 1000000), "0c99005beb57eff50a7cf005560ddf5d29057fd86b20bfd62deca0f1ccea4af51fc15490eddc47af32bb2b66c34ff9ad8c6008ad677f77126953b226e4ed8b01"},
}

func TestVectors(t *testing.T) {
	for _, v := range vectors {
		got := Sum([]byte(v.in))
		if hex.EncodeToString(got[:]) != v.out {
			t.Errorf("Whirlpool(%.20q...) = %x, want %s", v.in, got, v.out)
		}
		// The same through Write in pieces of every size up to a block.
		for step := 1; step <= BlockSize+1 && len(v.in) < 200; step++ {
			d := New()
			for i := 0; i < len(v.in); i += step {
				d.Write([]byte(v.in[i:min(i+step, len(v.in))]))
			}
			if hex.EncodeToString(d.Sum(nil)) != v.out {
				t.Fatalf("Whirlpool(%q) written %d bytes at a time differs", v.in, step)
			}
		}
	}
}

// TestOpenSSL compares random messages of every length around the padding
// boundaries with OpenSSL's Whirlpool (legacy provider), when present.
func TestOpenSSL(t *testing.T) {
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("no openssl")
	}
	if err := exec.Command("openssl", "dgst", "-provider", "legacy", "-provider", "default", "-whirlpool", "/dev/null").Run(); err != nil {
		t.Skip("openssl has no Whirlpool (legacy provider)")
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for _, n := range []int{0, 1, 31, 32, 33, 63, 64, 65, 95, 96, 97, 127, 128, 129, 1000} {
		msg := make([]byte, n)
		for i := range msg {
			msg[i] = byte(rng.Uint32())
		}
		cmd := exec.Command("openssl", "dgst", "-provider", "legacy", "-provider", "default", "-whirlpool", "-r")
		cmd.Stdin = bytes.NewReader(msg)
		out, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		want := strings.Fields(string(out))[0]
		got := Sum(msg)
		if hex.EncodeToString(got[:]) != want {
			t.Errorf("%d bytes: %x, openssl %s", n, got, want)
		}
	}
}

func TestMarshal(t *testing.T) {
	msg := []byte(strings.Repeat("whirlpool state ", 9))
	for cut := range len(msg) {
		d := New()
		d.Write(msg[:cut])
		state, err := d.(encoding.BinaryMarshaler).MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		e := New()
		if err := e.(encoding.BinaryUnmarshaler).UnmarshalBinary(state); err != nil {
			t.Fatal(err)
		}
		e.Write(msg[cut:])
		want := Sum(msg)
		if !bytes.Equal(e.Sum(nil), want[:]) {
			t.Fatalf("state saved after %d bytes does not resume", cut)
		}
	}
	if err := New().(encoding.BinaryUnmarshaler).UnmarshalBinary([]byte("short")); err == nil {
		t.Fatal("a short state was accepted")
	}
}

// TestHMAC checks HMAC-Whirlpool through crypto/hmac (which uses the
// marshalled states) against HMAC computed from its definition.
func TestHMAC(t *testing.T) {
	key := []byte("key")
	msg := []byte("The quick brown fox jumps over the lazy dog")
	m := hmac.New(New, key)
	m.Write(msg)
	got := m.Sum(nil)
	m.Reset()
	m.Write(msg)
	again := m.Sum(nil)
	var ipad, opad [BlockSize]byte
	copy(ipad[:], key)
	copy(opad[:], key)
	for i := range ipad {
		ipad[i] ^= 0x36
		opad[i] ^= 0x5c
	}
	inner := Sum(append(ipad[:], msg...))
	want := Sum(append(opad[:], inner[:]...))
	if !bytes.Equal(got, want[:]) || !bytes.Equal(again, want[:]) {
		t.Fatalf("HMAC-Whirlpool %x (after Reset %x), by definition %x", got, again, want)
	}
}
