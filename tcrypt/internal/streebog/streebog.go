// Package streebog implements the GOST R 34.11-2012 hash function
// "Streebog" (RFC 6986) with 512- and 256-bit digests, which VeraCrypt
// uses in PBKDF2-HMAC (Streebog-512).
//
// No Go module providing it can be fetched here, so it is written from
// RFC 6986: the 512-bit state is kept as eight little-endian 64-bit words
// (byte 0 of a block is the least significant byte of the number the RFC
// writes), and the S-box π, the byte permutation τ and the linear map l
// are folded into eight lookup tables at start-up. Digests are the bytes of
// the final state in that order (the RFC prints numbers most significant
// byte first, so its printed examples read backwards). The tests hold the
// RFC's examples. Digests implement encoding.BinaryMarshaler so that
// crypto/hmac keeps its padded-key states.
package streebog

import (
	"encoding/binary"
	"errors"
	"hash"
)

// BlockSize is the block size in bytes; Size512 and Size256 the digest
// sizes.
const (
	BlockSize = 64
	Size512   = 64
	Size256   = 32
)

// pi is the S-box π' of RFC 6986 section 6.1.
var pi = [256]byte{
	252, 238, 221, 17, 207, 110, 49, 22, 251, 196, 250, 218, 35, 197, 4, 77,
	233, 119, 240, 219, 147, 46, 153, 186, 23, 54, 241, 187, 20, 205, 95, 193,
	249, 24, 101, 90, 226, 92, 239, 33, 129, 28, 60, 66, 139, 1, 142, 79,
	5, 132, 2, 174, 227, 106, 143, 160, 6, 11, 237, 152, 127, 212, 211, 31,
	235, 52, 44, 81, 234, 200, 72, 171, 242, 42, 104, 162, 253, 58, 206, 204,
	181, 112, 14, 86, 8, 12, 118, 18, 191, 114, 19, 71, 156, 183, 93, 135,
	21, 161, 150, 41, 16, 123, 154, 199, 243, 145, 120, 111, 157, 158, 178, 177,
	50, 117, 25, 61, 255, 53, 138, 126, 109, 84, 198, 128, 195, 189, 13, 87,
	223, 245, 36, 169, 62, 168, 67, 201, 215, 121, 214, 246, 124, 34, 185, 3,
	224, 15, 236, 222, 122, 148, 176, 188, 220, 232, 40, 80, 78, 51, 10, 74,
	167, 151, 96, 115, 30, 0, 98, 68, 26, 184, 56, 130, 100, 159, 38, 65,
	173, 69, 70, 146, 39, 94, 85, 47, 140, 163, 165, 125, 105, 213, 149, 59,
	7, 88, 179, 64, 134, 172, 29, 247, 48, 55, 107, 228, 136, 217, 231, 137,
	225, 27, 131, 73, 76, 63, 248, 254, 141, 83, 170, 144, 202, 216, 133, 97,
	32, 113, 103, 164, 45, 43, 9, 91, 203, 155, 37, 208, 190, 229, 108, 82,
	89, 166, 116, 210, 230, 244, 180, 192, 209, 102, 175, 194, 57, 75, 99, 182,
}

// a is the matrix of the linear map l (RFC 6986 section 6.3): bit 63-j of
// a 64-bit word contributes row a[j].
var a = [64]uint64{
	0x8e20faa72ba0b470, 0x47107ddd9b505a38, 0xad08b0e0c3282d1c, 0xd8045870ef14980e,
	0x6c022c38f90a4c07, 0x3601161cf205268d, 0x1b8e0b0e798c13c8, 0x83478b07b2468764,
	0xa011d380818e8f40, 0x5086e740ce47c920, 0x2843fd2067adea10, 0x14aff010bdd87508,
	0x0ad97808d06cb404, 0x05e23c0468365a02, 0x8c711e02341b2d01, 0x46b60f011a83988e,
	0x90dab52a387ae76f, 0x486dd4151c3dfdb9, 0x24b86a840e90f0d2, 0x125c354207487869,
	0x092e94218d243cba, 0x8a174a9ec8121e5d, 0x4585254f64090fa0, 0xaccc9ca9328a8950,
	0x9d4df05d5f661451, 0xc0a878a0a1330aa6, 0x60543c50de970553, 0x302a1e286fc58ca7,
	0x18150f14b9ec46dd, 0x0c84890ad27623e0, 0x0642ca05693b9f70, 0x0321658cba93c138,
	0x86275df09ce8aaa8, 0x439da0784e745554, 0xafc0503c273aa42a, 0xd960281e9d1d5215,
	0xe230140fc0802984, 0x71180a8960409a42, 0xb60c05ca30204d21, 0x5b068c651810a89e,
	0x456c34887a3805b9, 0xac361a443d1c8cd2, 0x561b0d22900e4669, 0x2b838811480723ba,
	0x9bcf4486248d9f5d, 0xc3e9224312c8c1a0, 0xeffa11af0964ee50, 0xf97d86d98a327728,
	0xe4fa2054a80b329c, 0x727d102a548b194e, 0x39b008152acb8227, 0x9258048415eb419d,
	0x492c024284fbaec0, 0xaa16012142f35760, 0x550b8e9e21f7a530, 0xa48b474f9ef5dc18,
	0x70a6a56e2440598e, 0x3853dc371220a247, 0x1ca76e95091051ad, 0x0edd37c48a08a6d8,
	0x07e095624504536c, 0x8d70c431ac02a736, 0xc83862965601dd1b, 0x641c314b2b8ee083,
}

// cHex are the iteration constants C1..C12 of RFC 6986 section 6.4, as
// the RFC prints them (most significant byte first).
var cHex = [12]string{
	"b1085bda1ecadae9ebcb2f81c0657c1f2f6a76432e45d016714eb88d7585c4fc4b7ce09192676901a2422a08a460d31505767436cc744d23dd806559f2a64507",
	"6fa3b58aa99d2f1a4fe39d460f70b5d7f3feea720a232b9861d55e0f16b501319ab5176b12d699585cb561c2db0aa7ca55dda21bd7cbcd56e679047021b19bb7",
	"f574dcac2bce2fc70a39fc286a3d843506f15e5f529c1f8bf2ea7514b1297b7bd3e20fe490359eb1c1c93a376062db09c2b6f443867adb31991e96f50aba0ab2",
	"ef1fdfb3e81566d2f948e1a05d71e4dd488e857e335c3c7d9d721cad685e353fa9d72c82ed03d675d8b71333935203be3453eaa193e837f1220cbebc84e3d12e",
	"4bea6bacad4747999a3f410c6ca923637f151c1f1686104a359e35d7800fffbdbfcd1747253af5a3dfff00b723271a167a56a27ea9ea63f5601758fd7c6cfe57",
	"ae4faeae1d3ad3d96fa4c33b7a3039c02d66c4f95142a46c187f9ab49af08ec6cffaa6b71c9ab7b40af21f66c2bec6b6bf71c57236904f35fa68407a46647d6e",
	"f4c70e16eeaac5ec51ac86febf240954399ec6c7e6bf87c9d3473e33197a93c90992abc52d822c3706476983284a05043517454ca23c4af38886564d3a14d493",
	"9b1f5b424d93c9a703e7aa020c6e41414eb7f8719c36de1e89b4443b4ddbc49af4892bcb929b069069d18d2bd1a5c42f36acc2355951a8d9a47f0dd4bf02e71e",
	"378f5a541631229b944c9ad8ec165fde3a7d3a1b258942243cd955b7e00d0984800a440bdbb2ceb17b2b8a9aa6079c540e38dc92cb1f2a607261445183235adb",
	"abbedea680056f52382ae548b2e4f3f38941e71cff8a78db1fffe18a1b3361039fe76702af69334b7a1e6c303b7652f43698fad1153bb6c374b4c7fb98459ced",
	"7bcd9ed0efc889fb3002c6cd635afe94d8fa6bbbebab076120018021148466798a1d71efea48b9caefbacd1d7d476e98dea2594ac06fd85d6bcaa4cd81f32d1b",
	"378ee767f11631bad21380b00449b17acda43c32bcdf1d77f82012d430219f9b5d80ef9d1891cc86e71da4aa88e12852faf417d5d9b21b9948bc924af11bd720",
}

var (
	// lps[c][x] is l applied to π'(x) placed in byte c of a word.
	lps [8][256]uint64
	c   [12][8]uint64
)

func init() {
	l := func(v uint64) uint64 {
		var r uint64
		for j := range 64 {
			if v&(1<<(63-j)) != 0 {
				r ^= a[j]
			}
		}
		return r
	}
	for k := range 8 {
		for x := range 256 {
			lps[k][x] = l(uint64(pi[x]) << (8 * k))
		}
	}
	for i, s := range cHex {
		var b [64]byte
		for j := range 64 {
			b[63-j] = unhex(s[2*j])<<4 | unhex(s[2*j+1])
		}
		for w := range 8 {
			c[i][w] = binary.LittleEndian.Uint64(b[8*w:])
		}
	}
}

func unhex(ch byte) byte {
	if ch >= 'a' {
		return ch - 'a' + 10
	}
	return ch - '0'
}

// transform is LPS: S (π' on each byte), P (τ, the transposition of the
// 8x8 byte matrix) and L (l on each word), through the tables.
func transform(in *[8]uint64) [8]uint64 {
	var out [8]uint64
	for r := range 8 {
		sh := 8 * r
		out[r] = lps[0][byte(in[0]>>sh)] ^ lps[1][byte(in[1]>>sh)] ^
			lps[2][byte(in[2]>>sh)] ^ lps[3][byte(in[3]>>sh)] ^
			lps[4][byte(in[4]>>sh)] ^ lps[5][byte(in[5]>>sh)] ^
			lps[6][byte(in[6]>>sh)] ^ lps[7][byte(in[7]>>sh)]
	}
	return out
}

func xor(x, y *[8]uint64) [8]uint64 {
	var r [8]uint64
	for i := range 8 {
		r[i] = x[i] ^ y[i]
	}
	return r
}

// g is the compression function g_N(h, m) of RFC 6986 section 7.
func g(h *[8]uint64, n *[8]uint64, m *[8]uint64) {
	t := xor(h, n)
	k := transform(&t)
	s := *m
	for i := range 12 {
		t = xor(&k, &s)
		s = transform(&t)
		t = xor(&k, &c[i])
		k = transform(&t)
	}
	for i := range 8 {
		h[i] ^= k[i] ^ s[i] ^ m[i]
	}
}

// add512 adds y to x modulo 2^512.
func add512(x *[8]uint64, y *[8]uint64) {
	var carry uint64
	for i := range 8 {
		s := x[i] + y[i]
		c1 := b2u(s < x[i])
		s2 := s + carry
		c2 := b2u(s2 < s)
		x[i] = s2
		carry = c1 | c2
	}
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

type digest struct {
	size  int
	h     [8]uint64
	n     [8]uint64 // bits hashed, a 512-bit number
	sigma [8]uint64 // sum of the blocks, modulo 2^512
	buf   [BlockSize]byte
	nbuf  int
}

// New512 returns a Streebog-512 hash; New256 a Streebog-256 hash.
func New512() hash.Hash { d := &digest{size: Size512}; d.Reset(); return d }
func New256() hash.Hash { d := &digest{size: Size256}; d.Reset(); return d }

// Sum512 returns the Streebog-512 digest of data.
func Sum512(data []byte) [Size512]byte {
	d := New512()
	d.Write(data)
	var out [Size512]byte
	d.Sum(out[:0])
	return out
}

func (d *digest) Size() int      { return d.size }
func (d *digest) BlockSize() int { return BlockSize }

func (d *digest) Reset() {
	*d = digest{size: d.size}
	if d.size == Size256 {
		for i := range d.h {
			d.h[i] = 0x0101010101010101
		}
	}
}

func words(p []byte) [8]uint64 {
	var m [8]uint64
	for i := range m {
		m[i] = binary.LittleEndian.Uint64(p[8*i:])
	}
	return m
}

func (d *digest) block(p []byte) {
	m := words(p)
	g(&d.h, &d.n, &m)
	add512(&d.n, &[8]uint64{512})
	add512(&d.sigma, &m)
}

func (d *digest) Write(p []byte) (int, error) {
	n := len(p)
	if d.nbuf > 0 {
		k := copy(d.buf[d.nbuf:], p)
		d.nbuf += k
		p = p[k:]
		if d.nbuf < BlockSize {
			return n, nil
		}
		d.block(d.buf[:])
		d.nbuf = 0
	}
	for len(p) >= BlockSize {
		d.block(p[:BlockSize])
		p = p[BlockSize:]
	}
	d.nbuf = copy(d.buf[:], p)
	return n, nil
}

func (d *digest) Sum(in []byte) []byte {
	c := *d
	// The rest, then 0x01 and zeros: the RFC's 0...01||M read backwards.
	var last [BlockSize]byte
	copy(last[:], c.buf[:c.nbuf])
	last[c.nbuf] = 1
	m := words(last[:])
	g(&c.h, &c.n, &m)
	add512(&c.n, &[8]uint64{uint64(c.nbuf) * 8})
	add512(&c.sigma, &m)
	var zero [8]uint64
	g(&c.h, &zero, &c.n)
	g(&c.h, &zero, &c.sigma)
	var out [Size512]byte
	for i, v := range c.h {
		binary.LittleEndian.PutUint64(out[8*i:], v)
	}
	return append(in, out[Size512-c.size:]...)
}

const magic = "stbg\x01"

// MarshalBinary saves the state (for crypto/hmac).
func (d *digest) MarshalBinary() ([]byte, error) { return d.AppendBinary(nil) }

// AppendBinary appends the state to b.
func (d *digest) AppendBinary(b []byte) ([]byte, error) {
	b = append(b, magic...)
	b = append(b, byte(d.size), byte(d.nbuf))
	for _, w := range [][8]uint64{d.h, d.n, d.sigma} {
		for _, v := range w {
			b = binary.LittleEndian.AppendUint64(b, v)
		}
	}
	return append(b, d.buf[:]...), nil
}

// UnmarshalBinary restores a state saved by MarshalBinary.
func (d *digest) UnmarshalBinary(b []byte) error {
	if len(b) != len(magic)+2+3*64+BlockSize || string(b[:len(magic)]) != magic {
		return errors.New("streebog: invalid hash state")
	}
	b = b[len(magic):]
	size, nbuf := int(b[0]), int(b[1])
	if (size != Size512 && size != Size256) || size != d.size || nbuf >= BlockSize {
		return errors.New("streebog: invalid hash state")
	}
	d.nbuf = nbuf
	b = b[2:]
	for _, w := range []*[8]uint64{&d.h, &d.n, &d.sigma} {
		for i := range w {
			w[i] = binary.LittleEndian.Uint64(b)
			b = b[8:]
		}
	}
	copy(d.buf[:], b)
	return nil
}

// Pi returns the S-box π' that GOST R 34.11-2012 shares with GOST R
// 34.12-2015 (Kuznyechik).
func Pi() [256]byte { return pi }
