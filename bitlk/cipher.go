package bitlk

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/subtle"
	"encoding/binary"
	"fmt"
	"math/bits"
	"runtime"
	"sync"

	"github.com/xtsctl/xtsctl/disk"
	"github.com/xtsctl/xtsctl/internal/secret"
	"github.com/xtsctl/xtsctl/sector"
	"github.com/xtsctl/xtsctl/xts"
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
//
// CBC decryption is AES decryption of every block, each then XORed with
// the block before it: the AES part runs on the XTS engine (package xts,
// AES-NI or VAES), many sectors a call, through ecbDecrypter. Encryption
// (chained, one block at a time) uses crypto/cipher's CBC.
type cbcCodec struct {
	p        sector.Params
	data     cipher.Block // the CBC key
	diff     cipher.Block // the Elephant diffuser key; nil without it
	ecb      *ecbDecrypter
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
	cbcKey := c.keyBytes
	var err error
	if elephant {
		if len(key) != 32 && len(key) != 64 {
			clear(c.keyBytes)
			return nil, fmt.Errorf("%s: a key of %d bytes (want 32 or 64: the CBC key and the diffuser key)", CipherCBCElephant, len(key))
		}
		cbcKey = c.keyBytes[:len(key)/2]
		c.diff, err = aes.NewCipher(c.keyBytes[len(key)/2:])
	} else if len(key) != 16 && len(key) != 32 {
		clear(c.keyBytes)
		return nil, fmt.Errorf("%s: a key of %d bytes (want 16 or 32)", CipherCBCEBOIV, len(key))
	}
	if err == nil {
		c.data, err = aes.NewCipher(cbcKey)
	}
	if err == nil {
		c.ecb, err = newECBDecrypter(cbcKey, p.Size)
	}
	if err != nil {
		clear(c.keyBytes)
		return nil, err
	}
	return c, nil
}

// SetWorkers limits the cores one call may use.
func (c *cbcCodec) SetWorkers(n int) { c.workers = max(n, 1) }

// Wipe erases the codec's copy of the key and the key schedules: the
// engine's, and crypto/aes's for the IVs, the sector keys and encryption
// (which has no call for it).
func (c *cbcCodec) Wipe() {
	clear(c.keyBytes)
	c.ecb.wipe()
	secret.WipeObject(c.data)
	if c.diff != nil {
		secret.WipeObject(c.diff)
	}
}

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

// batch is how much one chunk decrypts per engine call.
const batch = 64 << 10

// scratch is one chunk's working memory, reused.
type scratch struct {
	iv    [16]byte
	e     [16]byte
	ks    [32]byte
	words [sector.MaxSize / 4]uint32
	buf   [batch]byte
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// ivSetter is what crypto/cipher's CBC modes offer to change the IV
// without a new mode (and a copy of the key schedule) per sector.
type ivSetter interface{ SetIV([]byte) }

func (c *cbcCodec) chunk(dst, src []byte, first uint64, decrypt bool) {
	sc := scratchPool.Get().(*scratch)
	defer func() {
		clear(sc.words[:])
		clear(sc.ks[:])
		scratchPool.Put(sc)
	}()
	if decrypt {
		for done := 0; done < len(src); done += batch {
			n := min(batch, len(src)-done)
			c.decryptBatch(sc, dst[done:done+n], src[done:done+n], first+uint64(done/c.p.Size))
		}
		clear(sc.buf[:])
		return
	}
	size := c.p.Size
	var mode cipher.BlockMode
	for i := 0; i < len(src); i += size {
		off := c.p.Tweak(first+uint64(i/size)) * uint64(size)
		c.eboiv(sc, off)
		d, s := dst[i:i+size], src[i:i+size]
		if mode == nil {
			mode = cipher.NewCBCEncrypter(c.data, sc.iv[:])
		} else {
			mode.(ivSetter).SetIV(sc.iv[:])
		}
		if c.diff != nil {
			if &d[0] != &s[0] {
				copy(d, s)
			}
			c.sectorKey(sc, off)
			xorSectorKey(d, &sc.ks)
			w := sc.words[:size/4]
			load(w, d)
			diffuserAEncrypt(w)
			diffuserBEncrypt(w)
			store(d, w)
			s = d
		}
		mode.CryptBlocks(d, s)
	}
}

// decryptBatch decrypts at most batch bytes of whole sectors.
func (c *cbcCodec) decryptBatch(sc *scratch, dst, src []byte, first uint64) {
	size := c.p.Size
	tmp := sc.buf[:len(src)]
	c.ecb.decrypt(tmp, src)
	for i := 0; i < len(src); i += size {
		off := c.p.Tweak(first+uint64(i/size)) * uint64(size)
		c.eboiv(sc, off)
		t, s := tmp[i:i+size], src[i:i+size]
		// Chain: block 0 takes the IV, block j the ciphertext j-1.
		subtle.XORBytes(t[:16], t[:16], sc.iv[:])
		subtle.XORBytes(t[16:], t[16:], s[:size-16])
		if c.diff != nil {
			w := sc.words[:size/4]
			load(w, t)
			diffuserBDecrypt(w)
			diffuserADecrypt(w)
			store(t, w)
			c.sectorKey(sc, off)
			xorSectorKey(t, &sc.ks)
		}
	}
	copy(dst, tmp)
}

// eboiv sets sc.iv to the IV of the sector at byte offset off:
// E_K(off as u64 LE, then eight zero bytes).
func (c *cbcCodec) eboiv(sc *scratch, off uint64) {
	sc.iv = [16]byte{}
	binary.LittleEndian.PutUint64(sc.iv[:], off)
	c.data.Encrypt(sc.iv[:], sc.iv[:])
}

// sectorKey sets sc.ks to Elephant's 32-byte sector key: E_Kd(e) ||
// E_Kd(e') with e the byte offset as u64 LE and zeros, e' the same with
// byte 15 0x80.
func (c *cbcCodec) sectorKey(sc *scratch, off uint64) {
	sc.e = [16]byte{}
	binary.LittleEndian.PutUint64(sc.e[:], off)
	c.diff.Encrypt(sc.ks[:16], sc.e[:])
	sc.e[15] = 0x80
	c.diff.Encrypt(sc.ks[16:], sc.e[:])
}

func xorSectorKey(d []byte, ks *[32]byte) {
	for i := 0; i < len(d); i += 32 {
		subtle.XORBytes(d[i:i+32], d[i:i+32], ks[:])
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

// ecbDecrypter decrypts whole units of AES blocks with the XTS engine.
// XTS decryption of a unit is P_j = D(C_j ^ T_j) ^ T_j, T_j the tweak
// mask of block j; with one tweak for every unit the masks are the same
// for all, and with them known, D(X_j) = XTS-D(X ^ T)_j ^ T_j. key2, the
// tweak key, is a constant: the masks need no secrecy here.
type ecbDecrypter struct {
	x    *xts.Cipher
	unit int
	mask []byte // T_0 .. T_{unit/16-1}
}

func newECBDecrypter(key []byte, unit int) (*ecbDecrypter, error) {
	k2 := make([]byte, len(key))
	for i := range k2 {
		k2[i] = 0x5c
	}
	if bytes.Equal(k2, key) {
		k2[0] = 0x36
	}
	xkey := append(append(make([]byte, 0, 2*len(key)), key...), k2...)
	defer clear(xkey)
	x, err := xts.NewCipher(xkey)
	if err != nil {
		return nil, err
	}
	tb, err := aes.NewCipher(k2)
	if err != nil {
		return nil, err
	}
	e := &ecbDecrypter{x: x, unit: unit, mask: make([]byte, unit)}
	var t [16]byte // tweak 0, encrypted with key2, then times alpha per block
	tb.Encrypt(t[:], t[:])
	for j := 0; j < unit; j += 16 {
		copy(e.mask[j:], t[:])
		lo, hi := binary.LittleEndian.Uint64(t[:8]), binary.LittleEndian.Uint64(t[8:])
		carry := hi >> 63
		hi = hi<<1 | lo>>63
		lo = lo<<1 ^ carry*0x87
		binary.LittleEndian.PutUint64(t[:8], lo)
		binary.LittleEndian.PutUint64(t[8:], hi)
	}
	return e, nil
}

// decrypt AES-decrypts every block of src (whole units) into dst, which
// must not overlap it.
func (e *ecbDecrypter) decrypt(dst, src []byte) {
	for i := 0; i < len(src); i += e.unit {
		subtle.XORBytes(dst[i:i+e.unit], src[i:i+e.unit], e.mask)
	}
	e.x.DecryptSectors(dst, dst[:len(src)], e.unit, 0, 0)
	for i := 0; i < len(src); i += e.unit {
		subtle.XORBytes(dst[i:i+e.unit], dst[i:i+e.unit], e.mask)
	}
}

func (e *ecbDecrypter) wipe() { e.x.Wipe() }

// The Elephant diffusers, on a sector of n 32-bit little-endian words
// (Niels Ferguson, "AES-CBC + Elephant diffuser", Microsoft 2006). Each
// decryption pass runs i = 0..n-1 in place, adding to word i the XOR of
// a neighbour and a rotated other neighbour (A: i-2 and i-5, rotations
// 9, 0, 13, 0 by i mod 4; B: i+2 and i+5, rotations 0, 10, 0, 25); A
// makes 5 passes, B 3. Encryption undoes a pass by subtracting from
// i = n-1 down to 0, which sees each neighbour as the decryption saw it.
// The words whose neighbours wrap around the sector's ends take the
// modular path; the rest run four at a time with the rotations fixed.
// n is a multiple of 4 and at least 128 (sectors of 512 bytes or more);
// cipher_test.go holds the plain loops these are checked against.
const (
	passesA = 5
	passesB = 3
)

var (
	rotA = [4]int{9, 0, 13, 0}
	rotB = [4]int{0, 10, 0, 25}
)

func diffuserADecrypt(d []uint32) {
	n := len(d)
	for range passesA {
		for i := range 8 {
			d[i] += d[wrapDown(i-2, n)] ^ bits.RotateLeft32(d[wrapDown(i-5, n)], rotA[i%4])
		}
		for i := 8; i+4 <= n; i += 4 {
			x := d[i-5 : i+4 : i+4] // x[5] is d[i]
			x[5] += x[3] ^ bits.RotateLeft32(x[0], 9)
			x[6] += x[4] ^ x[1]
			x[7] += x[5] ^ bits.RotateLeft32(x[2], 13)
			x[8] += x[6] ^ x[3]
		}
	}
}

func diffuserAEncrypt(d []uint32) {
	n := len(d)
	for range passesA {
		for i := n - 4; i >= 8; i -= 4 {
			x := d[i-5 : i+4 : i+4]
			x[8] -= x[6] ^ x[3]
			x[7] -= x[5] ^ bits.RotateLeft32(x[2], 13)
			x[6] -= x[4] ^ x[1]
			x[5] -= x[3] ^ bits.RotateLeft32(x[0], 9)
		}
		for i := 7; i >= 0; i-- {
			d[i] -= d[wrapDown(i-2, n)] ^ bits.RotateLeft32(d[wrapDown(i-5, n)], rotA[i%4])
		}
	}
}

func diffuserBDecrypt(d []uint32) {
	n := len(d)
	for range passesB {
		i := 0
		for ; i+9 <= n; i += 4 {
			x := d[i : i+9 : i+9] // x[0] is d[i]
			x[0] += x[2] ^ x[5]
			x[1] += x[3] ^ bits.RotateLeft32(x[6], 10)
			x[2] += x[4] ^ x[7]
			x[3] += x[5] ^ bits.RotateLeft32(x[8], 25)
		}
		for ; i < n; i++ {
			d[i] += d[wrapUp(i+2, n)] ^ bits.RotateLeft32(d[wrapUp(i+5, n)], rotB[i%4])
		}
	}
}

func diffuserBEncrypt(d []uint32) {
	n := len(d)
	for range passesB {
		last := (n - 9) &^ 3 // the last group the fast loop of decryption ran
		for i := n - 1; i >= last+4; i-- {
			d[i] -= d[wrapUp(i+2, n)] ^ bits.RotateLeft32(d[wrapUp(i+5, n)], rotB[i%4])
		}
		for i := last; i >= 0; i -= 4 {
			x := d[i : i+9 : i+9]
			x[3] -= x[5] ^ bits.RotateLeft32(x[8], 25)
			x[2] -= x[4] ^ x[7]
			x[1] -= x[3] ^ bits.RotateLeft32(x[6], 10)
			x[0] -= x[2] ^ x[5]
		}
	}
}

// wrapDown and wrapUp bring an index at most n below or above [0, n)
// back into it, without a division.
func wrapDown(i, n int) int {
	if i < 0 {
		return i + n
	}
	return i
}

func wrapUp(i, n int) int {
	if i >= n {
		return i - n
	}
	return i
}
