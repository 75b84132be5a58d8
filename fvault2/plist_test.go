package fvault2

import (
	"bytes"
	"strings"
	"testing"
)

func TestPlistValues(t *testing.T) {
	doc := `<?xml version="1.0"?>
<!-- IOKit writes no wrapper; a <plist> one is read too -->
<plist version="1.0"><dict ID="0">
  <key>s</key><string ID="1">a &amp; b</string>
  <key>n</key><integer size="64" ID="2">0xa000000</integer>
  <key>dec</key><integer>42</integer>
  <key>d</key><data ID="3">AAEC
    AwQ=</data>
  <key>empty</key><data></data>
  <key>yes</key><true/>
  <key>arr</key><array><reference IDREF="1"/><integer size="8">0xff</integer></array>
  <key>ref</key><reference IDREF="2"/>
  <key>later</key><reference IDREF="9"/>
  <key>nine</key><string ID="9">forward</string>
  <key>s</key><string>second s is not read</string>
</dict></plist>`
	p, err := parsePlist([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	r := p.root
	if s, ok := p.getString(r, "s"); !ok || s != "a & b" {
		t.Errorf("s = %q", s)
	}
	if n, ok := p.getInt(r, "n"); !ok || n != 167772160 {
		t.Errorf("n = %d", n)
	}
	if n, _ := p.getInt(r, "dec"); n != 42 {
		t.Errorf("dec = %d", n)
	}
	if d, ok := p.getData(r, "d"); !ok || !bytes.Equal(d, []byte{0, 1, 2, 3, 4}) {
		t.Errorf("d = %x", d)
	}
	if d, ok := p.getData(r, "empty"); !ok || len(d) != 0 {
		t.Errorf("empty = %x, %v", d, ok)
	}
	if v := p.get(r, "yes"); v == nil || v.kind != plBool || !v.bool {
		t.Errorf("yes = %+v", v)
	}
	if n, ok := p.getInt(r, "ref"); !ok || n != 167772160 {
		t.Errorf("ref = %d, %v", n, ok)
	}
	if s, _ := p.getString(r, "later"); s != "forward" {
		t.Errorf("forward reference = %q", s)
	}
	arr := p.getArray(r, "arr")
	if len(arr) != 2 || arr[0].str != "a & b" || arr[1].num != 255 {
		t.Errorf("arr = %+v", arr)
	}
	if _, ok := p.getString(r, "n"); ok {
		t.Error("an integer read as a string")
	}
	if p.get(r, "missing") != nil || p.get(arr[0], "x") != nil {
		t.Error("a lookup in the wrong place found something")
	}
}

func TestPlistRefused(t *testing.T) {
	for _, c := range []struct{ doc, want string }{
		{``, "empty"},
		{`<dict>`, "unclosed"},
		{`<dict><key>a</key></dict>`, "unexpected </dict>"},
		{`<dict><string>x</string></dict>`, "where a dict key belongs"},
		{`<dict><key>a</key><integer>0x</integer></dict>`, "malformed integer"},
		{`<dict><key>a</key><integer>-1</integer></dict>`, "malformed integer"},
		{`<dict><key>a</key><integer>010x</integer></dict>`, "malformed integer"},
		{`<dict><key>a</key><integer size="32">0x100000000</integer></dict>`, "too large for 32 bits"},
		{`<dict><key>a</key><integer size="7">1</integer></dict>`, "size"},
		{`<dict><key>a</key><data>!!!</data></dict>`, "base64"},
		{`<dict><key>a</key><reference/></dict>`, "without IDREF"},
		{`<dict><key>a</key><reference IDREF="5"/></dict>`, `ID "5"`},
		{`<dict ID="1"><key>a</key><string ID="1">x</string></dict>`, "twice"},
		{`<reference IDREF="0"/>`, "root is a reference"},
		{`<dict></dict><dict></dict>`, "after the root"},
		{`<dict><key>a</key><bogus/></dict>`, "unknown element"},
		{`<dict>text</dict>`, "text inside"},
		{`<string>a<b/></string>`, "inside <string>"},
		{`<dict><key>a</key><string>&foo;</string></dict>`, "plist"},
		{strings.Repeat("<array>", maxPlistDepth+2) + strings.Repeat("</array>", maxPlistDepth+2), "nested"},
		{"<array>" + strings.Repeat("<true/>", maxPlistValues+1) + "</array>", "values"},
		{"<string>" + strings.Repeat("x", maxPlistBytes) + "</string>", "at most"},
	} {
		if _, err := parsePlist([]byte(c.doc)); err == nil || !strings.Contains(err.Error(), c.want) {
			name := c.doc
			if len(name) > 60 {
				name = name[:60] + "..."
			}
			t.Errorf("%q: %v, want an error with %q", name, err, c.want)
		}
	}
}

// TestPlistSelfReference: a value that refers to itself resolves one step
// at a time; lookups through it end.
func TestPlistSelfReference(t *testing.T) {
	p, err := parsePlist([]byte(`<dict ID="0"><key>me</key><reference IDREF="0"/></dict>`))
	if err != nil {
		t.Fatal(err)
	}
	d := p.root
	for range 100 {
		d = p.get(d, "me")
	}
	if d != p.root {
		t.Error("the self reference does not lead back to the root")
	}
}

func TestUUID(t *testing.T) {
	u, err := parseUUID("33A76CAA-1481-4BC5-8D04-1AC1707C19C0")
	if err != nil || formatUUID(u) != sampleFamilyUUID {
		t.Errorf("%s, %v", formatUUID(u), err)
	}
	if u2, err := parseUUID("33a76caa14814bc58d041ac1707c19c0"); err != nil || u2 != u {
		t.Errorf("without dashes: %v", err)
	}
	for _, bad := range []string{"", "33A76CAA-1481-4BC5-8D04-1AC1707C19C", "33A76CAA-1481-4BC5-8D04-1AC1707C19CG", "33A76CAA1481-4BC5-8D04-1AC1707C19C0-", "x"} {
		if _, err := parseUUID(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestChecksum(t *testing.T) {
	loadSample(t)
	hdr := bytes.Clone(sampleParts.chunks[0].b[:512])
	if !checksumOK(hdr) {
		t.Fatal("the sample's PV header fails its checksum")
	}
	for _, b := range sampleParts.blocks {
		if !checksumOK(b) {
			t.Fatal("a decrypted metadata block of the sample fails its checksum")
		}
	}
	hdr[4] = 0xFE // the seed must be 0xFFFFFFFF
	if checksumOK(hdr) {
		t.Error("seed 0xFFFFFFFE accepted")
	}
	hdr[4] = 0xFF
	hdr[511] ^= 1
	if checksumOK(hdr) {
		t.Error("a flipped bit passes")
	}
}
