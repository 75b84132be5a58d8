package bitlk

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"fmt"
	"math/bits"
	"runtime"
	"sync"

	"github.com/xtsctl/xtsctl/disk"
	"github.com/xtsctl/xtsctl/sector"
)

// BitLocker's ciphers other than AES-XTS, under dm-crypt's names (the
// kernel's eboiv and elephant IV generators, which cryptsetup's BITLK
// tables use).
const (
	// CipherCBCEBOIV is AES-CBC whose IV is the sector's byte offset
	// encrypted with the data key (Windows 8 and later, methods 0x8002,
	// 0x8003). Key: the AES key, 16 or 32 bytes.
	CipherCBCEBOIV = "aes-cbc-eboiv"
	// CipherCBCElephant is AES-CBC with EBOIV IVs and the Elephant
	// diffuser (Windows Vista and 7, methods 0x8000, 0x8001). Key: the CBC
	// key followed by the diffuser key of the same size (32 or 64 bytes).
	CipherCBCElephant = "aes-cbc-elephant"
)

func init() {
	disk.RegisterCipher(CipherCBCEBOIV, func(key []byte, p sector.Params) (disk.Codec, error) {
		return newCBCCodec(key, p, false)
	})
	disk.RegisterCipher(CipherCBCElephant, func(key []byte, p sector.Params) (disk.Codec, error) {
		return newCBCCodec(key, p, true)
	})
}

// cbcCodec is AES-CBC-EBOIV, with or without the Elephant diffuser, over
// runs of sectors. Sector n's IV is dm-crypt's: the IV number p.Tweak(n)
// times the sector size (the byte offset when the tweak counts sectors
// of that size, as BitLocker's layout has it), little-endian in a block
// of zeros, encrypted with the CBC key.
type cbcCodec struct {
	p        sector.Params
	data     cipher.Block // the CBC key
	diff     cipher.Block // the Elephant diffuser key; nil without it
	workers  int
	keyBytes []byte // our copy of the key, wiped by Wipe
}

// parallelMin is the smallest run split over several cores.
const parallelMin = 64 << 10

func newCBCCodec(key []byte, p sector.Params, elephant bool) (*cbcCodec, error) {
	if err := p.Check(); err != nil {
		return nil, err
	}
	c := &cbcCodec{p: p, workers: runtime.GOMAXPROCS(0), keyBytes: append([]byte(nil), key...)}
	var err error
	if elephant {
		if len(key) != 32 && len(key) != 64 {
			return nil, fmt.Errorf("%s: a key of %d bytes (want 32 or 64: the CBC key and the diffuser key)", CipherCBCElephant, len(key))
		}
		half := len(key) / 2
		if c.data, err = aes.NewCipher(c.keyBytes[:half]); err == nil {
			c.diff, err = aes.NewCipher(c.keyBytes[half:])
		}
	} else {
		if len(key) != 16 && len(key) != 32 {
			return nil, fmt.Errorf("%s: a key of %d bytes (want 16 or 32)", CipherCBCEBOIV, len(key))
		}
		c.data, err = aes.NewCipher(c.keyBytes)
	}
	if err != nil {
		clear(c.keyBytes)
		return nil, err
	}
	return c, nil
}

// SetWorkers limits the cores one call may use.
func (c *cbcCodec) SetWorkers(n int) { c.workers = max(n, 1) }

// Wipe erases the codec's copy of the key. (crypto/aes offers no way to
// erase the key schedules it expanded; they go with the codec.)
func (c *cbcCodec) Wipe() { clear(c.keyBytes) }

func (c *cbcCodec) Encrypt(dst, src []byte, first uint64) { c.run(dst, src, first, false) }
func (c *cbcCodec) Decrypt(dst, src []byte, first uint64) { c.run(dst, src, first, true) }

func (c *cbcCodec) run(dst, src []byte, first uint64, decrypt bool) {
	size := c.p.Size
	if len(src)%size != 0 {
		panic(fmt.Sprintf("bitlk: %d bytes is not a whole number of %d-byte sectors", len(src), size))
	}
	if len(dst) < len(src) {
		panic("bitlk: output smaller than input")
	}
	sectors := len(src) / size
	workers := min(c.workers, len(src)/(parallelMin/2))
	if workers <= 1 {
		c.chunk(dst, src, first, decrypt)
		return
	}
	per := (sectors + workers - 1) / workers
	var wg sync.WaitGroup
	for lo := 0; lo < sectors; lo += per {
		hi := min(lo+per, sectors)
		d, s, n := dst[lo*size:hi*size], src[lo*size:hi*size], first+uint64(lo)
		if hi == sectors {
			c.chunk(d, s, n, decrypt)
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.chunk(d, s, n, decrypt)
		}()
	}
	wg.Wait()
}

// ivSetter is what crypto/cipher's CBC modes offer to change the IV
// without a new mode (and a copy of the key schedule) per sector.
type ivSetter interface{ SetIV([]byte) }

func (c *cbcCodec) chunk(dst, src []byte, first uint64, decrypt bool) {
	size := c.p.Size
	var iv [16]byte
	var mode cipher.BlockMode
	var words [sector.MaxSize / 4]uint32
	var ks [32]byte
	for i := 0; i < len(src); i += size {
		n := first + uint64(i/size)
		off := c.p.Tweak(n) * uint64(size)
		c.eboiv(&iv, off)
		d, s := dst[i:i+size], src[i:i+size]
		switch {
		case mode == nil && decrypt:
			mode = cipher.NewCBCDecrypter(c.data, iv[:])
		case mode == nil:
			mode = cipher.NewCBCEncrypter(c.data, iv[:])
		default:
			mode.(ivSetter).SetIV(iv[:])
		}
		if c.diff == nil {
			mode.CryptBlocks(d, s)
			continue
		}
		w := words[:size/4]
		c.sectorKey(&ks, off)
		if decrypt {
			mode.CryptBlocks(d, s)
			load(w, d)
			diffuserBDecrypt(w)
			diffuserADecrypt(w)
			store(d, w)
			xorSectorKey(d, &ks)
		} else {
			if &d[0] != &s[0] {
				copy(d, s)
			}
			xorSectorKey(d, &ks)
			load(w, d)
			diffuserAEncrypt(w)
			diffuserBEncrypt(w)
			store(d, w)
			mode.CryptBlocks(d, d)
		}
	}
	clear(words[:])
	clear(ks[:])
}

// eboiv is the IV of the sector at byte offset off: E_K(off as u64 LE,
// then eight zero bytes).
func (c *cbcCodec) eboiv(iv *[16]byte, off uint64) {
	*iv = [16]byte{}
	binary.LittleEndian.PutUint64(iv[:], off)
	c.data.Encrypt(iv[:], iv[:])
}

// sectorKey is Elephant's 32-byte sector key: E_Kd(e) || E_Kd(e') with e
// the byte offset as u64 LE and zeros, e' the same with byte 15 0x80.
func (c *cbcCodec) sectorKey(ks *[32]byte, off uint64) {
	var e [16]byte
	binary.LittleEndian.PutUint64(e[:], off)
	c.diff.Encrypt(ks[:16], e[:])
	e[15] = 0x80
	c.diff.Encrypt(ks[16:], e[:])
}

func xorSectorKey(d []byte, ks *[32]byte) {
	for i := 0; i < len(d); i += 32 {
		for j := range 32 {
			d[i+j] ^= ks[j]
		}
	}
}

func load(w []uint32, b []byte) {
	for i := range w {
		w[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
}

func store(b []byte, w []uint32) {
	for i, v := range w {
		binary.LittleEndian.PutUint32(b[4*i:], v)
	}
}

// The Elephant diffusers, on a sector of n 32-bit little-endian words
// (Niels Ferguson, "AES-CBC + Elephant diffuser", Microsoft 2006). Each
// decryption pass runs i = 0..n-1 in place, adding to word i the XOR of
// a neighbour and a rotated other neighbour (A: i-2 and i-5, rotations
// 9, 0, 13, 0; B: i+2 and i+5, rotations 0, 10, 0, 25); A makes 5
// passes, B 3. Encryption undoes a pass by subtracting from i = n-1
// down to 0, which sees each neighbour as the decryption saw it.
var (
	rotA = [4]int{9, 0, 13, 0}
	rotB = [4]int{0, 10, 0, 25}
)

const (
	passesA = 5
	passesB = 3
)

func diffuserADecrypt(d []uint32) {
	n := len(d)
	for range passesA {
		for i := range n {
			d[i] += d[(i-2+n)%n] ^ bits.RotateLeft32(d[(i-5+n)%n], rotA[i%4])
		}
	}
}

func diffuserAEncrypt(d []uint32) {
	n := len(d)
	for range passesA {
		for i := n - 1; i >= 0; i-- {
			d[i] -= d[(i-2+n)%n] ^ bits.RotateLeft32(d[(i-5+n)%n], rotA[i%4])
		}
	}
}

func diffuserBDecrypt(d []uint32) {
	n := len(d)
	for range passesB {
		for i := range n {
			d[i] += d[(i+2)%n] ^ bits.RotateLeft32(d[(i+5)%n], rotB[i%4])
		}
	}
}

func diffuserBEncrypt(d []uint32) {
	n := len(d)
	for range passesB {
		for i := n - 1; i >= 0; i-- {
			d[i] -= d[(i+2)%n] ^ bits.RotateLeft32(d[(i+5)%n], rotB[i%4])
		}
	}
}
