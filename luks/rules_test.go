package luks

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The rules cryptsetup 2.6.1 enforces when it loads a LUKS2 header, each
// shown by a header that breaks or bends one: an image cryptsetup made,
// its JSON edited and its checksums recomputed, as cryptsetup's own
// tests/generators do (and as anyone who can write an image can). For
// every case, cryptsetup itself is asked (luksDump: does it load?
// open --test-passphrase: does the passphrase open it?) and our answer
// must be the same: ReadHeader loads what luksDump loads, refuses the rest
// as damaged, naming the rule; TestPassphrase opens what cryptsetup opens.
// The case also says what it expects cryptsetup to answer, so a case that
// stopped testing what it claims (cryptsetup changed, or the edit missed)
// fails too.

// ruleBase is an image cryptsetup made, with its passphrases.
type ruleBase struct {
	img  []byte
	pass [][]byte // the passphrase of keyslot i, for the keyslots made with one
}

// Bases: "one" keyslot 0 (pbkdf2, 4096-byte sectors, a 1 MiB keyslots area,
// data at 2 MiB); "two": keyslots 0 and 1 with different passphrases;
// "s512": one with 512-byte sectors; "unbound": one, and keyslot 1 an
// unbound 512-bit key (luksAddKey --unbound); "reencrypt": one, with a
// reencryption initialised (reencrypt --init-only: a new keyslot 1 with the
// same passphrase, a reencrypt keyslot 2, backup segments 1 and 2).
func makeRuleBase(t *testing.T, dir, name string) *ruleBase {
	img := filepath.Join(dir, name)
	sparseFile(t, img, 2<<20+64<<10)
	b := &ruleBase{pass: [][]byte{[]byte("pass zero " + name), []byte("pass one " + name)}}
	pf := []string{writeFile(t, dir, name+".p0", b.pass[0]), writeFile(t, dir, name+".p1", b.pass[1])}
	args := append([]string{"luksFormat", "--batch-mode", "--type", "luks2", "--key-file", pf[0], "--luks2-keyslots-size", "1m"}, csPBKDF2...)
	if name == "s512" {
		args = append(args, "--sector-size", "512")
	}
	cs(t, append(args, img)...)
	switch name {
	case "two":
		cs(t, append(append([]string{"luksAddKey", "--batch-mode", "--key-file", pf[0]}, csPBKDF2...), img, pf[1])...)
	case "unbound":
		cs(t, append(append([]string{"luksAddKey", "--batch-mode", "--unbound", "--key-size", "512", "--key-file", pf[0]}, csPBKDF2...), img, pf[1])...)
	case "reencrypt":
		cs(t, append(append([]string{"reencrypt", "--init-only", "--batch-mode", "--key-file", pf[0], "--key-slot", "0"}, csPBKDF2...), img)...)
	}
	var err error
	if b.img, err = os.ReadFile(img); err != nil {
		t.Fatal(err)
	}
	return b
}

// editImage returns a copy of img with each LUKS2 copy's JSON edited
// (edit on the tree, or raw on the text), its binary header edited (bin),
// and its checksum recomputed. primaryOnly leaves the secondary as it was.
func editImage(t *testing.T, img []byte, edit func(m *jvalue), raw func(string) string, bin func(b []byte, secondary bool), primaryOnly bool) []byte {
	t.Helper()
	b := bytes.Clone(img)
	size := binary.BigEndian.Uint64(b[offHdrSize:])
	for i, off := range []uint64{0, size} {
		if primaryOnly && i == 1 {
			break
		}
		c := b[off : off+size]
		area := c[binHeaderSize:]
		text := area[:bytes.IndexByte(area, 0)]
		if edit != nil {
			meta, err := parseJSON(text)
			if err != nil {
				t.Fatal(err)
			}
			edit(meta)
			text = meta.marshal()
		}
		if raw != nil {
			text = []byte(raw(string(text)))
		}
		text = bytes.Clone(text)
		clear(area)
		copy(area, text)
		if bin != nil {
			bin(c[:binHeaderSize], i == 1)
		}
		newHash := checksumHash(cstring(c[offCsumAlg : offCsumAlg+csumAlgLen]))
		if newHash == nil {
			newHash = hashByName("sha256") // an algorithm nobody has: the checksum cannot be right anyway
		}
		clear(c[offChecksum : offChecksum+checksumLen])
		copy(c[offChecksum:], headerChecksum(newHash, c[:binHeaderSize], area))
	}
	return b
}

// csRun runs cryptsetup on a fresh copy of img (it repairs what it reads)
// and reports whether it exited 0.
func csRun(t *testing.T, dir string, img []byte, args ...string) (bool, string) {
	t.Helper()
	path := filepath.Join(dir, "img")
	if err := os.WriteFile(path, img, 0o600); err != nil {
		t.Fatal(err)
	}
	// Not a timed assertion: a guard against a cryptsetup that hangs.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "cryptsetup", append(args, path)...)
	out, err := cmd.CombinedOutput()
	return err == nil, string(out)
}

// ruleCase is one header. Unless load is set, cryptsetup and we refuse it
// (we as damaged, with damaged in the message). With load, the passphrase
// of keyslot pass (with --key-slot slot when slot >= 0) opens it for
// cryptsetup and for TestPassphrase exactly when open is set.
type ruleCase struct {
	name    string
	base    string // "" is "one"
	edit    func(m *jvalue)
	raw     func(text string) string
	bin     func(b []byte, secondary bool)
	primary bool // edit the primary copy only

	load    bool
	damaged string // !load: what our error says
	// refusedAs: !load, and the header is sound but of a kind this
	// package does not read (a future LUKS version): not damaged.
	refusedAs Feature

	open bool
	pass int  // the passphrase of this keyslot
	slot *int // --key-slot

	// unsupported: the header loads but its data cannot be served
	// (Supported's feature); csOpens: cryptsetup with device-mapper can.
	unsupported Feature
	csOpens     bool

	// anyPass: cryptsetup 2.6.1 opens this header with any passphrase (its
	// PBKDF2 digest check returns success when the digest's salt or value
	// has the wrong length, or its hash is unknown): it is checked to do
	// so with a wrong one, and we must refuse.
	anyPass bool
	// noCsOpen: cryptsetup's open is not run (it crashes or runs for
	// hours); why, for the reader.
	noCsOpen string
}

func TestCryptsetupRules(t *testing.T) {
	needCryptsetup(t)
	cases := ruleCases()
	dir := t.TempDir()
	bases := map[string]*ruleBase{}
	var mu sync.Mutex
	base := func(name string) *ruleBase {
		mu.Lock()
		defer mu.Unlock()
		if bases[name] == nil {
			bases[name] = makeRuleBase(t, dir, name)
		}
		return bases[name]
	}
	seen := map[string]bool{}
	for _, c := range cases {
		if seen[c.name] {
			t.Fatalf("two cases named %s", c.name)
		}
		seen[c.name] = true
		if c.base == "" {
			c.base = "one"
		}
		b := base(c.base)
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			testRule(t, c, b)
		})
	}
}

func testRule(t *testing.T, c ruleCase, b *ruleBase) {
	dir := t.TempDir()
	img := editImage(t, b.img, c.edit, c.raw, c.bin, c.primary)
	csLoad, csOut := csRun(t, dir, img, "luksDump")
	if csLoad != c.load {
		t.Fatalf("cryptsetup luksDump: load %v, the case expects %v:\n%s", csLoad, c.load, csOut)
	}
	h, err := ReadHeader(bytes.NewReader(img), int64(len(img)))
	if !c.load {
		if err == nil {
			t.Fatalf("ReadHeader loads a header cryptsetup refuses")
		}
		if c.refusedAs != "" {
			var ue *UnsupportedError
			if !errors.As(err, &ue) || ue.Feature != c.refusedAs || errors.Is(err, ErrCorrupt) {
				t.Fatalf("ReadHeader: %v\nwant not supported: %s", err, c.refusedAs)
			}
			return
		}
		if !errors.Is(err, ErrCorrupt) || errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), c.damaged) {
			t.Fatalf("ReadHeader: %v\nwant a damaged-header error naming %q", err, c.damaged)
		}
		return
	}
	if err != nil {
		t.Fatalf("ReadHeader refuses a header cryptsetup loads: %v", err)
	}

	// What the data needs.
	sup := h.Supported()
	if c.unsupported == "" {
		if sup != nil {
			t.Fatalf("Supported: %v", sup)
		}
	} else {
		var ue *UnsupportedError
		if !errors.As(sup, &ue) || ue.Feature != c.unsupported || ue.CryptsetupOpens != c.csOpens || errors.Is(sup, ErrCorrupt) {
			t.Fatalf("Supported: %#v, want %s with CryptsetupOpens %v", sup, c.unsupported, c.csOpens)
		}
		if _, _, err := h.Unlock(context.Background(), bytes.NewReader(img), b.pass[c.pass], UnlockOptions{}); !errors.Is(err, ErrUnsupported) {
			t.Fatalf("Unlock of an unsupported volume: %v", err)
		}
	}

	// The passphrase, as open --test-passphrase checks it.
	pf := writeFile(t, dir, "pass", b.pass[c.pass])
	args := []string{"open", "--test-passphrase", "--key-file", pf}
	pick := c.slot
	if pick != nil {
		args = append(args, "--key-slot", strconv.Itoa(*pick))
	}
	switch {
	case c.noCsOpen != "":
		t.Logf("cryptsetup open not run: %s", c.noCsOpen)
	case c.anyPass:
		wrong := writeFile(t, dir, "wrong", []byte("not the passphrase"))
		if ok, out := csRun(t, dir, img, append(args[:3:3], append([]string{wrong}, args[4:]...)...)...); !ok {
			t.Fatalf("cryptsetup was expected to open this header with any passphrase, and does not:\n%s", out)
		}
	default:
		if ok, out := csRun(t, dir, img, args...); ok != c.open {
			t.Fatalf("cryptsetup open --test-passphrase: %v, the case expects %v:\n%s", ok, c.open, out)
		}
	}
	hdr := bytes.NewReader(img)
	slots, cerr := h.CheckTestPassphrase(pick)
	var check *PassphraseCheck
	err = cerr
	if cerr == nil {
		check, err = h.TestPassphrase(context.Background(), hdr, b.pass[c.pass], UnlockOptions{Keyslots: slots})
	}
	if (err == nil) != c.open {
		t.Fatalf("TestPassphrase: %v (CheckTestPassphrase: %v), cryptsetup opens: %v", err, cerr, c.open)
	}
	if err != nil {
		if c.open || errors.Is(err, ErrWrongPassphrase) {
			return
		}
		// Refused for a reason: a typed one.
		var ue *UnsupportedError
		var ce *CorruptError
		var uk *UnusableKeyslotsError
		if !errors.As(err, &ue) && !errors.As(err, &ce) && !errors.As(err, &uk) && !errors.Is(err, ErrNoKeyslot) {
			t.Fatalf("TestPassphrase refuses with an untyped error: %v", err)
		}
		return
	}
	defer check.Wipe()
	if pick != nil && check.Keyslot != *pick {
		t.Fatalf("keyslot %d opened, %d was picked", check.Keyslot, *pick)
	}
	var ue *UnsupportedError
	switch {
	case c.unsupported == "" && check.Unservable != nil && !errors.As(check.Unservable, &ue):
		t.Fatalf("Unservable: %v", check.Unservable)
	case c.unsupported == "" && check.Unservable != nil && ue.Feature != FeatureUnboundKey:
		t.Fatalf("Unservable: %v, and the volume is supported", check.Unservable)
	case c.unsupported != "" && check.Unservable == nil:
		t.Fatalf("no Unservable on an unsupported volume")
	}
	// The key is the one the digest checks: so is the whole point of a
	// passphrase check. Unlock agrees where the data can be served.
	if check.Unservable == nil {
		key, slot, err := h.Unlock(context.Background(), hdr, b.pass[c.pass], UnlockOptions{Keyslots: slots})
		if err != nil || slot != check.Keyslot || !bytes.Equal(key, check.Key) {
			t.Fatalf("Unlock: keyslot %d, %v; TestPassphrase opened keyslot %d", slot, err, check.Keyslot)
		}
		if err := h.VerifyKey(key, nil); err != nil {
			t.Fatalf("VerifyKey: %v", err)
		}
	}
}

// Shorthands for the cases.
func ks(m *jvalue, id string) *jvalue  { return m.get("keyslots").get(id) }
func seg(m *jvalue, id string) *jvalue { return m.get("segments").get(id) }
func dig(m *jvalue, id string) *jvalue { return m.get("digests").get(id) }
func cfg(m *jvalue) *jvalue            { return m.get("config") }
func raw(text string) *jvalue          { v, _ := parseJSON([]byte(text)); return v }
func jint(n int64) *jvalue             { return &jvalue{kind: jNumber, s: strconv.FormatInt(n, 10)} }
func renamed(obj *jvalue, from, to string) {
	for i := range obj.obj {
		if obj.obj[i].key == from {
			obj.obj[i].key = to
		}
	}
}

// withX adds a member "x" holding text (any JSON json-c may read) to the
// top object, written as is.
func withX(text string) func(string) string {
	return func(s string) string { return s[:len(s)-1] + `,"x":` + text + "}" }
}

func ruleCases() []ruleCase {
	u64max := strconv.FormatUint(math.MaxUint64, 10)
	cases := []ruleCase{
		// The JSON area (cryptsetup reads it with json-c, non-strict).
		{name: "json-area-leading-space", raw: func(s string) string { return " " + s[:len(s)-1] }, damaged: "does not start with '{'"},
		{name: "json-area-trailing-space", raw: func(s string) string { return s + " \t\r\n/* c */ // d\n" }, load: true, open: true},
		{name: "json-area-trailing-byte", raw: func(s string) string { return s + " x" }, damaged: "after the value"},
		{name: "json-area-trailing-brace", raw: func(s string) string { return s + "}" }, damaged: "after the value"},
		{name: "json-area-empty-object", raw: func(s string) string { return "{}" }, damaged: "no \"config\" section"},
		{name: "json-comment", raw: withX(`/* c */ 1 // d` + "\n"), load: true, open: true},
		{name: "json-trailing-commas", raw: withX(`[1,{"a":1,},]`), load: true, open: true},
		{name: "json-empty-trailing-comma", raw: withX(`[,]`), damaged: "unexpected byte"},
		{name: "json-double-comma", raw: withX(`[1,,2]`), damaged: "unexpected byte"},
		{name: "json-single-quotes", raw: withX(`{'a':'b"c'}`), load: true, open: true},
		{name: "json-nan-infinity", raw: withX(`[nan,NaN,Infinity,-infinity]`), load: true, open: true},
		{name: "json-minus-nan", raw: withX(`-NaN`), damaged: "malformed number"},
		{name: "json-inf", raw: withX(`Inf`), damaged: "unexpected byte"},
		{name: "json-number-forms", raw: withX(`[01,-01,1.,1e,01.5,1E+2,1e400,99999999999999999999999]`), load: true, open: true},
		{name: "json-plus-number", raw: withX(`+1`), damaged: "unexpected byte"},
		{name: "json-leading-dot", raw: withX(`.5`), damaged: "unexpected byte"},
		{name: "json-number-minus-minus", raw: withX(`--1`), damaged: "malformed number"},
		{name: "json-number-then-minus", raw: withX(`[1-2]`), damaged: "malformed number"},
		{name: "json-hex", raw: withX(`0x10`), damaged: "malformed number"},
		{name: "json-literals-any-case", raw: withX(`[TRUE,False,NULL]`), load: true, open: true},
		{name: "json-short-literal", raw: withX(`tru`), damaged: "unexpected byte"},
		{name: "json-raw-control-bytes", raw: withX("\"a\x01\tb\x7f\""), load: true, open: true},
		{name: "json-invalid-utf8", raw: withX("\"a\xff\xc3b\""), load: true, open: true},
		{name: "json-lone-surrogates", raw: withX(`["\ud800\u0041","\udc00"]`), load: true, open: true},
		{name: "json-unknown-escape", raw: withX(`"\q"`), damaged: "unknown escape"},
		{name: "json-short-u-escape", raw: withX(`"\u00zz"`), damaged: "malformed \\u escape"},
		{name: "json-unquoted-key", raw: withX(`{a:1}`), damaged: "want an object key"},
		{name: "json-depth-32", raw: withX(strings.Repeat("[", 30) + "1" + strings.Repeat("]", 30)), load: true, open: true},
		{name: "json-depth-33", raw: withX(strings.Repeat("[", 31) + "1" + strings.Repeat("]", 31)), damaged: "nested deeper than 32"},
		{name: "json-duplicate-key-last-wins", raw: func(s string) string {
			return strings.Replace(s, `"json_size":"12288"`, `"json_size":"4096","json_size":"12288"`, 1)
		}, load: true, open: true},
		{name: "json-duplicate-key-last-bad", raw: func(s string) string {
			return strings.Replace(s, `"json_size":"12288"`, `"json_size":"12288","json_size":"4096"`, 1)
		}, damaged: "json_size 4096"},
		{name: "json-nul-escape-in-name", raw: func(s string) string {
			// json-c names are C strings: "0\u0000x" is keyslot "0".
			return strings.Replace(s, `{"keyslots":{"0":`, `{"keyslots":{"0\u0000x":`, 1)
		}, load: true, open: true},

		// Sections.
		{name: "top-extra-member", raw: withX(`{"anything":[]}`), load: true, open: true},
		{name: "keyslots-not-object", edit: func(m *jvalue) { m.set("keyslots", raw(`[]`)) }, damaged: `"keyslots" section is`},
		{name: "tokens-not-object", edit: func(m *jvalue) { m.set("tokens", jint(42)) }, damaged: `"tokens" section is`},
		{name: "digests-missing", edit: func(m *jvalue) { m.del("digests") }, damaged: `no "digests" section`},
		{name: "segments-not-object", edit: func(m *jvalue) { m.set("segments", jstr("hi")) }, damaged: `"segments" section is`},
		{name: "config-missing", edit: func(m *jvalue) { m.del("config") }, damaged: `no "config" section`},

		// config.requirements.
		{name: "requirements-not-object", edit: func(m *jvalue) { cfg(m).set("requirements", jstr("x")) }, damaged: `"requirements" is a string`},
		{name: "mandatory-not-array", edit: func(m *jvalue) { cfg(m).set("requirements", raw(`{"mandatory":"x"}`)) }, damaged: `"mandatory" is a string`},
		{name: "mandatory-not-strings", edit: func(m *jvalue) { cfg(m).set("requirements", raw(`{"mandatory":[1]}`)) }, damaged: `"mandatory"[0] is a number`},
		{name: "requirements-empty", edit: func(m *jvalue) { cfg(m).set("requirements", raw(`{"mandatory":[],"optional":"x"}`)) }, load: true, open: true},
		{name: "requirement-unknown", edit: func(m *jvalue) { cfg(m).set("requirements", raw(`{"mandatory":["frobnicate"]}`)) },
			load: true, open: true, unsupported: FeatureRequirement},
		{name: "requirement-offline-reencrypt", edit: func(m *jvalue) { cfg(m).set("requirements", raw(`{"mandatory":["offline-reencrypt"]}`)) },
			load: true, open: true, unsupported: FeatureReencryption},
		{name: "requirement-two-online-reencrypt", edit: func(m *jvalue) {
			cfg(m).set("requirements", raw(`{"mandatory":["online-reencrypt-v2","online-reencrypt-v3"]}`))
		}, damaged: "2 online reencryption requirements"},
		{name: "requirement-online-reencrypt-alone", edit: func(m *jvalue) { cfg(m).set("requirements", raw(`{"mandatory":["online-reencrypt-v2"]}`)) },
			damaged: "without its backup-final"},

		// Tokens.
		{name: "token", edit: func(m *jvalue) {
			m.get("tokens").set("0", raw(`{"type":"luks2-keyring","keyslots":["0"],"key_description":"k"}`))
		}, load: true, open: true},
		{name: "token-unknown-type-id-31", edit: func(m *jvalue) { m.get("tokens").set("31", raw(`{"type":"frob","keyslots":[]}`)) }, load: true, open: true},
		{name: "token-id-99", edit: func(m *jvalue) { m.get("tokens").set("99", raw(`{"type":"frob","keyslots":["0"]}`)) },
			load: true, open: true, noCsOpen: "cryptsetup 2.6.1 aborts on a token ID above 31 (an assertion in token_is_blocked)"},
		{name: "token-type-empty", edit: func(m *jvalue) { m.get("tokens").set("0", raw(`{"type":"","keyslots":["0"]}`)) }, damaged: `token "0": "type" is empty`},
		{name: "token-type-missing", edit: func(m *jvalue) { m.get("tokens").set("0", raw(`{"keyslots":["0"]}`)) }, damaged: `token "0" has no "type"`},
		{name: "token-keyslot-missing", edit: func(m *jvalue) { m.get("tokens").set("0", raw(`{"type":"x","keyslots":["3"]}`)) }, damaged: `names keyslot "3"`},
		{name: "token-keyslots-missing", edit: func(m *jvalue) { m.get("tokens").set("0", raw(`{"type":"x"}`)) }, damaged: `has no "keyslots"`},
		{name: "token-keyslots-number", edit: func(m *jvalue) { m.get("tokens").set("0", raw(`{"type":"x","keyslots":[0]}`)) }, damaged: `"keyslots"[0] is a number`},
		{name: "token-name", edit: func(m *jvalue) { m.get("tokens").set("a", raw(`{"type":"x","keyslots":[]}`)) }, damaged: `token "a": the name is not a number`},
		{name: "token-not-object", edit: func(m *jvalue) { m.get("tokens").set("0", jint(5)) }, damaged: `token "0" has no "type"`},

		// Digests.
		{name: "digest-type-empty", edit: func(m *jvalue) { dig(m, "0").set("type", jstr("")) }, damaged: `digest "0": "type" is empty`},
		{name: "digest-type-number", edit: func(m *jvalue) { dig(m, "0").set("type", jint(1)) }, damaged: `digest "0": "type" is a number`},
		{name: "digest-type-unknown", edit: func(m *jvalue) { dig(m, "0").set("type", jstr("hmac")) }, load: true},
		{name: "digest-keyslot-missing", edit: func(m *jvalue) { dig(m, "0").set("keyslots", raw(`["0","5"]`)) }, damaged: `names keyslot "5"`},
		{name: "digest-segment-missing", edit: func(m *jvalue) { dig(m, "0").set("segments", raw(`["0","5"]`)) }, damaged: `names segment "5"`},
		{name: "digest-keyslots-not-array", edit: func(m *jvalue) { dig(m, "0").set("keyslots", jstr("0")) }, damaged: `"keyslots" is a string`},
		{name: "digest-segments-number", edit: func(m *jvalue) { dig(m, "0").set("segments", raw(`[0]`)) }, damaged: `"segments"[0] is a number`},
		{name: "digest-name", edit: func(m *jvalue) { renamed(m.get("digests"), "0", "d") }, damaged: `digest "d": the name is not a number`},
		{name: "digest-unused", edit: func(m *jvalue) {
			d := dig(m, "0").clone()
			d.set("keyslots", raw(`[]`))
			d.set("segments", raw(`[]`))
			m.get("digests").set("1", d)
		}, load: true, open: true},
		{name: "digest-name-01", edit: func(m *jvalue) { renamed(m.get("digests"), "0", "01") }, load: true},
		{name: "digest-name-99", edit: func(m *jvalue) { renamed(m.get("digests"), "0", "99") }, load: true, open: true},
		{name: "digest-iterations-0", edit: func(m *jvalue) { dig(m, "0").set("iterations", jint(0)) }, load: true},
		{name: "digest-iterations-string", edit: func(m *jvalue) { dig(m, "0").set("iterations", jstr(dig(m, "0").get("iterations").s)) }, load: true, open: true},
		{name: "digest-salt-missing", edit: func(m *jvalue) { dig(m, "0").del("salt") }, load: true},
		{name: "digest-salt-not-base64", edit: func(m *jvalue) { dig(m, "0").set("salt", jstr("!!!")) }, load: true},
		{name: "digest-truncated-to-20", edit: func(m *jvalue) {
			d := dig(m, "0")
			v, _ := base64.StdEncoding.DecodeString(d.get("digest").s)
			d.set("digest", jstr(base64.StdEncoding.EncodeToString(v[:20])))
		}, load: true, open: true},
		{name: "digest-hash-unknown-20", edit: func(m *jvalue) {
			d := dig(m, "0")
			d.set("hash", jstr("frob"))
			d.set("digest", jstr(base64.StdEncoding.EncodeToString(make([]byte, 20))))
		}, load: true},
		{name: "digest-salt-short", edit: func(m *jvalue) { dig(m, "0").set("salt", jstr("AAAA")) }, load: true, anyPass: true},
		{name: "digest-short", edit: func(m *jvalue) { dig(m, "0").set("digest", jstr("AAAA")) }, load: true, anyPass: true},
		{name: "digest-25-bytes", edit: func(m *jvalue) { dig(m, "0").set("digest", jstr(base64.StdEncoding.EncodeToString(make([]byte, 25)))) },
			load: true, anyPass: true},
		{name: "digest-value-missing", edit: func(m *jvalue) { dig(m, "0").del("digest") }, load: true, anyPass: true},
		{name: "digest-hash-unknown", edit: func(m *jvalue) { dig(m, "0").set("hash", jstr("frob")) }, load: true, anyPass: true},

		// Segments.
		{name: "segment-type-missing", edit: func(m *jvalue) { seg(m, "0").del("type") }, damaged: `segment "0" has no "type"`},
		{name: "segment-type-empty", edit: func(m *jvalue) { seg(m, "0").set("type", jstr("")) }, damaged: `segment "0": "type" is empty`},
		{name: "segment-type-unknown", edit: func(m *jvalue) { seg(m, "0").set("type", jstr("frob")) }, load: true, open: true, unsupported: FeatureSegmentType},
		{name: "segment-type-linear", edit: func(m *jvalue) { seg(m, "0").set("type", jstr("linear")) }, load: true, open: true, unsupported: FeatureSegmentType},
		{name: "segment-offset-missing", edit: func(m *jvalue) { seg(m, "0").del("offset") }, damaged: `segment "0" has no "offset"`},
		{name: "segment-offset-plus", edit: func(m *jvalue) { seg(m, "0").set("offset", jstr("+2097152")) }, damaged: "not a decimal number"},
		{name: "segment-offset-unaligned", edit: func(m *jvalue) { seg(m, "0").set("offset", jstr("2097153")) }, damaged: "offset 2097153 is not a multiple of 512"},
		{name: "segment-offset-0", edit: func(m *jvalue) { seg(m, "0").set("offset", jstr("0")) }, load: true, open: true},
		{name: "segment-offset-in-keyslots", edit: func(m *jvalue) { seg(m, "0").set("offset", jstr("1048576")) }, damaged: "does not fit between"},
		{name: "segment-offset-huge", edit: func(m *jvalue) { seg(m, "0").set("offset", jstr(strconv.FormatUint(math.MaxUint64-4095, 10))) }, load: true, open: true},
		{name: "segment-size-missing", edit: func(m *jvalue) { seg(m, "0").del("size") }, damaged: `segment "0" has no "size"`},
		{name: "segment-size-0", edit: func(m *jvalue) { seg(m, "0").set("size", jstr("0")) }, damaged: `segment "0": size 0`},
		{name: "segment-size-unaligned", edit: func(m *jvalue) { seg(m, "0").set("size", jstr("513")) }, damaged: "size 513 is not a multiple of 512"},
		{name: "segment-size-not-sectors", edit: func(m *jvalue) { seg(m, "0").set("size", jstr("512")) }, damaged: "size 512 is not a multiple of the 4096-byte sector"},
		{name: "segment-size-max", edit: func(m *jvalue) { seg(m, "0").set("size", jstr(strconv.FormatUint(math.MaxUint64-4095, 10))) }, load: true, open: true},
		{name: "segment-size-max-512", base: "s512", edit: func(m *jvalue) { seg(m, "0").set("size", jstr(strconv.FormatUint(math.MaxUint64-511, 10))) }, load: true, open: true},
		{name: "segment-size-overflow", edit: func(m *jvalue) { seg(m, "0").set("size", jstr("18446744073709551616")) }, damaged: "beyond 64 bits"},
		{name: "segment-size-negative", edit: func(m *jvalue) { seg(m, "0").set("size", jstr("-4096")) }, damaged: "not a decimal number"},
		{name: "segment-iv-tweak-missing", edit: func(m *jvalue) { seg(m, "0").del("iv_tweak") }, damaged: `has no "iv_tweak"`},
		{name: "segment-iv-tweak-negative", edit: func(m *jvalue) { seg(m, "0").set("iv_tweak", jstr("-1")) }, damaged: "not a decimal number"},
		{name: "segment-iv-tweak-max", edit: func(m *jvalue) { seg(m, "0").set("iv_tweak", jstr(u64max)) }, load: true, open: true},
		{name: "segment-encryption-missing", edit: func(m *jvalue) { seg(m, "0").del("encryption") }, damaged: `has no "encryption"`},
		{name: "segment-encryption-empty", edit: func(m *jvalue) { seg(m, "0").set("encryption", jstr("")) }, damaged: `"encryption" is empty`},
		{name: "segment-encryption-nul", edit: func(m *jvalue) { seg(m, "0").set("encryption", jstr("\x00aes-xts-plain64")) }, damaged: `"encryption" is empty`},
		{name: "segment-encryption-serpent", edit: func(m *jvalue) { seg(m, "0").set("encryption", jstr("serpent-xts-plain64")) },
			load: true, open: true, unsupported: FeatureCipher, csOpens: true},
		{name: "segment-encryption-garbage", edit: func(m *jvalue) { seg(m, "0").set("encryption", jstr("frobnicate")) },
			load: true, open: true, unsupported: FeatureCipher},
		{name: "segment-sector-missing", edit: func(m *jvalue) { seg(m, "0").del("sector_size") }, damaged: `has no "sector_size"`},
		{name: "segment-sector-string", edit: func(m *jvalue) { seg(m, "0").set("sector_size", jstr("4096")) }, damaged: `"sector_size" is a string`},
		{name: "segment-sector-float", edit: func(m *jvalue) { seg(m, "0").set("sector_size", &jvalue{kind: jNumber, dbl: true, s: "4096.0"}) }, damaged: "a fraction or exponent"},
		{name: "segment-sector-0", edit: func(m *jvalue) { seg(m, "0").set("sector_size", jint(0)) }, damaged: "sector size 0"},
		{name: "segment-sector-1000", edit: func(m *jvalue) { seg(m, "0").set("sector_size", jint(1000)) }, damaged: "sector size 1000"},
		{name: "segment-sector-2^32", edit: func(m *jvalue) { seg(m, "0").set("sector_size", jint(1<<32)) }, damaged: "not in 0..4294967295"},
		{name: "segment-sector-8192", edit: func(m *jvalue) { seg(m, "0").set("sector_size", jint(8192)) }, load: true, open: true, unsupported: FeatureSectorSize},
		{name: "segment-sector-1536", edit: func(m *jvalue) {
			seg(m, "0").set("sector_size", jint(1536))
		}, load: true, open: true, unsupported: FeatureSectorSize},
		{name: "segment-integrity", edit: func(m *jvalue) {
			seg(m, "0").set("integrity", raw(`{"type":"hmac(sha256)","journal_encryption":"none","journal_integrity":"none"}`))
		}, load: true, open: true, unsupported: FeatureIntegrity, csOpens: true},
		{name: "segment-integrity-partial", edit: func(m *jvalue) { seg(m, "0").set("integrity", raw(`{"type":"hmac(sha256)"}`)) }, damaged: `has no "journal_encryption"`},
		{name: "segment-integrity-not-object", edit: func(m *jvalue) { seg(m, "0").set("integrity", jstr("hmac(sha256)")) }, damaged: `"integrity" is a string`},
		{name: "segment-flags-string", edit: func(m *jvalue) { seg(m, "0").set("flags", jstr("x")) }, damaged: `"flags" is a string`},
		{name: "segment-flags-number", edit: func(m *jvalue) { seg(m, "0").set("flags", raw(`[1]`)) }, damaged: `"flags"[0] is a number`},
		{name: "segment-flag-unknown", edit: func(m *jvalue) { seg(m, "0").set("flags", raw(`["frob"]`)) },
			load: true, open: true, unsupported: FeatureSegmentFlag, csOpens: true},
		{name: "segment-backup-only", edit: func(m *jvalue) { seg(m, "0").set("flags", raw(`["backup-final"]`)) }, damaged: "no data segment, only backup"},
		{name: "segment-without-digest", edit: func(m *jvalue) { dig(m, "0").set("segments", raw(`[]`)) }, damaged: "no digest covers this crypt segment"},
		{name: "segments-empty", edit: func(m *jvalue) { m.set("segments", raw(`{}`)); dig(m, "0").set("segments", raw(`[]`)) }, damaged: "no segment"},
		{name: "segment-name-01", edit: func(m *jvalue) { renamed(m.get("segments"), "0", "01"); dig(m, "0").set("segments", raw(`["01"]`)) }, damaged: "no segment 0"},
		{name: "segment-name-1-alone", edit: func(m *jvalue) { renamed(m.get("segments"), "0", "1"); dig(m, "0").set("segments", raw(`["1"]`)) }, damaged: "no segment 0"},
		{name: "segment-name", edit: func(m *jvalue) { renamed(m.get("segments"), "0", "x"); dig(m, "0").set("segments", raw(`["x"]`)) }, damaged: `segment "x": the name is not a number`},
		{name: "segments-unknown-second", edit: func(m *jvalue) {
			// cryptsetup's generate-luks2-segment-two: a second segment of a
			// type nobody knows, without a digest.
			seg(m, "0").set("size", jstr("4096"))
			m.get("segments").set("1", raw(`{"type":"some","offset":"2101248","size":"dynamic"}`))
		}, load: true, open: true, unsupported: FeatureSegments},
		{name: "segments-crypt-second", edit: func(m *jvalue) {
			seg(m, "0").set("size", jstr("4096"))
			s := seg(m, "0").clone()
			s.set("offset", jstr("2101248"))
			s.set("size", jstr("dynamic"))
			m.get("segments").set("1", s)
			dig(m, "0").set("segments", raw(`["0","1"]`))
		}, load: true, open: true, unsupported: FeatureSegments},
		{name: "segments-crypt-second-without-digest", edit: func(m *jvalue) {
			seg(m, "0").set("size", jstr("4096"))
			s := seg(m, "0").clone()
			s.set("offset", jstr("2101248"))
			s.set("size", jstr("dynamic"))
			m.get("segments").set("1", s)
		}, damaged: `segment "1": no digest`},
		{name: "segments-both-dynamic", edit: func(m *jvalue) {
			m.get("segments").set("1", raw(`{"type":"some","offset":"2101248","size":"dynamic"}`))
		}, damaged: "only the last data segment may have a \"dynamic\" size"},
		{name: "segments-overlap", edit: func(m *jvalue) {
			seg(m, "0").set("size", jstr("8192"))
			m.get("segments").set("1", raw(`{"type":"some","offset":"2101248","size":"dynamic"}`))
		}, damaged: "overlap"},
		{name: "segments-gap", edit: func(m *jvalue) {
			seg(m, "0").set("size", jstr("4096"))
			m.get("segments").set("2", raw(`{"type":"some","offset":"2101248","size":"dynamic"}`))
		}, damaged: "no segment 1"},
		{name: "segments-overflow", edit: func(m *jvalue) {
			seg(m, "0").set("size", jstr("4096"))
			m.get("segments").set("1", raw(`{"type":"some","offset":"`+strconv.FormatUint(math.MaxUint64-511, 10)+`","size":"1024"}`))
		}, damaged: "overflow 64 bits"},
		{name: "segment-after-backup", edit: func(m *jvalue) {
			seg(m, "0").set("size", jstr("4096"))
			m.get("segments").set("1", raw(`{"type":"some","offset":"2101248","size":"4096","flags":["backup-previous"]}`))
			m.get("segments").set("2", raw(`{"type":"some","offset":"2105344","size":"dynamic"}`))
		}, damaged: "a data segment after backup segment 1"},

		// Keyslots.
		{name: "keyslot-type-missing", edit: func(m *jvalue) { ks(m, "0").del("type") }, damaged: `keyslot "0" has no "type"`},
		{name: "keyslot-type-empty", edit: func(m *jvalue) { ks(m, "0").set("type", jstr("")) }, damaged: `keyslot "0": "type" is empty`},
		{name: "keyslot-type-unknown", edit: func(m *jvalue) { ks(m, "0").set("type", jstr("frob")) }, load: true},
		{name: "keyslot-key-size-missing", edit: func(m *jvalue) { ks(m, "0").del("key_size") }, damaged: `has no "key_size"`},
		{name: "keyslot-key-size-string", edit: func(m *jvalue) { ks(m, "0").set("key_size", jstr("64")) }, damaged: `"key_size" is a string`},
		{name: "keyslot-key-size-negative", edit: func(m *jvalue) { ks(m, "0").set("key_size", jint(-1)) }, damaged: `"key_size" is -1`},
		{name: "keyslot-key-size-2^32", edit: func(m *jvalue) { ks(m, "0").set("key_size", jint(1<<32)) }, damaged: `"key_size" is 4294967296`},
		{name: "keyslot-key-size-48", edit: func(m *jvalue) { ks(m, "0").set("key_size", jint(48)) }, load: true, unsupported: FeatureKeySize},
		{name: "keyslot-key-size-0", edit: func(m *jvalue) { ks(m, "0").set("key_size", jint(0)) }, load: true},
		{name: "keyslot-key-size-2^31", edit: func(m *jvalue) { ks(m, "0").set("key_size", jint(1<<31)) }, load: true, unsupported: FeatureKeySize},
		{name: "keyslot-name-01", edit: func(m *jvalue) { renamed(m.get("keyslots"), "0", "01"); dig(m, "0").set("keyslots", raw(`["01"]`)) }, damaged: "in 0 digests"},
		{name: "keyslot-name-32", edit: func(m *jvalue) { renamed(m.get("keyslots"), "0", "32"); dig(m, "0").set("keyslots", raw(`["32"]`)) }, load: true, open: true},
		{name: "keyslot-name-2^32", edit: func(m *jvalue) {
			renamed(m.get("keyslots"), "0", "4294967296")
			dig(m, "0").set("keyslots", raw(`["4294967296"]`))
		}, damaged: "in 0 digests"},
		{name: "keyslot-name", edit: func(m *jvalue) { renamed(m.get("keyslots"), "0", "k"); dig(m, "0").set("keyslots", raw(`["k"]`)) }, damaged: `keyslot "k": the name is not a number`},
		{name: "keyslot-in-no-digest", edit: func(m *jvalue) { dig(m, "0").set("keyslots", raw(`[]`)) }, damaged: `keyslot "0" is in 0 digests`},
		{name: "keyslot-in-two-digests", edit: func(m *jvalue) {
			d := dig(m, "0").clone()
			d.set("segments", raw(`[]`))
			m.get("digests").set("1", d)
		}, damaged: `keyslot "0" is in 2 digests`},
		{name: "keyslots-none", edit: func(m *jvalue) { m.set("keyslots", raw(`{}`)); dig(m, "0").set("keyslots", raw(`[]`)) }, load: true},
		{name: "keyslot-priority-ignore", edit: func(m *jvalue) { ks(m, "0").set("priority", jint(0)) }, load: true},
		{name: "keyslot-priority-ignore-picked", edit: func(m *jvalue) { ks(m, "0").set("priority", jint(0)) }, slot: intp(0), load: true, open: true},
		{name: "keyslot-priority-5", edit: func(m *jvalue) { ks(m, "0").set("priority", jint(5)) }, load: true},
		{name: "keyslot-priority-string", edit: func(m *jvalue) { ks(m, "0").set("priority", jstr("2")) }, load: true, open: true},
		{name: "kdf-missing", edit: func(m *jvalue) { ks(m, "0").del("kdf") }, damaged: `needs "kdf", "af" and "area"`},
		{name: "kdf-not-object", edit: func(m *jvalue) { ks(m, "0").set("kdf", jint(42)) }, damaged: `"kdf" is a number`},
		{name: "kdf-type-missing", edit: func(m *jvalue) { ks(m, "0").get("kdf").del("type") }, damaged: `kdf has no "type"`},
		{name: "kdf-hash-missing", edit: func(m *jvalue) { ks(m, "0").get("kdf").del("hash") }, damaged: `kdf has no "hash"`},
		{name: "kdf-iterations-string", edit: func(m *jvalue) { ks(m, "0").get("kdf").set("iterations", jstr("1000")) }, damaged: `"iterations" is a string`},
		{name: "kdf-salt-missing", edit: func(m *jvalue) { ks(m, "0").get("kdf").del("salt") }, damaged: `kdf has no "salt"`},
		{name: "kdf-argon2-fields-missing", edit: func(m *jvalue) { ks(m, "0").get("kdf").set("type", jstr("argon2id")) }, damaged: `kdf has no "time"`},
		{name: "kdf-extra-members", edit: func(m *jvalue) { ks(m, "0").get("kdf").set("time", jint(4)); ks(m, "0").get("kdf").set("x", jstr("y")) }, load: true, open: true},
		{name: "kdf-unknown", edit: func(m *jvalue) { ks(m, "0").get("kdf").set("type", jstr("scrypt")) }, load: true},
		{name: "kdf-iterations-0", edit: func(m *jvalue) { ks(m, "0").get("kdf").set("iterations", jint(0)) }, load: true},
		{name: "kdf-hash-unknown", edit: func(m *jvalue) { ks(m, "0").get("kdf").set("hash", jstr("frob")) }, load: true},
		{name: "kdf-salt-short", edit: func(m *jvalue) { ks(m, "0").get("kdf").set("salt", jstr("AAAA")) }, load: true},
		{name: "kdf-salt-not-base64", edit: func(m *jvalue) { ks(m, "0").get("kdf").set("salt", jstr("!!")) }, load: true},
		{name: "af-missing", edit: func(m *jvalue) { ks(m, "0").del("af") }, damaged: `needs "kdf", "af" and "area"`},
		{name: "af-not-object", edit: func(m *jvalue) { ks(m, "0").set("af", jint(42)) }, damaged: `"af" is not an object`},
		{name: "af-type-number", edit: func(m *jvalue) { ks(m, "0").get("af").set("type", jint(42)) }, damaged: `af type "42"`},
		{name: "af-type-unknown", edit: func(m *jvalue) { ks(m, "0").get("af").set("type", jstr("luks3")) }, damaged: `af type "luks3"`},
		{name: "af-hash-missing", edit: func(m *jvalue) { ks(m, "0").get("af").del("hash") }, damaged: `af has no "hash"`},
		{name: "af-stripes-string", edit: func(m *jvalue) { ks(m, "0").get("af").set("stripes", jstr("4000")) }, damaged: `"stripes" is a string`},
		{name: "af-stripes-2000", edit: func(m *jvalue) { ks(m, "0").get("af").set("stripes", jint(2000)) }, load: true, open: true},
		{name: "af-stripes-negative", edit: func(m *jvalue) { ks(m, "0").get("af").set("stripes", jint(-1)) }, load: true, open: true},
		{name: "af-hash-unknown", edit: func(m *jvalue) { ks(m, "0").get("af").set("hash", jstr("frob")) }, load: true},
		{name: "area-missing", edit: func(m *jvalue) { ks(m, "0").del("area") }, damaged: `has no "area"`},
		{name: "area-not-object", edit: func(m *jvalue) { ks(m, "0").set("area", jint(42)) }, damaged: `"area" is a number`},
		{name: "area-type-missing", edit: func(m *jvalue) { ks(m, "0").get("area").del("type") }, damaged: `area has no "type"`},
		{name: "area-type-unknown", edit: func(m *jvalue) { ks(m, "0").get("area").set("type", jstr("frob")) }, damaged: `area type "frob"`},
		{name: "area-encryption-missing", edit: func(m *jvalue) { ks(m, "0").get("area").del("encryption") }, damaged: `area has no "encryption"`},
		{name: "area-key-size-string", edit: func(m *jvalue) { ks(m, "0").get("area").set("key_size", jstr("64")) }, damaged: `"key_size" is a string`},
		{name: "area-offset-in-header", edit: func(m *jvalue) { ks(m, "0").get("area").set("offset", jstr("16384")) }, damaged: "lies in the header copies"},
		{name: "area-offset-plus", edit: func(m *jvalue) { ks(m, "0").get("area").set("offset", jstr("+32768")) }, damaged: "not a decimal number"},
		{name: "area-past-keyslots", edit: func(m *jvalue) { ks(m, "0").get("area").set("offset", jstr("1077248")) }, damaged: "runs past the keyslots area"},
		{name: "area-size-0", edit: func(m *jvalue) { ks(m, "0").get("area").set("size", jstr("0")) }, damaged: "area is empty"},
		{name: "area-size-max", edit: func(m *jvalue) { ks(m, "0").get("area").set("size", jstr(u64max)) }, damaged: "overflow 64 bits"},
		{name: "area-offset-unaligned", edit: func(m *jvalue) { ks(m, "0").get("area").set("offset", jstr("32769")) }, load: true, open: true},
		{name: "area-size-small", edit: func(m *jvalue) { ks(m, "0").get("area").set("size", jstr("4096")) }, load: true, open: true},
		{name: "area-encryption-empty", edit: func(m *jvalue) { ks(m, "0").get("area").set("encryption", jstr("")) }, damaged: `area: "encryption" is empty`},
		{name: "kdf-type-empty", edit: func(m *jvalue) { ks(m, "0").get("kdf").set("type", jstr("")) }, damaged: `kdf: "type" is empty`},
		{name: "kdf-salt-empty", edit: func(m *jvalue) { ks(m, "0").get("kdf").set("salt", jstr("")) }, damaged: `kdf: "salt" is empty`},
		{name: "af-hash-empty", edit: func(m *jvalue) { ks(m, "0").get("af").set("hash", jstr("")) }, damaged: `af: "hash" is empty`},
		{name: "keyslot-priority-negative", edit: func(m *jvalue) { ks(m, "0").set("priority", jint(-1)) }, load: true},
		{name: "digest-hash-empty", edit: func(m *jvalue) { dig(m, "0").set("hash", jstr("")) }, load: true, anyPass: true},
		{name: "area-encryption-cbc", edit: func(m *jvalue) { ks(m, "0").get("area").set("encryption", jstr("aes-cbc-essiv:sha256")) }, load: true},
		{name: "area-key-size-32", edit: func(m *jvalue) { ks(m, "0").get("area").set("key_size", jint(32)) }, load: true},
		{name: "area-key-size-48", edit: func(m *jvalue) { ks(m, "0").get("area").set("key_size", jint(48)) }, load: true},
		{name: "areas-identical", edit: func(m *jvalue) {
			m.get("keyslots").set("1", ks(m, "0").clone())
			dig(m, "0").set("keyslots", raw(`["0","1"]`))
		}, damaged: "areas overlap"},
		{name: "areas-overlap", edit: func(m *jvalue) {
			k := ks(m, "0").clone()
			k.get("area").set("offset", jstr("286720"))
			m.get("keyslots").set("1", k)
			dig(m, "0").set("keyslots", raw(`["0","1"]`))
		}, damaged: "areas overlap"},
		{name: "keyslot-unknown-type-alone", edit: func(m *jvalue) {
			m.get("keyslots").set("1", raw(`{"type":"frob","key_size":1,"area":{"type":"x","offset":"524288","size":"4096"}}`))
		}, load: true, open: true},
		{name: "keyslot-unknown-type-overlap", edit: func(m *jvalue) {
			m.get("keyslots").set("1", raw(`{"type":"frob","key_size":1,"area":{"type":"x","offset":"36864","size":"4096"}}`))
		}, damaged: "areas overlap"},
		{name: "keyslot-unknown-type-no-area", edit: func(m *jvalue) { m.get("keyslots").set("1", raw(`{"type":"frob","key_size":1}`)) }, damaged: `keyslot "1" has no "area"`},
		{name: "keyslot-reencrypt-without-requirement", edit: func(m *jvalue) {
			m.get("keyslots").set("1", raw(`{"type":"reencrypt","key_size":1,"mode":"reencrypt","direction":"forward","area":{"type":"none","offset":"524288","size":"4096"}}`))
		}, damaged: "a reencrypt keyslot without an online reencryption requirement"},

		// config.
		{name: "json-size-mismatch", edit: func(m *jvalue) { cfg(m).set("json_size", jstr("4096")) }, damaged: "json_size 4096 makes"},
		{name: "json-size-number", edit: func(m *jvalue) { cfg(m).set("json_size", jint(12288)) }, damaged: `"json_size" is a number`},
		{name: "json-size-plus", edit: func(m *jvalue) { cfg(m).set("json_size", jstr("+12288")) }, load: true, open: true},
		{name: "json-size-space", edit: func(m *jvalue) { cfg(m).set("json_size", jstr(" 12288")) }, load: true, open: true},
		{name: "json-size-other-valid", edit: func(m *jvalue) {
			cfg(m).set("json_size", jstr("28672"))
			ks(m, "0").get("area").set("offset", jstr("65536"))
		}, damaged: "does not match the binary header"},
		{name: "keyslots-size-unaligned", edit: func(m *jvalue) { cfg(m).set("keyslots_size", jstr("1048575")) }, damaged: "not a multiple of 4096"},
		{name: "keyslots-size-too-big", edit: func(m *jvalue) { cfg(m).set("keyslots_size", jstr(strconv.Itoa(128<<20+4096))) }, damaged: "not a multiple of 4096 up to 128 MiB"},
		{name: "keyslots-size-exact", edit: func(m *jvalue) { cfg(m).set("keyslots_size", jstr("258048")) }, load: true, open: true},
		{name: "keyslots-size-too-small", edit: func(m *jvalue) { cfg(m).set("keyslots_size", jstr("253952")) }, damaged: "runs past the keyslots area"},
		{name: "keyslots-size-into-data", edit: func(m *jvalue) { cfg(m).set("keyslots_size", jstr("2068480")) }, damaged: "does not fit between"},
		{name: "keyslots-size-plus", edit: func(m *jvalue) { cfg(m).set("keyslots_size", jstr("+1048576")) }, load: true, open: true},
		{name: "config-flags-string", edit: func(m *jvalue) { cfg(m).set("flags", jstr("x")) }, damaged: `"flags" is a string`},
		{name: "config-flags-number", edit: func(m *jvalue) { cfg(m).set("flags", raw(`[1]`)) }, damaged: `"flags"[0] is a number`},
		{name: "config-flags-unknown", edit: func(m *jvalue) { cfg(m).set("flags", raw(`["frob","allow-discards"]`)) }, load: true, open: true},

		// The binary header and the copies.
		{name: "hdr-size-invalid", bin: func(b []byte, _ bool) { binary.BigEndian.PutUint64(b[offHdrSize:], 20000) }, damaged: "header size 20000"},
		{name: "checksum-sha1", bin: func(b []byte, _ bool) {
			copy(b[offCsumAlg:offCsumAlg+csumAlgLen], append([]byte("sha1"), make([]byte, 28)...))
		}, load: true, open: true},
		{name: "checksum-sha3-256", bin: func(b []byte, _ bool) {
			copy(b[offCsumAlg:offCsumAlg+csumAlgLen], append([]byte("sha3-256"), make([]byte, 24)...))
		}, load: true, open: true},
		{name: "checksum-blake2b-512", bin: func(b []byte, _ bool) {
			copy(b[offCsumAlg:offCsumAlg+csumAlgLen], append([]byte("blake2b-512"), make([]byte, 21)...))
		}, load: true, open: true},
		{name: "checksum-unknown", bin: func(b []byte, _ bool) {
			copy(b[offCsumAlg:offCsumAlg+csumAlgLen], append([]byte("frob"), make([]byte, 28)...))
		}, damaged: "unknown checksum algorithm"},
		{name: "checksum-upper-case", bin: func(b []byte, _ bool) {
			copy(b[offCsumAlg:offCsumAlg+csumAlgLen], append([]byte("SHA256"), make([]byte, 26)...))
		}, load: true, open: true},
		{name: "version-3", bin: func(b []byte, _ bool) { binary.BigEndian.PutUint16(b[offVersion:], 3) }, refusedAs: FeatureVersion},
		{name: "hdr-offset-wrong-in-primary", bin: func(b []byte, sec bool) {
			if !sec {
				binary.BigEndian.PutUint64(b[offHdrOffset:], 4096)
			}
		}, load: true, open: true},
		{name: "hdr-offset-wrong-in-both", bin: func(b []byte, _ bool) { binary.BigEndian.PutUint64(b[offHdrOffset:], 4096) }, damaged: "was found at"},
		{name: "secondary-newer", bin: func(b []byte, sec bool) {
			if sec {
				binary.BigEndian.PutUint64(b[offSeqID:], binary.BigEndian.Uint64(b[offSeqID:])+1)
			}
		}, load: true, open: true},
		{name: "label-without-nul", bin: func(b []byte, _ bool) { copy(b[offLabel:offLabel+labelLen], strings.Repeat("x", labelLen)) }, load: true, open: true},
		{name: "primary-invalid-secondary-valid", edit: func(m *jvalue) { dig(m, "0").set("keyslots", raw(`[]`)) }, primary: true, load: true, open: true},
		{name: "primary-zeroed", bin: func(b []byte, sec bool) {
			if !sec {
				clear(b)
			}
		}, load: true, open: true},

		// Unbound keyslots (luksAddKey --unbound): tested only when picked.
		{name: "unbound-any", base: "unbound", pass: 1, load: true},
		{name: "unbound-picked", base: "unbound", pass: 1, slot: intp(1), load: true, open: true},
		{name: "unbound-other-passphrase", base: "unbound", pass: 0, slot: intp(1), load: true},
		{name: "unbound-bound-keyslot", base: "unbound", pass: 0, load: true, open: true},

		// Two keyslots: cryptsetup stops at a keyslot it cannot use.
		{name: "two", base: "two", pass: 1, load: true, open: true},
		{name: "two-stop-at-unknown-kdf", base: "two", pass: 1, edit: func(m *jvalue) { ks(m, "0").get("kdf").set("type", jstr("scrypt")) }, load: true},
		{name: "two-stop-at-bad-salt", base: "two", pass: 1, edit: func(m *jvalue) { ks(m, "0").get("kdf").set("salt", jstr("AAAA")) }, load: true},
		{name: "two-stop-picked", base: "two", pass: 1, slot: intp(1), edit: func(m *jvalue) { ks(m, "0").get("kdf").set("type", jstr("scrypt")) }, load: true, open: true},
		{name: "two-broken-after", base: "two", pass: 1, edit: func(m *jvalue) {
			ks(m, "0").get("kdf").set("type", jstr("scrypt"))
			k := m.get("keyslots")
			k.obj[0], k.obj[1] = k.obj[1], k.obj[0] // JSON order: "1" first
		}, load: true, open: true},
		{name: "two-preferred-first", base: "two", pass: 1, edit: func(m *jvalue) {
			ks(m, "0").get("kdf").set("type", jstr("scrypt"))
			ks(m, "1").set("priority", jint(2))
		}, load: true, open: true},
		{name: "two-pass-over-unknown-type", base: "two", pass: 1, edit: func(m *jvalue) { ks(m, "0").set("type", jstr("frob")) }, load: true, open: true},
		{name: "two-key-sizes-differ", base: "two", pass: 1, edit: func(m *jvalue) { ks(m, "1").set("key_size", jint(48)) }, load: true},

		// A reencryption in progress, as cryptsetup reencrypt --init-only
		// leaves it: keyslot 1 holds the new key with the same passphrase.
		{name: "reencrypt", base: "reencrypt", load: true, open: true, unsupported: FeatureReencryption, csOpens: true},
		// cryptsetup needs the passphrase to open the old key and the new:
		// a keyslot picked holds only one of them.
		{name: "reencrypt-picked-old", base: "reencrypt", slot: intp(0), load: true, unsupported: FeatureReencryption, csOpens: true},
		{name: "reencrypt-picked-new", base: "reencrypt", slot: intp(1), load: true, unsupported: FeatureReencryption, csOpens: true},
		{name: "reencrypt-mode", base: "reencrypt", edit: func(m *jvalue) { ks(m, "2").set("mode", jstr("frob")) }, damaged: `reencryption mode "frob"`},
		{name: "reencrypt-key-size", base: "reencrypt", edit: func(m *jvalue) { ks(m, "2").set("key_size", jint(2)) }, damaged: "key_size must be 1"},
		{name: "reencrypt-checksum-hash", base: "reencrypt", edit: func(m *jvalue) { ks(m, "2").get("area").del("hash") }, damaged: `area has no "hash"`},
		{name: "reencrypt-no-backup-final", base: "reencrypt", edit: func(m *jvalue) { seg(m, "2").set("flags", raw(`["backup-frob"]`)) }, damaged: "without its backup-final"},
		{name: "reencrypt-segment-unlike", base: "reencrypt", edit: func(m *jvalue) { seg(m, "0").set("sector_size", jint(512)) }, damaged: "like neither"},
		{name: "reencrypt-two-keyslots", base: "reencrypt", edit: func(m *jvalue) {
			k := ks(m, "2").clone()
			k.get("area").set("offset", jstr("1077248"))
			k.get("area").set("size", jstr("4096"))
			ks(m, "2").get("area").set("size", jstr("4096"))
			m.get("keyslots").set("3", k)
		}, damaged: "2 reencrypt keyslots"},
	}
	return cases
}

// TestRulesSelfCheck: the bases are what the cases assume (a sanity check
// on the test itself, without cryptsetup's answers).
func TestRulesSelfCheck(t *testing.T) {
	for _, c := range ruleCases() {
		if c.load == (c.damaged != "" || c.refusedAs != "") {
			t.Errorf("%s: a case either loads or says why not", c.name)
		}
		if c.anyPass && c.open {
			t.Errorf("%s: anyPass cases must not open here", c.name)
		}
	}
}

func intp(n int) *int { return &n }
