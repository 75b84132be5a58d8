package tcrypt

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/subtle"
	"encoding/binary"
	"strings"

	"golang.org/x/crypto/twofish" //lint:ignore SA1019 only to recognise and name Twofish volumes, which are refused
	xxts "golang.org/x/crypto/xts"

	"github.com/xtsctl/xtsctl/internal/secret"
	"github.com/xtsctl/xtsctl/tcrypt/internal/camellia"
	"github.com/xtsctl/xtsctl/tcrypt/internal/kuznyechik"
	"github.com/xtsctl/xtsctl/tcrypt/internal/serpent"
	"github.com/xtsctl/xtsctl/xts"
)

// A headerCipher is one way a header's 448 encrypted bytes may be
// encrypted: a cipher chain and mode. Only AES-XTS opens; the others are
// tried so that what the volume uses can be named when it is refused.
type headerCipher struct {
	// name is VeraCrypt's name of the cipher or cascade with the mode,
	// e.g. "AES-Twofish-Serpent (XTS)".
	name string
	mode string // "xts", "lrw", "cbc"
	// need is how many bytes of the derived key the header decryption
	// reads.
	need    int
	decrypt func(dst, src, dk []byte) bool
}

// supported reports whether xtsctl serves volumes of this cipher.
func (c *headerCipher) supported() bool { return c.name == aesXTS.name && c.mode == aesXTS.mode }

var aesXTS = headerCipher{name: "AES", mode: "xts", need: 64, decrypt: decryptAESXTS}

// decryptAESXTS decrypts the header with AES-256-XTS: data key dk[0:32],
// tweak key dk[32:64], data unit 0, on xtsctl's own engine.
func decryptAESXTS(dst, src, dk []byte) bool {
	c, err := xts.NewCipher(dk[:64])
	if err != nil {
		return false // equal halves: no header was encrypted so
	}
	c.Decrypt(dst, src, 0)
	c.Wipe()
	return true
}

type blockCipher struct {
	name string
	new  func(key []byte) (cipher.Block, error)
}

var (
	cAES        = blockCipher{"AES", aes.NewCipher}
	cSerpent    = blockCipher{"Serpent", serpent.NewCipher}
	cTwofish    = blockCipher{"Twofish", func(k []byte) (cipher.Block, error) { return twofish.NewCipher(k) }}
	cCamellia   = blockCipher{"Camellia", camellia.NewCipher}
	cKuznyechik = blockCipher{"Kuznyechik", kuznyechik.NewCipher}
)

// xtsChain is a cascade in cryptsetup's order (the order of its keys in
// the derived key): cipher i takes key dk[32i:32i+32] and tweak key
// dk[32n+32i:...]; the last one is undone first. VeraCrypt names a
// cascade the other way round: chain Serpent, Twofish, AES is VeraCrypt's
// "AES-Twofish-Serpent".
func xtsChain(chain ...blockCipher) headerCipher {
	var names []string
	for i := len(chain) - 1; i >= 0; i-- {
		names = append(names, chain[i].name)
	}
	n := len(chain)
	return headerCipher{
		name: strings.Join(names, "-"), mode: "xts", need: 64 * n,
		decrypt: func(dst, src, dk []byte) bool {
			copy(dst, src)
			// The ciphers' key schedules, wiped after use: x/crypto's
			// XTS has no call for it.
			var blocks []cipher.Block
			defer func() {
				for _, b := range blocks {
					secret.WipeObject(b)
				}
			}()
			for i := n - 1; i >= 0; i-- {
				key := make([]byte, 64)
				copy(key, dk[32*i:32*i+32])
				copy(key[32:], dk[32*n+32*i:32*n+32*i+32])
				c, err := xxts.NewCipher(func(k []byte) (cipher.Block, error) {
					b, err := chain[i].new(k)
					if err == nil {
						blocks = append(blocks, b)
					}
					return b, err
				}, key)
				clear(key)
				if err != nil {
					return false
				}
				c.Decrypt(dst, dst, 0)
			}
			return true
		},
	}
}

// The chains tried besides AES-XTS: every XTS cipher and cascade of
// VeraCrypt and TrueCrypt 5+, and TrueCrypt's legacy AES-LRW and
// AES-CBC. Each chain is listed in key order; its name is VeraCrypt's.
var (
	// firstCiphers need only the first 64 bytes of the derived key.
	firstCiphers = []headerCipher{
		xtsChain(cSerpent), xtsChain(cTwofish), xtsChain(cCamellia), xtsChain(cKuznyechik),
		{name: "AES", mode: "lrw", need: 64, decrypt: decryptAESLRW},
		{name: "AES", mode: "cbc", need: 64, decrypt: decryptAESCBC},
	}
	// cascades need 128 or 192 bytes.
	cascades = []headerCipher{
		xtsChain(cTwofish, cAES),
		xtsChain(cSerpent, cTwofish, cAES),
		xtsChain(cAES, cSerpent),
		xtsChain(cAES, cTwofish, cSerpent),
		xtsChain(cSerpent, cTwofish),
		xtsChain(cKuznyechik, cCamellia),
		xtsChain(cSerpent, cCamellia),
		xtsChain(cAES, cKuznyechik),
		xtsChain(cCamellia, cSerpent, cKuznyechik),
		xtsChain(cTwofish, cKuznyechik),
	}
)

// decryptAESLRW decrypts a TrueCrypt 4.1-4.3 header: AES-256 with key
// dk[32:64] in LRW mode with tweak key dk[0:16], block j using the tweak
// K2 ⊗ (j+1) in GF(2^128) (big-endian, x^128 + x^7 + x^2 + x + 1).
func decryptAESLRW(dst, src, dk []byte) bool {
	b, err := aes.NewCipher(dk[32:64])
	if err != nil {
		return false
	}
	defer secret.WipeObject(b)
	k2hi, k2lo := binary.BigEndian.Uint64(dk[0:]), binary.BigEndian.Uint64(dk[8:])
	var t, x [16]byte
	for j := 0; j*16 < len(src); j++ {
		hi, lo := gfMul(k2hi, k2lo, 0, uint64(j+1))
		binary.BigEndian.PutUint64(t[:], hi)
		binary.BigEndian.PutUint64(t[8:], lo)
		for i := range x {
			x[i] = src[16*j+i] ^ t[i]
		}
		b.Decrypt(x[:], x[:])
		for i := range x {
			dst[16*j+i] = x[i] ^ t[i]
		}
	}
	return true
}

// gfMul multiplies a and b in GF(2^128), both read as big-endian
// 128-bit numbers whose bit i is the coefficient of x^i.
func gfMul(ahi, alo, bhi, blo uint64) (hi, lo uint64) {
	for i := 127; i >= 0; i-- {
		carry := hi >> 63
		hi = hi<<1 | lo>>63
		lo <<= 1
		if carry != 0 {
			lo ^= 0x87
		}
		var bit uint64
		if i >= 64 {
			bit = bhi >> (i - 64) & 1
		} else {
			bit = blo >> i & 1
		}
		if bit != 0 {
			hi ^= ahi
			lo ^= alo
		}
	}
	return hi, lo
}

// decryptAESCBC decrypts a TrueCrypt 1.0-4.0 header: every 8-byte group
// XORed with the whitening dk[8:16], then AES-256-CBC with key dk[32:64]
// and IV dk[0:16].
func decryptAESCBC(dst, src, dk []byte) bool {
	b, err := aes.NewCipher(dk[32:64])
	if err != nil {
		return false
	}
	defer secret.WipeObject(b)
	buf := make([]byte, len(src))
	defer clear(buf) // with src, it gives the whitening away
	for i := range buf {
		buf[i] = src[i] ^ dk[8+i%8]
	}
	// CBC by hand: crypto/cipher's CBC keeps a copy of the AES key
	// schedule that cannot be wiped.
	iv := dk[0:16]
	for i := 0; i < len(buf); i += 16 {
		b.Decrypt(dst[i:i+16], buf[i:i+16])
		subtle.XORBytes(dst[i:i+16], dst[i:i+16], iv)
		iv = buf[i : i+16]
	}
	return true
}
