package bitlk

import (
	"bytes"
	"crypto/aes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os/exec"
	"strings"
	"testing"
)

func unhexT(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// ccmVectors: NIST SP 800-38C Appendix C (C.1 to C.4, C.4 with 64 KiB
// of associated data: the 0xfffe length encoding) and RFC 3610 packet
// vectors 1, 2 and 7.
var ccmVectors = []struct {
	name                     string
	key, nonce, ad, pt, want string // want: ciphertext || tag
	adLen                    int    // > 0: ad is bytes i mod 256 of this length
	tag                      int
}{
	{"SP800-38C C.1", "404142434445464748494a4b4c4d4e4f", "10111213141516", "0001020304050607", "20212223", "7162015b4dac255d", 0, 4},
	{"SP800-38C C.2", "404142434445464748494a4b4c4d4e4f", "1011121314151617", "000102030405060708090a0b0c0d0e0f", "202122232425262728292a2b2c2d2e2f",
		"d2a1f0e051ea5f62081a7792073d593d1fc64fbfaccd", 0, 6},
	{"SP800-38C C.3", "404142434445464748494a4b4c4d4e4f", "101112131415161718191a1b", "000102030405060708090a0b0c0d0e0f10111213",
		"202122232425262728292a2b2c2d2e2f3031323334353637", "e3b201a9f5b71a7a9b1ceaeccd97e70b6176aad9a4428aa5484392fbc1b09951", 0, 8},
	{"SP800-38C C.4", "404142434445464748494a4b4c4d4e4f", "101112131415161718191a1b1c", "",
		"202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f",
		"69915dad1e84c6376a68c2967e4dab615ae0fd1faec44cc484828529463ccf72b4ac6bec93e8598e7f0dadbcea5b", 65536, 14},
	{"RFC3610 #1", "c0c1c2c3c4c5c6c7c8c9cacbcccdcecf", "00000003020100a0a1a2a3a4a5", "0001020304050607",
		"08090a0b0c0d0e0f101112131415161718191a1b1c1d1e", "588c979a61c663d2f066d0c2c0f989806d5f6b61dac38417e8d12cfdf926e0", 0, 8},
	{"RFC3610 #2", "c0c1c2c3c4c5c6c7c8c9cacbcccdcecf", "00000004030201a0a1a2a3a4a5", "0001020304050607",
		"08090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f", "72c91a36e135f8cf291ca894085c87e3cc15c439c9e43a3ba091d56e10400916", 0, 8},
	{"RFC3610 #7", "c0c1c2c3c4c5c6c7c8c9cacbcccdcecf", "00000009080706a0a1a2a3a4a5", "0001020304050607",
		"08090a0b0c0d0e0f101112131415161718191a1b1c1d1e", "0135d1b2c95f41d5d1d4fec185d166b8094e999dfed96c048c56602c97acbb7490", 0, 10},
}

func TestCCMVectors(t *testing.T) {
	for _, v := range ccmVectors {
		t.Run(v.name, func(t *testing.T) {
			b, err := aes.NewCipher(unhexT(t, v.key))
			if err != nil {
				t.Fatal(err)
			}
			nonce := unhexT(t, v.nonce)
			c, err := newCCM(b, len(nonce), v.tag)
			if err != nil {
				t.Fatal(err)
			}
			ad := unhexT(t, v.ad)
			if v.adLen > 0 {
				ad = make([]byte, v.adLen)
				for i := range ad {
					ad[i] = byte(i)
				}
			}
			pt, want := unhexT(t, v.pt), unhexT(t, v.want)
			if got := c.Seal(nil, nonce, pt, ad); !bytes.Equal(got, want) {
				t.Fatalf("Seal = %x, want %x", got, want)
			}
			got, err := c.Open(nil, nonce, want, ad)
			if err != nil || !bytes.Equal(got, pt) {
				t.Fatalf("Open = %x, %v; want %x", got, err, pt)
			}
			// Every single-bit change of ciphertext, tag or associated
			// data is refused.
			for i := range 8 * len(want) {
				bad := bytes.Clone(want)
				bad[i/8] ^= 1 << (i % 8)
				if out, err := c.Open(nil, nonce, bad, ad); !errors.Is(err, errCCMOpen) || out != nil {
					t.Fatalf("Open took the message with bit %d flipped", i)
				}
			}
			if len(ad) > 0 {
				bad := bytes.Clone(ad)
				bad[len(bad)-1] ^= 0x80
				if _, err := c.Open(nil, nonce, want, bad); !errors.Is(err, errCCMOpen) {
					t.Fatal("Open took changed associated data")
				}
			}
			if _, err := c.Open(nil, nonce, want[:v.tag-1], ad); !errors.Is(err, errCCMOpen) {
				t.Fatal("Open took a message shorter than its tag")
			}
		})
	}
	for _, p := range [][2]int{{6, 16}, {14, 16}, {12, 3}, {12, 17}, {12, 5}} {
		b, _ := aes.NewCipher(make([]byte, 16))
		if _, err := newCCM(b, p[0], p[1]); err == nil {
			t.Errorf("newCCM took a %d-byte nonce and a %d-byte tag", p[0], p[1])
		}
	}
}

// TestCCMAgainstPython compares Seal with the cryptography package's
// AESCCM (OpenSSL's CCM) on random keys, nonce and tag sizes, lengths and
// associated data, BitLocker's parameters (12-byte nonce, 16-byte tag,
// none) among them.
func TestCCMAgainstPython(t *testing.T) {
	if err := exec.Command("/usr/bin/python3", "-c", "from cryptography.hazmat.primitives.ciphers.aead import AESCCM").Run(); err != nil {
		t.Skip("python3-cryptography is not installed (scripts/install-deps.sh installs it): skipping the comparison with OpenSSL's AES-CCM")
	}
	type tc struct {
		Key, Nonce, AD, PT string
		Tag                int
	}
	r := rand.New(rand.NewPCG(5, 6))
	rnd := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return b
	}
	var cases []tc
	for i := range 200 {
		nonce, tag, adLen := 12, 16, 0
		if i%2 == 1 {
			nonce, tag, adLen = 7+r.IntN(7), 4+2*r.IntN(7), r.IntN(70)
		}
		keyLen := []int{16, 24, 32}[r.IntN(3)]
		cases = append(cases, tc{Key: hex.EncodeToString(rnd(keyLen)), Nonce: hex.EncodeToString(rnd(nonce)),
			AD: hex.EncodeToString(rnd(adLen)), PT: hex.EncodeToString(rnd(r.IntN(100))), Tag: tag})
	}
	in, _ := json.Marshal(cases)
	cmd := exec.Command("/usr/bin/python3", "-c", `
import json, sys
from cryptography.hazmat.primitives.ciphers.aead import AESCCM
out = []
for c in json.load(sys.stdin):
    a = AESCCM(bytes.fromhex(c["Key"]), tag_length=c["Tag"])
    out.append(a.encrypt(bytes.fromhex(c["Nonce"]), bytes.fromhex(c["PT"]), bytes.fromhex(c["AD"]) or None).hex())
json.dump(out, sys.stdout)
`)
	cmd.Stdin = bytes.NewReader(in)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python: %v", err)
	}
	var want []string
	if err := json.Unmarshal(out, &want); err != nil || len(want) != len(cases) {
		t.Fatalf("python output: %v (%d results)", err, len(want))
	}
	for i, c := range cases {
		b, _ := aes.NewCipher(unhexT(t, c.Key))
		nonce := unhexT(t, c.Nonce)
		a, err := newCCM(b, len(nonce), c.Tag)
		if err != nil {
			t.Fatal(err)
		}
		got := a.Seal(nil, nonce, unhexT(t, c.PT), unhexT(t, c.AD))
		if hex.EncodeToString(got) != want[i] {
			t.Fatalf("case %d (%d-byte nonce, %d-byte tag): Seal = %x, OpenSSL %s", i, len(nonce), c.Tag, got, want[i])
		}
		if pt, err := a.Open(nil, nonce, got, unhexT(t, c.AD)); err != nil || hex.EncodeToString(pt) != c.PT {
			t.Fatalf("case %d: Open does not undo Seal: %v", i, err)
		}
	}
}
