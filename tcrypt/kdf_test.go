package tcrypt

import (
	"bytes"
	"context"
	stdpbkdf2 "crypto/pbkdf2"
	"hash/crc32"
	"strings"
	"testing"

	"github.com/xtsctl/xtsctl/internal/pbkdf2"
)

// TestPBKDF2MatchesStd compares the staged PBKDF2 (internal/pbkdf2) with
// crypto/pbkdf2 for every hash of the table, derived at once and in the
// two stages the search uses.
func TestPBKDF2MatchesStd(t *testing.T) {
	salt := bytes.Repeat([]byte{0x5a, 0x01}, 32)
	for _, name := range []string{hashSHA512, hashSHA256, hashRIPEMD160, hashWhirlpool, hashBLAKE2s, hashStreebog, hashSHA1} {
		for _, iter := range []int{1, 2, 1500} {
			for _, pw := range [][]byte{[]byte("p"), bytes.Repeat([]byte("long password "), 10)} {
				want, err := stdpbkdf2.Key(newHash(name), string(pw), salt, iter, dkLen)
				if err != nil {
					t.Fatal(err)
				}
				p := pbkdf2.New(newHash(name), pw, salt, iter)
				first, err := p.Derive(context.Background(), 64)
				if err != nil {
					t.Fatal(err)
				}
				first = bytes.Clone(first)
				all, err := p.Derive(context.Background(), dkLen)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(first, want[:64]) || !bytes.Equal(all, want) {
					t.Fatalf("PBKDF2-%s, %d iterations, %d-byte password: differs from crypto/pbkdf2", name, iter, len(pw))
				}
			}
		}
	}
}

// TestKDFTable checks the iteration rules against the counts the sample
// images were verified with (the facts file): VeraCrypt's PIM 485 is its
// default 500000, PIM 1234 gives 1249000; Argon2id for PIM 8 and 33.
func TestKDFTable(t *testing.T) {
	if got := nonBootPIM(485); got != 500000 {
		t.Errorf("PIM 485: %d", got)
	}
	if got := nonBootPIM(1234); got != 1249000 {
		t.Errorf("PIM 1234: %d", got)
	}
	if got := bootPIM(98); got != 200704 {
		t.Errorf("boot PIM 98: %d", got)
	}
	for _, c := range []struct {
		pim  int
		t, m uint32
	}{{0, 6, 425984}, {8, 5, 294912}, {33, 15, 1048576}, {1, 3, 65536}, {31, 13, 1024 << 10}} {
		if gt, gm := argon2Params(c.pim); gt != c.t || gm != c.m {
			t.Errorf("Argon2id PIM %d: t %d m %d KiB, want %d, %d", c.pim, gt, gm, c.t, c.m)
		}
	}
	// The rows each mode tries.
	loc := &location{}
	count := func(o options, passLen int) map[string]int {
		m := map[string]int{}
		for _, c := range o.candidates(loc, passLen) {
			m[c.kdf.row.product.String()]++
		}
		return m
	}
	if m := count(options{}, 12); m["TrueCrypt"] != 4 || m["VeraCrypt"] != 7 {
		t.Errorf("a volume: %v, want 4 TrueCrypt rows (legacy SHA-1 included) and 7 VeraCrypt", m)
	}
	if m := count(options{system: true}, 12); m["TrueCrypt"] != 5 || m["VeraCrypt"] != 11 {
		t.Errorf("system: %v", m)
	}
	if m := count(options{pim: 5}, 12); m["TrueCrypt"] != 0 || m["VeraCrypt"] != 7 {
		t.Errorf("with a PIM: %v", m)
	}
	if m := count(options{}, 72); m["TrueCrypt"] != 0 {
		t.Errorf("72-byte passphrase: %v, TrueCrypt takes at most 64", m)
	}
	if m := count(options{hash: hashSHA512}, 12); m["TrueCrypt"] != 1 || m["VeraCrypt"] != 1 {
		t.Errorf("--tcrypt-hash sha512: %v", m)
	}
	for _, c := range (options{pim: 10, system: true}).candidates(loc, 1) {
		if c.kdf.row.boot && c.kdf.iter != 20480 || !c.kdf.row.boot && c.kdf.row.hash != hashArgon2id && c.kdf.iter != 25000 {
			t.Errorf("PIM 10: %s", c.kdf)
		}
	}
}

// poolByHand is the keyfile pool as the facts file words it, written
// apart from kdfPassword: CRC-32 register bytes, most significant first.
func poolByHand(size int, pass []byte, files ...[]byte) []byte {
	pool := make([]byte, size)
	for _, f := range files {
		if len(f) > 1<<20 {
			f = f[:1<<20]
		}
		r := uint32(0xFFFFFFFF)
		j := 0
		for _, b := range f {
			r = crc32.Update(^r, crc32.IEEETable, []byte{b}) // Update inverts in and out
			r = ^r
			for k := range 4 {
				pool[j] += byte(r >> (24 - 8*k))
				j++
			}
			j %= size
		}
	}
	for i, b := range pass {
		pool[i] += b
	}
	return pool
}

func TestKeyfilePool(t *testing.T) {
	k1, k2 := bytes.Repeat([]byte("keyfile one "), 20), []byte("two")
	big := bytes.Repeat([]byte{1, 2, 3, 250}, (1<<20)/4+100)
	for _, c := range []struct {
		pass  []byte
		files [][]byte
		size  int
	}{
		{[]byte("aaaaaaaaaaaa"), [][]byte{k1, k2}, 64},
		{nil, [][]byte{k2}, 64},
		{bytes.Repeat([]byte("x"), 64), [][]byte{k1}, 64},
		{bytes.Repeat([]byte("y"), 72), [][]byte{k1, k2}, 128},
		{[]byte("p"), [][]byte{big}, 64},
	} {
		got, err := kdfPassword(c.pass, c.files)
		if err != nil {
			t.Fatal(err)
		}
		if want := poolByHand(c.size, c.pass, c.files...); !bytes.Equal(got, want) {
			t.Errorf("%d-byte passphrase, %d keyfiles: pool differs from the one by hand", len(c.pass), len(c.files))
		}
	}
	a, _ := kdfPassword([]byte("pw"), [][]byte{k1, k2})
	b, _ := kdfPassword([]byte("pw"), [][]byte{k2, k1})
	if !bytes.Equal(a, b) {
		t.Error("keyfile order changes the pool")
	}
	c, _ := kdfPassword([]byte("pw"), [][]byte{big[:1<<20]})
	d, _ := kdfPassword([]byte("pw"), [][]byte{big})
	if !bytes.Equal(c, d) {
		t.Error("bytes after the first MiB change the pool")
	}
	for _, bad := range []struct {
		pass  []byte
		files [][]byte
		want  string
	}{
		{nil, nil, "none was given"},
		{[]byte("p"), [][]byte{{}}, "empty"},
		{bytes.Repeat([]byte("z"), 129), nil, "more than the 128"},
	} {
		if _, err := kdfPassword(bad.pass, bad.files); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("kdfPassword(%d bytes, %d files) = %v, want %q", len(bad.pass), len(bad.files), err, bad.want)
		}
	}
	if p, _ := kdfPassword([]byte("plain"), nil); string(p) != "plain" {
		t.Errorf("without keyfiles the password is %q", p)
	}
}
