package xts

import (
	"bufio"
	"encoding/hex"
	"math/big"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// vector is one known answer: key1||key2, the 128-bit tweak, plaintext and
// ciphertext. seqno is set when the source gave the tweak as a data unit
// sequence number that fits plain64 (then Encrypt(…, seqno) must match too).
type vector struct {
	name       string
	key, pt    []byte
	ct         []byte
	tweak      [16]byte
	seqno      uint64
	seqnoValid bool
}

// loadCryptoPP reads testdata/cryptopp-xts.txt (IEEE 1619-2007 Annex B plus
// Botan-generated vectors, in Crypto++'s test-vector format).
func loadCryptoPP(t *testing.T) []vector {
	t.Helper()
	f, err := os.Open("testdata/cryptopp-xts.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		vs      []vector
		fields  = map[string]string{}
		pending string // a field whose value continues on the next line
	)
	flush := func() {
		if fields["Test"] != "Encrypt" {
			fields = map[string]string{}
			return
		}
		v := vector{
			name: fields["Comment"],
			key:  decodeHex(t, fields["Key"]),
			pt:   decodeHex(t, fields["Plaintext"]),
			ct:   decodeHex(t, fields["Ciphertext"]),
		}
		iv := decodeHex(t, fields["IV"])
		if len(iv) != 16 {
			t.Fatalf("vector %q: IV of %d bytes", v.name, len(iv))
		}
		copy(v.tweak[:], iv)
		if v.name == "" {
			v.name = "cryptopp#" + strconv.Itoa(len(vs))
		}
		vs = append(vs, v)
		fields = map[string]string{}
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if pending != "" {
			cont := strings.HasSuffix(line, `\`)
			fields[pending] += strings.TrimSuffix(line, `\`)
			if !cont {
				pending = ""
			}
			continue
		}
		if strings.HasPrefix(line, "#") {
			continue
		}
		name, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		value = strings.TrimSpace(value)
		cont := strings.HasSuffix(value, `\`)
		fields[name] = strings.TrimSuffix(value, `\`)
		if cont {
			pending = name
		}
		if name == "Test" {
			flush()
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return vs
}

// loadNIST reads a CAVP XTSGenAES .rsp file, keeping the byte-aligned records.
// seqno selects the "data unit sequence number" form of the tweak.
func loadNIST(t *testing.T, path string, seqno bool) []vector {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var vs []vector
	var section string
	rec := map[string]string{}
	emit := func() {
		defer func() { rec = map[string]string{} }()
		if rec["COUNT"] == "" {
			return
		}
		bits, err := strconv.Atoi(rec["DataUnitLen"])
		if err != nil {
			t.Fatalf("%s: bad DataUnitLen %q", path, rec["DataUnitLen"])
		}
		if bits%8 != 0 {
			return // not byte-aligned: outside a byte-oriented API
		}
		v := vector{
			name: filepath.Base(path) + " " + section + " COUNT=" + rec["COUNT"],
			key:  decodeHex(t, rec["Key"]),
			pt:   decodeHex(t, rec["PT"]),
			ct:   decodeHex(t, rec["CT"]),
		}
		if seqno {
			n, ok := new(big.Int).SetString(rec["DataUnitSeqNumber"], 10)
			if !ok || n.BitLen() > 128 {
				t.Fatalf("%s: bad DataUnitSeqNumber %q", v.name, rec["DataUnitSeqNumber"])
			}
			be := n.FillBytes(make([]byte, 16))
			for i := range 16 {
				v.tweak[i] = be[15-i] // little-endian
			}
			if n.IsUint64() {
				v.seqno, v.seqnoValid = n.Uint64(), true
			}
		} else {
			copy(v.tweak[:], decodeHex(t, rec["i"]))
		}
		if len(v.pt)*8 != bits || len(v.ct) != len(v.pt) {
			t.Fatalf("%s: lengths disagree", v.name)
		}
		vs = append(vs, v)
	}
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "":
			emit()
		case strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "["):
			emit()
			section = line
		default:
			k, v, ok := strings.Cut(line, "=")
			if ok {
				rec[strings.TrimSpace(k)] = strings.TrimSpace(v)
			}
		}
	}
	emit()
	return vs
}

func decodeHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}

// allVectors returns every known-answer vector the package ships.
func allVectors(t *testing.T) []vector {
	vs := loadCryptoPP(t)
	if len(vs) != 500 {
		t.Fatalf("cryptopp-xts.txt: parsed %d vectors, want 500", len(vs))
	}
	for _, f := range []struct {
		path  string
		seqno bool
		want  int
	}{
		{"testdata/nist/tweak-XTSGenAES128.rsp", false, 800},
		{"testdata/nist/tweak-XTSGenAES256.rsp", false, 600},
		{"testdata/nist/seqno-XTSGenAES128.rsp", true, 800},
		{"testdata/nist/seqno-XTSGenAES256.rsp", true, 600},
	} {
		nv := loadNIST(t, f.path, f.seqno)
		if len(nv) != f.want {
			t.Fatalf("%s: parsed %d byte-aligned vectors, want %d", f.path, len(nv), f.want)
		}
		vs = append(vs, nv...)
	}
	return vs
}
