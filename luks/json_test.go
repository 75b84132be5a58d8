package luks

import (
	"bytes"
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

func TestJSONRefuses(t *testing.T) {
	for _, in := range []string{
		``, `{`, `{"a":1,}`, `[1,]`, `{"a":1}x`, `{"a":1} `, `{"a":01}`, `{"a":1.}`, `{"a":-}`,
		`{"a":1,"a":2}`, `{"a":"\x01"}`, `{"a":"\q"}`, `{"a":"\ud800"}`, `{"a":"\u12"}`,
		`{'a':1}`, `{"a":tru}`, `{"a":NaN}`, `/* c */{}`,
		strings.Repeat("[", maxJSONDepth+2) + strings.Repeat("]", maxJSONDepth+2),
	} {
		if _, err := parseJSON([]byte(in)); err == nil {
			t.Errorf("parseJSON(%q) succeeded", in)
		}
	}
	for _, in := range []string{`{}`, `[]`, `{"a":[1,-2.5e+3,true,false,null,"\u00e9\ud83d\ude00\/"]}`, ` {"a" : { } } `} {
		if _, err := parseJSON([]byte(strings.TrimSpace(in))); err != nil {
			t.Errorf("parseJSON(%q): %v", in, err)
		}
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
