package bitlk

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/xtsctl/xtsctl/disk"
)

// nonASCII is a password Windows hashes as UTF-16 code units beyond
// Latin-1: an accented letter, a pound sign (cryptsetup 2.6's failure),
// CJK and a character outside the BMP (a surrogate pair).
const nonASCII = "pässwörd £ 鍵 🔑"

const testRecovery = "111111-222222-333333-444444-555555-666666-000000-123453"

// builtCases are the crafted volumes every one of which must decrypt to
// its plaintext, with each of its secrets.
var builtCases = []struct {
	name string
	spec buildSpec
}{
	{"xts-256-unicode", buildSpec{method: 0x8005, protectors: []protSpec{{protection: protPassword, secret: nonASCII}, {protection: protRecovery, secret: testRecovery}}, description: "TEST ü: 1/2/2026", serial: 0x1122334455667788}},
	{"xts-128-unicode", buildSpec{method: 0x8004, protectors: []protSpec{{protection: protPassword, secret: nonASCII}}, serial: 0x99}},
	{"xts-128-4k", buildSpec{method: 0x8004, sectorSize: 4096, protectors: []protSpec{{protection: protPassword, secret: "anaconda"}}, serial: 0xa1}},
	{"xts-256-4k", buildSpec{method: 0x8005, sectorSize: 4096, protectors: []protSpec{{protection: protRecovery, secret: testRecovery}}, serial: 0xa2}},
	{"cbc-256", buildSpec{method: 0x8003, protectors: []protSpec{{protection: protRecovery, secret: testRecovery}, {protection: protPassword, secret: "anaconda"}}, serial: 0xb1}},
	{"cbc-128-4k", buildSpec{method: 0x8002, sectorSize: 4096, protectors: []protSpec{{protection: protPassword, secret: "anaconda"}}, serial: 0xb2}},
	{"elephant-256", buildSpec{method: 0x8001, protectors: []protSpec{{protection: protPassword, secret: "anaconda"}}, serial: 0xc1}},
	{"elephant-128-4k", buildSpec{method: 0x8000, sectorSize: 4096, protectors: []protSpec{{protection: protPassword, secret: "anaconda"}}, serial: 0xc2}},
	{"togo-xts-128", buildSpec{method: 0x8004, toGo: true, protectors: []protSpec{{protection: protPassword, secret: "anaconda"}}, serial: 0xd1}},
	{"clear-key", buildSpec{method: 0x8004, protectors: []protSpec{{protection: protClearKey}, {protection: protPassword, secret: "anaconda"}}, serial: 0xe1}},
	{"startup-key", buildSpec{method: 0x8005, protectors: []protSpec{{protection: protStartupKey}, {protection: protRecovery, secret: testRecovery}}, serial: 0xe2}},
	{"tpm-and-recovery", buildSpec{method: 0x8004, protectors: []protSpec{{protection: protTPM}, {protection: protRecovery, secret: testRecovery}}, serial: 0xe3}},
}

// secretsOf lists the ways to unlock a crafted volume.
func secretsOf(b *built, spec buildSpec) []struct {
	name string
	req  *disk.Request
	sec  *disk.Secret
} {
	type try = struct {
		name string
		req  *disk.Request
		sec  *disk.Secret
	}
	var out []try
	for i, p := range spec.protectors {
		switch p.protection {
		case protPassword:
			out = append(out, try{"password", request(), &disk.Secret{Passphrase: []byte(p.secret)}})
		case protRecovery:
			out = append(out, try{"recovery", request(), &disk.Secret{Passphrase: []byte(p.secret)}})
		case protStartupKey:
			out = append(out, try{"startup-key", request(), &disk.Secret{KeyFiles: [][]byte{b.bek}}})
		case protClearKey:
			out = append(out, try{"clear-key", request(), nil})
		}
		if p.protection != protTPM && i == len(spec.protectors)-1 {
			out = append(out, try{fmt.Sprintf("protector-%d-by-guid", i), request(OptProtector, "{"+b.prots[i].String()+"}"), secretFor(b, p)})
		}
	}
	return out
}

var builtCache struct {
	sync.Mutex
	m map[string]*built
}

// builtCase builds crafted volume i once for the test binary (building
// stretches each password).
func builtCase(t *testing.T, i int) (*built, buildSpec) {
	t.Helper()
	spec := builtCases[i].spec
	spec.seed = uint64(i + 1)
	builtCache.Lock()
	defer builtCache.Unlock()
	if b := builtCache.m[builtCases[i].name]; b != nil {
		return b, spec
	}
	dir := filepath.Join(sampleDir(t), "..", "built-"+builtCases[i].name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	b := buildImage(t, dir, spec)
	if builtCache.m == nil {
		builtCache.m = map[string]*built{}
	}
	builtCache.m[builtCases[i].name] = b
	return b, spec
}

func secretFor(b *built, p protSpec) *disk.Secret {
	switch p.protection {
	case protStartupKey:
		return &disk.Secret{KeyFiles: [][]byte{b.bek}}
	case protClearKey:
		return nil
	}
	return &disk.Secret{Passphrase: []byte(p.secret)}
}

// TestBuiltDecrypt: each crafted volume unlocks with each of its secrets
// and reads back, through the disk layer, as the plaintext it was made
// from: the moved boot sectors first, zeros where the metadata is.
func TestBuiltDecrypt(t *testing.T) {
	for i, c := range builtCases {
		t.Run(c.name, func(t *testing.T) {
			b, spec := builtCase(t, i)
			for _, tr := range secretsOf(b, spec) {
				t.Run(tr.name, func(t *testing.T) {
					u := mustUnlock(t, b.path, tr.req, tr.sec)
					meth, _ := lookupMethod(spec.method)
					if !bytes.Equal(u.Key, meth.dmKey(b.fvek)) {
						t.Fatalf("key %s, want %s", hex.EncodeToString(u.Key), hex.EncodeToString(meth.dmKey(b.fvek)))
					}
					_, r := serve(t, b.path, u)
					got := make([]byte, r.Size())
					if _, err := io.ReadFull(io.NewSectionReader(r, 0, r.Size()), got); err != nil {
						t.Fatal(err)
					}
					if i := firstDiff(got, b.plain); i >= 0 {
						t.Fatalf("the device differs from the plaintext first at byte %d", i)
					}
					if got := ntfsSerial(t, r); got != fmt.Sprintf("%016X", spec.serial) {
						t.Errorf("NTFS serial %s, want %016X", got, spec.serial)
					}
				})
			}
		})
	}
}

func firstDiff(a, b []byte) int {
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

// TestPasswordHashUTF16: the password is hashed as UTF-16LE code units
// without a terminator: "anaconda£" ends a3 00 (the fact sheet's case,
// cryptsetup 2.6's failure), U+1F511 is the surrogate pair 3d d8 11 dd;
// text that is not UTF-8 is refused.
func TestPasswordHashUTF16(t *testing.T) {
	for _, c := range []struct {
		pw    string
		utf16 string
	}{
		{"anaconda", "61006e00610063006f006e0064006100"},
		{"anaconda£", "61006e00610063006f006e0064006100a300"},
		{"鍵🔑", "75933dd811dd"},
		{"", ""},
	} {
		want := sha256.Sum256(unhexT(t, c.utf16))
		want = sha256.Sum256(want[:])
		got, err := passwordHash([]byte(c.pw))
		if err != nil || *got != want {
			t.Errorf("passwordHash(%q) = %x, %v; want SHA-256 twice of %s", c.pw, got, err, c.utf16)
		}
	}
	if _, err := passwordHash([]byte("caf\xe9")); err == nil {
		t.Error("a Latin-1 password was hashed")
	}
}
