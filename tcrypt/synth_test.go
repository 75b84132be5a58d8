package tcrypt

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/xtsctl/xtsctl/internal/pbkdf2"
	"github.com/xtsctl/xtsctl/xts"
)

// A synthetic header, made by the tests for what no sample image holds
// (versions, sizes and modes to refuse; legacy locations). The sample
// images prove that reading them is right; these prove the checks.
type synth struct {
	magic                        string
	version, minProg             uint16
	hiddenSize, volSize, dataOff uint64
	flags, sectorSize            uint32
	// The KDF: a row's hash and iterations.
	hash string
	iter int
	// encrypt encrypts the 448 bytes with the derived key; nil is
	// AES-XTS.
	encrypt func(dst, src, dk []byte)
	keys    [keyAreaSz]byte
}

func defaultSynth() synth {
	s := synth{magic: "VERA", version: 5, minProg: 0x010b, volSize: 64 << 10, dataOff: 128 << 10,
		sectorSize: 512, hash: hashSHA512, iter: nonBootPIM(1)}
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range s.keys {
		s.keys[i] = byte(rng.Uint32())
	}
	return s
}

// sector returns the encrypted header sector for pass (salt from seed).
func (s synth) sector(t testing.TB, pass []byte, seed uint64) [headerSize]byte {
	t.Helper()
	var out [headerSize]byte
	rng := rand.New(rand.NewPCG(seed, 1))
	for i := range saltSize {
		out[i] = byte(rng.Uint32())
	}
	var h [encSize]byte
	copy(h[0:], s.magic)
	binary.BigEndian.PutUint16(h[4:], s.version)
	binary.BigEndian.PutUint16(h[6:], s.minProg)
	binary.BigEndian.PutUint32(h[8:], crc32.ChecksumIEEE(s.keys[:]))
	binary.BigEndian.PutUint64(h[28:], s.hiddenSize)
	binary.BigEndian.PutUint64(h[36:], s.volSize)
	binary.BigEndian.PutUint64(h[44:], s.dataOff)
	binary.BigEndian.PutUint64(h[52:], s.volSize)
	binary.BigEndian.PutUint32(h[60:], s.flags)
	binary.BigEndian.PutUint32(h[64:], s.sectorSize)
	if s.version >= 4 {
		binary.BigEndian.PutUint32(h[188:], crc32.ChecksumIEEE(h[:188]))
	}
	copy(h[keyAreaOff:], s.keys[:])
	p := pbkdf2.New(newHash(s.hash), pass, out[:saltSize], s.iter)
	dk, err := p.Derive(context.Background(), dkLen)
	if err != nil {
		t.Fatal(err)
	}
	enc := s.encrypt
	if enc == nil {
		enc = encryptAESXTS
	}
	enc(out[saltSize:], h[:], dk)
	return out
}

func encryptAESXTS(dst, src, dk []byte) {
	c, err := xts.NewCipher(dk[:64])
	if err != nil {
		panic(err)
	}
	c.Encrypt(dst, src, 0)
}

// encryptAESLRW is decryptAESLRW's inverse: C = E(P ⊕ T) ⊕ T.
func encryptAESLRW(dst, src, dk []byte) {
	b, _ := aes.NewCipher(dk[32:64])
	k2hi, k2lo := binary.BigEndian.Uint64(dk), binary.BigEndian.Uint64(dk[8:])
	var t, x [16]byte
	for j := 0; j*16 < len(src); j++ {
		hi, lo := gfMul(k2hi, k2lo, 0, uint64(j+1))
		binary.BigEndian.PutUint64(t[:], hi)
		binary.BigEndian.PutUint64(t[8:], lo)
		for i := range x {
			x[i] = src[16*j+i] ^ t[i]
		}
		b.Encrypt(x[:], x[:])
		for i := range x {
			dst[16*j+i] = x[i] ^ t[i]
		}
	}
}

// encryptAESCBC is decryptAESCBC's inverse: CBC, then the whitening.
func encryptAESCBC(dst, src, dk []byte) {
	b, _ := aes.NewCipher(dk[32:64])
	cipher.NewCBCEncrypter(b, dk[0:16]).CryptBlocks(dst, src)
	for i := range dst {
		dst[i] ^= dk[8+i%8]
	}
}

// volume writes an image of size bytes with s's header at headerAt (and
// random bytes elsewhere) and returns its path.
func (s synth) volume(t testing.TB, pass []byte, size, headerAt int64) string {
	t.Helper()
	img := make([]byte, size)
	rng := rand.New(rand.NewPCG(uint64(size), 9))
	for i := range img {
		img[i] = byte(rng.Uint32())
	}
	sec := s.sector(t, pass, 77)
	copy(img[headerAt:], sec[:])
	path := filepath.Join(t.TempDir(), "synth.img")
	if err := os.WriteFile(path, img, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
