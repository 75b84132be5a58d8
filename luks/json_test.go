package luks

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

// The JSON text cryptsetup 2.6.1 wrote for a luksFormat then luksAddKey
// --key-slot 5 (pbkdf2), with a token added by hand whose description has
// the characters json-c escapes: marshal must give the same bytes back.
const cryptsetupJSON = `{"keyslots":{"0":{"type":"luks2","key_size":64,"af":{"type":"luks1","stripes":4000,"hash":"sha256"},"area":{"type":"raw","offset":"32768","size":"258048","encryption":"aes-xts-plain64","key_size":64},"kdf":{"type":"argon2id","time":8,"memory":32768,"cpus":2,"salt":"uXSx8tJ1BOakzeM6VQvxBbaM+ewdYIfKeDSgexb4uA4="}},"5":{"type":"luks2","key_size":64,"af":{"type":"luks1","stripes":4000,"hash":"sha512"},"area":{"type":"raw","offset":"290816","size":"258048","encryption":"aes-xts-plain64","key_size":64},"kdf":{"type":"pbkdf2","hash":"sha512","iterations":1000,"salt":"ZkyHyfUfPnxJcdgNFHCoYlnz5slgSPsSiE13YfP1KXA="}}},"tokens":{"0":{"type":"luks2-keyring","keyslots":["5"],"key_description":"my/key \"quoted\"\\\u0001"}},"segments":{"0":{"type":"crypt","offset":"16777216","size":"dynamic","iv_tweak":"0","encryption":"aes-xts-plain64","sector_size":4096}},"digests":{"0":{"type":"pbkdf2","keyslots":["0","5"],"segments":["0"],"hash":"sha256","iterations":271651,"salt":"sAyBCIar2nGkAcTg0P+D/FZZbhXg2s/YPWfMS8H+2gY=","digest":"WJaO6Z18mR6CZDWXXmWOmDg++EZoBM+JtlnIj/kGDEo="}},"config":{"json_size":"12288","keyslots_size":"16744448"}}`

func TestJSONRoundTrip(t *testing.T) {
	v, err := parseJSON([]byte(cryptsetupJSON))
	if err != nil {
		t.Fatal(err)
	}
	if got := v.marshal(); string(got) != cryptsetupJSON {
		t.Fatalf("marshal differs from json-c's output:\n got %s\nwant %s", got, cryptsetupJSON)
	}
	desc := v.get("tokens").get("0").get("key_description")
	if desc == nil || desc.s != "my/key \"quoted\"\\\x01" {
		t.Fatalf("escaped string decoded as %q", desc.s)
	}
	if k := v.get("keyslots").get("5").get("kdf").get("iterations"); k == nil || k.kind != jNumber || k.s != "1000" {
		t.Fatalf("number: %+v", k)
	}
}

// TestJSONGrammar: what json-c's non-strict tokener (cryptsetup's JSON
// reader) takes and refuses, so is it here. TestCryptsetupRules shows the
// same on headers against cryptsetup itself.
func TestJSONGrammar(t *testing.T) {
	for _, in := range []string{
		``, `{`, `{"a":1}x`, `{"a":1} x`, `{"a":1}}`, `{"a":-}`, `{"a":--1}`, `{"a":[1-2]}`, `{"a":+1}`, `{"a":.5}`, `{"a":0x10}`,
		`{"a":"\q"}`, `{"a":"\u12"}`, `{"a":"\u00zz"}`, `{"a":tru}`, `{"a":-NaN}`, `{"a":Inf}`, `{a:1}`, `{"a" 1}`, `{"a":}`,
		`[,]`, `[1,,2]`, `{,}`, `{"a":1,,"b":2}`, `[1 2]`, `{"a":1} /* c`, `{"a":1} / `, `{"a":"x`,
		"{\"a\":1\f}", "{\"a\":1\v}",
		strings.Repeat("[", maxJSONDepth+1) + strings.Repeat("]", maxJSONDepth+1),
		strings.Repeat("[", maxJSONDepth) + "1" + strings.Repeat("]", maxJSONDepth),
	} {
		if _, err := parseJSON([]byte(in)); err == nil {
			t.Errorf("parseJSON(%q) succeeded", in)
		}
	}
	for _, in := range []string{
		`{}`, `[]`, `{"a":[1,-2.5e+3,true,false,null,"\u00e9\ud83d\ude00\/"]}`, `{"a" : { } } `,
		`{"a":1,}`, `[1,]`, `{"a":01}`, `{"a":-01}`, `{"a":1.}`, `{"a":1e}`, `{"a":1e400}`, `{"a":99999999999999999999}`,
		`{"a":NaN}`, `{"a":nan}`, `{"a":Infinity}`, `{"a":-infinity}`, `{"a":TRUE}`, `{"a":False}`, `{"a":NULL}`,
		`{"a":"\ud800"}`, `{"a":"\udc00"}`, `{'a':'b"c'}`, "{\"a\":\"\x01\t\xff\"}",
		`{"a":1} /* c */ // d` + "\n", `{/* c */"a"/**/:1//x` + "\n}",
		strings.Repeat("[", maxJSONDepth) + strings.Repeat("]", maxJSONDepth),
		strings.Repeat("[", maxJSONDepth-1) + "1" + strings.Repeat("]", maxJSONDepth-1),
	} {
		if _, err := parseJSON([]byte(in)); err != nil {
			t.Errorf("parseJSON(%q): %v", in, err)
		}
	}

	// A repeated key: the last value, in the first's place; a name is a C
	// string; integers are written canonically, saturated; doubles as
	// written.
	v, err := parseJSON([]byte(`{"a":1,"b":2,"a":3,"c\u0000d":4,"n":[01,-0,99999999999999999999,-99999999999999999999,1.50,1e]}`))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(v.marshal()), `{"a":3,"b":2,"c":4,"n":[1,0,18446744073709551615,-9223372036854775808,1.50,1]}`; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	n := v.get("n").arr
	if !n[0].isInt() || n[4].isInt() || !n[5].dbl || n[2].int64Value() != math.MaxInt64 || n[4].intValue() != 1 {
		t.Errorf("number kinds and values: %+v", n)
	}
}

// TestJSONCValues: the conversions cryptsetup reads unchecked fields with.
func TestJSONCValues(t *testing.T) {
	for _, c := range []struct {
		in  string
		i64 int64
		i32 int32
	}{
		{`7`, 7, 7}, {`-1`, -1, -1}, {`4294967296`, 4294967296, math.MaxInt32}, {`-4294967296`, -4294967296, math.MinInt32},
		{`18446744073709551615`, math.MaxInt64, math.MaxInt32}, {`2.9`, 2, 2}, {`-2.9`, -2, -2}, {`1e300`, math.MaxInt64, math.MaxInt32},
		{`"12abc"`, 12, 12}, {`" +5"`, 5, 5}, {`"x"`, 0, 0}, {`true`, 1, 1}, {`null`, 0, 0}, {`[1]`, 0, 0}, {`NaN`, 0, 0},
	} {
		v, err := parseJSON([]byte(`{"v":` + c.in + `}`))
		if err != nil {
			t.Fatal(err)
		}
		if got := v.get("v"); got.int64Value() != c.i64 || got.intValue() != c.i32 {
			t.Errorf("%s: int64 %d, int %d; want %d, %d", c.in, got.int64Value(), got.intValue(), c.i64, c.i32)
		}
	}
	for _, c := range []struct {
		in string
		n  uint64
		ok bool
	}{
		{"12288", 12288, true}, {"+12288", 12288, true}, {" 12288", 12288, true}, {"\t12", 12, true}, {"-1", math.MaxUint64, true},
		{"12288 ", 0, false}, {"", 0, false}, {" ", 0, false}, {"1x", 0, false}, {"18446744073709551616", 0, false}, {"12\x00junk", 12, true},
	} {
		if n, ok := strToUint64(c.in); n != c.n || ok != c.ok {
			t.Errorf("strToUint64(%q) = %d, %v; want %d, %v", c.in, n, ok, c.n, c.ok)
		}
	}
	for _, c := range []struct {
		in string
		n  int
	}{{"0", 0}, {"31", 31}, {"007", 7}, {"", 0}, {"4294967296", 0}, {"4294967295", -1}, {"99999999999999999999", -1}} {
		if n := atoi(c.in); n != c.n {
			t.Errorf("atoi(%q) = %d, want %d", c.in, n, c.n)
		}
	}
	if nameOf(-1) != "4294967295" || nameOf(7) != "7" {
		t.Errorf("nameOf: %q %q", nameOf(-1), nameOf(7))
	}
}

func TestJSONEscapes(t *testing.T) {
	// json-c escapes ", \ and control bytes, and with NOSLASHESCAPE nothing else.
	got := appendJSONString(nil, "a\"b\\c/d\b\f\n\r\t\x00\x1f\x7f\xffé")
	want := `"a\"b\\c/d\b\f\n\r\t\u0000\u001f` + "\x7f\xffé" + `"`
	if !bytes.Equal(got, []byte(want)) {
		t.Fatalf("got %s\nwant %s", got, want)
	}
}

func TestJSONEdit(t *testing.T) {
	v := jobj(jmember{"a", jnum(1)}, jmember{"b", jarr(jstr("x"))}, jmember{"c", jobj()})
	c := v.clone()
	v.set("a", jstr("replaced")) // keeps its place, as json-c does
	v.set("d", jnum(18446744073709551615))
	v.del("c")
	v.get("b").arr[0].s = "changed"
	if got, want := string(v.marshal()), `{"a":"replaced","b":["changed"],"d":18446744073709551615}`; got != want {
		t.Fatalf("edited: %s, want %s", got, want)
	}
	if got, want := string(c.marshal()), `{"a":1,"b":["x"],"c":{}}`; got != want {
		t.Fatalf("clone changed with the original: %s, want %s", got, want)
	}
}
