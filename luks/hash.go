package luks

import (
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha3"
	"crypto/sha512"
	"hash"
	"strings"

	"github.com/xtsctl/xtsctl/internal/pbkdf2"
	"golang.org/x/crypto/blake2b"
	"golang.org/x/crypto/blake2s"

	"golang.org/x/crypto/ripemd160" //lint:ignore SA1019 LUKS1 headers made with --hash ripemd160 exist; the hash is only read, never offered for new headers
)

// hashByName maps the hash names cryptsetup writes (gcrypt/OpenSSL
// spelling, as in luksDump) to constructors.
func hashByName(name string) func() hash.Hash {
	switch strings.ToLower(name) {
	case "sha1":
		return sha1.New
	case "sha224":
		return sha256.New224
	case "sha256":
		return sha256.New
	case "sha384":
		return sha512.New384
	case "sha512":
		return sha512.New
	case "ripemd160":
		return ripemd160.New
	case "sha3-224":
		return func() hash.Hash { return sha3.New224() }
	case "sha3-256":
		return func() hash.Hash { return sha3.New256() }
	case "sha3-384":
		return func() hash.Hash { return sha3.New384() }
	case "sha3-512":
		return func() hash.Hash { return sha3.New512() }
	case "sha512-224":
		return sha512.New512_224
	case "sha512-256":
		return sha512.New512_256
	case "blake2b-512":
		return func() hash.Hash { h, _ := blake2b.New512(nil); return h }
	case "blake2s-256":
		return func() hash.Hash { h, _ := blake2s.New256(nil); return h }
	case "md5":
		return md5.New
	}
	return nil
}

const supportedHashes = "sha1, sha224, sha256, sha384, sha512, sha512-224/256, ripemd160, sha3-224/256/384/512, blake2b-512, blake2s-256, md5"

// pbkdf2Key runs PBKDF2-HMAC, keyed with a passphrase or, for digests,
// the volume key: internal/pbkdf2 wipes its copies of them, where
// crypto/pbkdf2 would leave them in memory. The caller has bounded
// iterations and keyLen, and wipes the output.
func pbkdf2Key(h func() hash.Hash, password, salt []byte, iterations, keyLen int) ([]byte, error) {
	return pbkdf2.Key(h, password, salt, iterations, keyLen), nil
}
