// Package blake2b implements the BLAKE2b hash and MAC (RFC 7693), with the
// API of golang.org/x/crypto/blake2b, and computes keyed BLAKE2b tags for
// many sectors at once (SumSectors, SumMany).
//
// On amd64 the work is done in assembly, chosen once at start-up from
// golang.org/x/sys/cpu: SumSectors and SumMany hash 8 messages side by side
// in zmm lanes (AVX-512) or 4 in ymm lanes (AVX2); single messages use a
// compression function in general-purpose registers, which measured faster
// than the vector ones on the Zen 5 this was tuned on (BENCHMARKS.md; the
// AVX2 and AVX-512 compression functions are built and tested too). The
// pure-Go code in blake2b_generic.go is the reference every kernel is
// tested against and the fallback elsewhere (other GOARCHes, the purego
// build tag, CPUs without AVX2 for the lane kernels).
package blake2b

import (
	"encoding/binary"
	"errors"
	"hash"
)

const (
	// Size is the size of a BLAKE2b-512 digest in bytes.
	Size = 64
	// Size256 is the size of a BLAKE2b-256 digest in bytes.
	Size256 = 32
	// BlockSize is the block size of BLAKE2b in bytes.
	BlockSize = 128
)

// iv is the BLAKE2b initialisation vector (RFC 7693, section 2.6): the
// SHA-512 IV.
var iv = [8]uint64{
	0x6a09e667f3bcc908, 0xbb67ae8584caa73b, 0x3c6ef372fe94f82b, 0xa54ff53a5f1d36f1,
	0x510e527fade682d1, 0x9b05688c2b3e6c1f, 0x1f83d9abfb41bd6b, 0x5be0cd19137e2179,
}

// finalFlag is the value of the first finalisation word f0 on the last
// block; the second word f1 is always zero (no tree hashing).
const finalFlag = ^uint64(0)

var (
	errSize = errors.New("blake2b: invalid hash size (want 1..64)")
	errKey  = errors.New("blake2b: invalid key size (want at most 64 bytes)")
)

// initState returns the chaining value before the first block: the IV xored
// with the parameter block of a sequential hash of the given digest size and
// key length (fanout 1, depth 1, no salt or personalisation).
func initState(size, keyLen int) [8]uint64 {
	h := iv
	h[0] ^= uint64(size) | uint64(keyLen)<<8 | 1<<16 | 1<<24
	return h
}

// digest is the streaming state. The last block seen is kept in block even
// when full, because only the final block carries the finalisation flag.
type digest struct {
	h      [8]uint64
	c      [2]uint64 // byte counter, low and high word
	size   int
	block  [BlockSize]byte
	offset int // bytes used in block, 0..BlockSize
	key    [BlockSize]byte
	keyLen int
}

// New returns a hash.Hash computing BLAKE2b with a digest of size bytes
// (1..64), keyed with key (0..64 bytes; empty means unkeyed, and a keyed hash
// is a MAC). The result implements encoding.BinaryMarshaler and
// encoding.BinaryUnmarshaler; the key is not part of the marshalled state.
func New(size int, key []byte) (hash.Hash, error) {
	if size < 1 || size > Size {
		return nil, errSize
	}
	if len(key) > Size {
		return nil, errKey
	}
	d := &digest{size: size, keyLen: len(key)}
	copy(d.key[:], key)
	d.Reset()
	return d, nil
}

// New512 returns a hash.Hash computing BLAKE2b-512, keyed with key (at most
// 64 bytes; empty for an unkeyed hash).
func New512(key []byte) (hash.Hash, error) { return New(Size, key) }

// New256 returns a hash.Hash computing BLAKE2b-256, keyed with key (at most
// 64 bytes; empty for an unkeyed hash).
func New256(key []byte) (hash.Hash, error) { return New(Size256, key) }

// Sum512 returns the unkeyed BLAKE2b-512 digest of data.
func Sum512(data []byte) [Size]byte {
	var d digest
	d.init(Size)
	d.Write(data)
	var sum [Size]byte
	d.finish(sum[:])
	return sum
}

// Sum256 returns the unkeyed BLAKE2b-256 digest of data.
func Sum256(data []byte) [Size256]byte {
	var d digest
	d.init(Size256)
	d.Write(data)
	var sum [Size256]byte
	d.finish(sum[:])
	return sum
}

// init makes d an unkeyed hash of the given size without touching the key
// buffer (Sum256/Sum512 use a zero digest on the stack).
func (d *digest) init(size int) {
	d.size = size
	d.h = initState(size, 0)
}

func (d *digest) Size() int      { return d.size }
func (d *digest) BlockSize() int { return BlockSize }

// Reset restarts the hash with the size and key given to New. A keyed hash
// starts with the key, zero-padded to a full block, as its first block.
func (d *digest) Reset() {
	d.h = initState(d.size, d.keyLen)
	d.c = [2]uint64{}
	d.offset = 0
	clear(d.block[:])
	if d.keyLen > 0 {
		d.block = d.key
		d.offset = BlockSize
	}
}

func (d *digest) Write(p []byte) (int, error) {
	n := len(p)
	if d.offset > 0 {
		free := BlockSize - d.offset
		if len(p) <= free {
			d.offset += copy(d.block[d.offset:], p)
			return n, nil
		}
		copy(d.block[d.offset:], p[:free])
		compress(&d.h, &d.c, 0, d.block[:])
		d.offset = 0
		p = p[free:]
	}
	// Hash all whole blocks but the last: it may be the final one.
	if full := (len(p) - 1) / BlockSize * BlockSize; full > 0 {
		compress(&d.h, &d.c, 0, p[:full])
		p = p[full:]
	}
	if len(p) > 0 {
		d.offset = copy(d.block[:], p)
	}
	return n, nil
}

// Sum appends the digest of the data written so far to b; d is unchanged.
func (d *digest) Sum(b []byte) []byte {
	var sum [Size]byte
	dd := *d
	dd.finish(sum[:d.size])
	return append(b, sum[:d.size]...)
}

// finish hashes the buffered final block and writes the first len(out)
// bytes of the chaining value, little-endian, to out. It destroys d.
func (d *digest) finish(out []byte) {
	clear(d.block[d.offset:])
	// compress adds BlockSize to the counter before each block, but the
	// final block counts only its offset bytes, not the padding.
	back := uint64(BlockSize - d.offset)
	if d.c[0] < back {
		d.c[1]--
	}
	d.c[0] -= back
	compress(&d.h, &d.c, finalFlag, d.block[:])
	var full [Size]byte
	for i, w := range d.h {
		binary.LittleEndian.PutUint64(full[8*i:], w)
	}
	copy(out, full[:])
}

// The marshalled state is laid out like golang.org/x/crypto/blake2b's, so
// states move between the two packages: magic "b2b", h[0..7] and c[0..1]
// as big-endian uint64s, the digest size (one byte), the 128-byte block
// buffer, and the number of bytes used in it (one byte). The key is not
// included: unmarshal into a digest made by New with the same size and key
// (Reset needs the key). Unlike x/crypto, a state of another digest size is
// refused rather than adopted.
const (
	magic         = "b2b"
	marshaledSize = len(magic) + 1 + 8*8 + 2*8 + BlockSize + 1
)

func (d *digest) MarshalBinary() ([]byte, error) {
	return d.AppendBinary(make([]byte, 0, marshaledSize))
}

// AppendBinary implements encoding.BinaryAppender.
// Like x/crypto, it refuses keyed digests: their chaining value lets anyone
// compute tags as if they held the key.
func (d *digest) AppendBinary(b []byte) ([]byte, error) {
	if d.keyLen > 0 {
		return nil, errors.New("blake2b: cannot marshal the state of a keyed hash (MAC)")
	}
	b = append(b, magic...)
	for _, w := range d.h {
		b = binary.BigEndian.AppendUint64(b, w)
	}
	b = binary.BigEndian.AppendUint64(b, d.c[0])
	b = binary.BigEndian.AppendUint64(b, d.c[1])
	b = append(b, byte(d.size))
	b = append(b, d.block[:]...)
	b = append(b, byte(d.offset))
	return b, nil
}

func (d *digest) UnmarshalBinary(b []byte) error {
	if len(b) != marshaledSize || string(b[:len(magic)]) != magic {
		return errors.New("blake2b: invalid hash state")
	}
	p := b[len(magic):]
	if int(p[8*8+2*8]) != d.size {
		return errors.New("blake2b: hash state has a different digest size")
	}
	if b[marshaledSize-1] > BlockSize {
		return errors.New("blake2b: invalid hash state")
	}
	for i := range d.h {
		d.h[i] = binary.BigEndian.Uint64(p)
		p = p[8:]
	}
	d.c[0] = binary.BigEndian.Uint64(p)
	d.c[1] = binary.BigEndian.Uint64(p[8:])
	p = p[16+1:]
	copy(d.block[:], p[:BlockSize])
	d.offset = int(p[BlockSize])
	return nil
}
