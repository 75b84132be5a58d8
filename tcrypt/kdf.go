package tcrypt

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"fmt"
	"hash"
	"strings"

	"golang.org/x/crypto/argon2"
	"golang.org/x/crypto/blake2s"
	"golang.org/x/crypto/ripemd160" //lint:ignore SA1019 TrueCrypt and VeraCrypt headers are derived with RIPEMD-160; it is only read, never offered for new headers

	"github.com/xtsctl/xtsctl/internal/secret"
	"github.com/xtsctl/xtsctl/tcrypt/internal/streebog"
	"github.com/xtsctl/xtsctl/tcrypt/internal/whirlpool"
)

// dkLen is the length of the key a header's KDF derives: the header
// key of the longest cipher chain (three ciphers, each a 256-bit key and a
// 256-bit XTS tweak key).
const dkLen = 192

// Hash names, as --tcrypt-hash takes them.
const (
	hashSHA512    = "sha512"
	hashSHA256    = "sha256"
	hashRIPEMD160 = "ripemd160"
	hashWhirlpool = "whirlpool"
	hashBLAKE2s   = "blake2s"
	hashStreebog  = "streebog"
	hashSHA1      = "sha1"
	hashArgon2id  = "argon2id"
)

// hashNames lists the names --tcrypt-hash takes, for messages.
const hashNames = "sha512, sha256, ripemd160, whirlpool, blake2s, streebog, argon2id, sha1"

// hashAliases are other spellings users and tools write (VeraCrypt's
// menu, cryptsetup's names).
var hashAliases = map[string]string{
	"sha-512": hashSHA512, "sha-256": hashSHA256, "ripemd-160": hashRIPEMD160, "rmd160": hashRIPEMD160,
	"blake2s-256": hashBLAKE2s, "blake2s256": hashBLAKE2s, "stribog512": hashStreebog,
	"streebog512": hashStreebog, "streebog-512": hashStreebog, "argon2": hashArgon2id, "sha-1": hashSHA1,
}

// canonicalHash returns the table's name for a --tcrypt-hash value.
func canonicalHash(name string) (string, bool) {
	n := strings.ToLower(name)
	if a, ok := hashAliases[n]; ok {
		n = a
	}
	for _, r := range kdfTable {
		if r.hash == n {
			return n, true
		}
	}
	return "", false
}

func newHash(name string) func() hash.Hash {
	switch name {
	case hashSHA512:
		return sha512.New
	case hashSHA256:
		return sha256.New
	case hashRIPEMD160:
		return ripemd160.New
	case hashWhirlpool:
		return whirlpool.New
	case hashBLAKE2s:
		return func() hash.Hash { h, _ := blake2s.New256(nil); return h }
	case hashStreebog:
		return streebog.New512
	case hashSHA1:
		return sha1.New
	}
	return nil
}

// A product is the program whose rules a KDF row follows.
type product int

const (
	trueCrypt product = iota
	veraCrypt
)

func (p product) String() string {
	if p == trueCrypt {
		return "TrueCrypt"
	}
	return "VeraCrypt"
}

// A kdfRow is one way VeraCrypt or TrueCrypt derives header keys. The
// costs are the programs' own, fixed in this table: nothing read from an
// image chooses them, only the PIM the user gives.
type kdfRow struct {
	hash    string
	product product
	// boot: the count VeraCrypt's boot loader (and TrueCrypt's) uses
	// for system encryption; tried only with --tcrypt-system.
	boot bool
	// legacy: TrueCrypt before 5.0 (CBC-era volumes), tried only to
	// name what it finds.
	legacy bool
	iter   int // PBKDF2 iterations without a PIM
	// pimIter gives the iterations for a PIM (VeraCrypt rows only).
	pimIter func(pim int) int
}

func nonBootPIM(pim int) int { return 15000 + 1000*pim }
func bootPIM(pim int) int    { return 2048 * pim }

// kdfTable is every PBKDF2 row, in the order cryptsetup tries them, and
// Argon2id. VeraCrypt's own source gives the boot count of Streebog too
// (200000, PIM × 2048), which cryptsetup's table lacks.
var kdfTable = []kdfRow{
	{hash: hashRIPEMD160, product: trueCrypt, iter: 2000},
	{hash: hashRIPEMD160, product: trueCrypt, boot: true, iter: 1000},
	{hash: hashSHA512, product: trueCrypt, iter: 1000},
	{hash: hashWhirlpool, product: trueCrypt, iter: 1000},
	{hash: hashSHA1, product: trueCrypt, legacy: true, iter: 2000},
	{hash: hashSHA512, product: veraCrypt, iter: 500000, pimIter: nonBootPIM},
	{hash: hashWhirlpool, product: veraCrypt, iter: 500000, pimIter: nonBootPIM},
	{hash: hashSHA256, product: veraCrypt, iter: 500000, pimIter: nonBootPIM},
	{hash: hashSHA256, product: veraCrypt, boot: true, iter: 200000, pimIter: bootPIM},
	{hash: hashArgon2id, product: veraCrypt},
	{hash: hashBLAKE2s, product: veraCrypt, iter: 500000, pimIter: nonBootPIM},
	{hash: hashBLAKE2s, product: veraCrypt, boot: true, iter: 200000, pimIter: bootPIM},
	{hash: hashRIPEMD160, product: veraCrypt, iter: 655331, pimIter: nonBootPIM},
	{hash: hashRIPEMD160, product: veraCrypt, boot: true, iter: 327661, pimIter: bootPIM},
	{hash: hashStreebog, product: veraCrypt, iter: 500000, pimIter: nonBootPIM},
	{hash: hashStreebog, product: veraCrypt, boot: true, iter: 200000, pimIter: bootPIM},
}

// PIM bounds, as VeraCrypt's: a boot PIM is 16 bits (the boot loader
// reads it so), a volume's keeps 15000 + 1000 × PIM within 31 bits.
const (
	maxPIM     = 2147468
	maxBootPIM = 65535
)

// argon2Params are VeraCrypt's Argon2id costs (lanes = 1) for a PIM,
// 0 for none: t passes over m KiB.
func argon2Params(pim int) (t, mKiB uint32) {
	switch {
	case pim <= 0:
		return 6, 416 << 10
	case pim <= 31:
		return uint32((pim-1)/3 + 3), uint32(64+32*(pim-1)) << 10
	default:
		return uint32(pim - 18), 1 << 20
	}
}

// A kdf is one key derivation of a candidate: a row with the PIM applied.
type kdf struct {
	row  kdfRow
	iter int    // PBKDF2
	t, m uint32 // Argon2id passes and KiB
}

func (k kdf) String() string {
	if k.row.hash == hashArgon2id {
		return fmt.Sprintf("Argon2id (t=%d, m=%d MiB)", k.t, k.m>>10)
	}
	s := fmt.Sprintf("PBKDF2-%s %d (%s", hashTitle(k.row.hash), k.iter, k.row.product)
	if k.row.boot {
		s += " system"
	}
	return s + ")"
}

func hashTitle(h string) string {
	switch h {
	case hashSHA512:
		return "SHA-512"
	case hashSHA256:
		return "SHA-256"
	case hashRIPEMD160:
		return "RIPEMD-160"
	case hashWhirlpool:
		return "Whirlpool"
	case hashBLAKE2s:
		return "BLAKE2s-256"
	case hashStreebog:
		return "Streebog-512"
	case hashSHA1:
		return "SHA-1"
	}
	return h
}

// cost is a rough measure of a derivation's time, to try the quick ones
// first: PBKDF2 iterations (for the first 64 bytes) or Argon2id passes
// over each MiB, weighted by what one takes here (measured in Go on
// x86-64, in tenths of a microsecond).
func (k kdf) cost() int64 {
	if k.row.hash == hashArgon2id {
		return int64(k.t) * int64(k.m>>10) * 68000
	}
	return int64(k.iter) * map[string]int64{
		hashSHA512: 56, hashSHA256: 19, hashBLAKE2s: 71, hashWhirlpool: 235,
		hashRIPEMD160: 486, hashStreebog: 730, hashSHA1: 20,
	}[k.row.hash]
}

// argon2Key runs Argon2id as VeraCrypt does (one lane, no secret or
// associated data). x/crypto's argon2 cannot be stopped: when ctx is done
// first the run is left to finish on its own and its key discarded.
func argon2Key(ctx context.Context, password, salt []byte, t, mKiB uint32) ([]byte, error) {
	pw := append([]byte(nil), password...)
	res := make(chan []byte, 1)
	go func() {
		// x/crypto's Argon2 leaves pieces of the key in its frames.
		var stack secret.Stack
		stack.Reserve()
		defer stack.Burn()
		k := argon2.IDKey(pw, salt, t, mKiB, 1, dkLen)
		clear(pw)
		res <- k
	}()
	select {
	case k := <-res:
		return k, nil
	case <-ctx.Done():
		go func() { clear(<-res) }()
		return nil, ctx.Err()
	}
}
