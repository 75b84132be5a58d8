// Package blake2b implements the BLAKE2b hash and MAC (RFC 7693), with the
// API of golang.org/x/crypto/blake2b, and computes keyed BLAKE2b tags for
// many sectors at once (SumSectors, SumMany).
//
// Keys do not outlive their use: SumKeyed hashes one message and clears
// everything it held, a hash from New can be wiped (Wiper), and Sum and
// the batch functions clear their temporaries. What the Go runtime may
// still copy (registers, stacks it moves) is outside this package's reach.
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

// state is the chaining state of one hash: what Sum finishes on a copy, and
// what SumKeyed keeps on its stack. The last block seen is kept in block
// even when full, because only the final block carries the finalisation
// flag. block[offset:] is zero, except after UnmarshalBinary (a marshalled
// block may carry old bytes there); finish clears it anyway.
type state struct {
	h      [8]uint64
	c      [2]uint64 // byte counter, low and high word
	block  [BlockSize]byte
	offset int // bytes used in block, 0..BlockSize
}

// digest is a hash made by New. The key is kept, padded to a block, for
// Reset; Wipe clears it.
type digest struct {
	state
	size   int // 1..Size; 0 after Wipe
	key    [BlockSize]byte
	keyLen int
}

// Wiper is implemented by the hashes New, New256 and New512 return. Wipe
// zeroes the key and the whole state the hash holds; the hash must not be
// used afterwards (Write, Sum and Reset panic). Sum leaves no copy of the
// key or of the state behind, so a hash that is wiped after its last Sum
// has left the key nowhere in memory that this package controls.
type Wiper interface {
	Wipe()
}

// New returns a hash.Hash computing BLAKE2b with a digest of size bytes
// (1..64), keyed with key (0..64 bytes; empty means unkeyed, and a keyed hash
// is a MAC). The result implements encoding.BinaryMarshaler and
// encoding.BinaryUnmarshaler, and Wiper to clear the key it keeps; the key is
// not part of the marshalled state. For a one-shot keyed hash that keeps
// nothing, use SumKeyed.
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
	var s state
	s.h = initState(Size, 0)
	s.write(data)
	var sum [Size]byte
	s.finish(sum[:])
	return sum
}

// Sum256 returns the unkeyed BLAKE2b-256 digest of data.
func Sum256(data []byte) [Size256]byte {
	var s state
	s.h = initState(Size256, 0)
	s.write(data)
	var sum [Size256]byte
	s.finish(sum[:])
	return sum
}

// SumKeyed writes to out the BLAKE2b digest of msg of len(out) bytes (1..64),
// keyed with key (at most 64 bytes; empty for an unkeyed hash). It panics if
// a size is out of range. It equals New(len(out), key), Write(msg), Sum, but
// keeps nothing: its key block, chaining value and padded last block are on
// its own stack and cleared before it returns, so it suits deriving keys.
// It does not allocate.
func SumKeyed(out, key, msg []byte) {
	if len(out) < 1 || len(out) > Size {
		panic("blake2b: SumKeyed: digest size must be 1..64")
	}
	if len(key) > Size {
		panic("blake2b: SumKeyed: key longer than 64 bytes")
	}
	var s state
	s.h = initState(len(out), len(key))
	if len(key) > 0 {
		copy(s.block[:], key)
		s.offset = BlockSize
	}
	s.write(msg)
	s.finish(out)
}

func (d *digest) Size() int      { return d.size }
func (d *digest) BlockSize() int { return BlockSize }

// Reset restarts the hash with the size and key given to New. A keyed hash
// starts with the key, zero-padded to a full block, as its first block.
func (d *digest) Reset() {
	d.checkLive()
	d.h = initState(d.size, d.keyLen)
	d.c = [2]uint64{}
	d.offset = 0
	clear(d.block[:])
	if d.keyLen > 0 {
		d.block = d.key
		d.offset = BlockSize
	}
}

// Wipe implements Wiper.
func (d *digest) Wipe() { *d = digest{} }

func (d *digest) checkLive() {
	if d.size == 0 {
		panic("blake2b: hash used after Wipe")
	}
}

func (d *digest) Write(p []byte) (int, error) {
	d.checkLive()
	d.write(p)
	return len(p), nil
}

func (s *state) write(p []byte) {
	if s.offset > 0 {
		free := BlockSize - s.offset
		if len(p) <= free {
			s.offset += copy(s.block[s.offset:], p)
			return
		}
		copy(s.block[s.offset:], p[:free])
		compress(&s.h, &s.c, 0, s.block[:])
		// Keep block[offset:] zero: the first block of a keyed hash is the
		// key, which must not linger behind a shorter final block.
		clear(s.block[:])
		s.offset = 0
		p = p[free:]
	}
	// Hash all whole blocks but the last: it may be the final one.
	if full := (len(p) - 1) / BlockSize * BlockSize; full > 0 {
		compress(&s.h, &s.c, 0, p[:full])
		p = p[full:]
	}
	if len(p) > 0 {
		s.offset = copy(s.block[:], p)
	}
}

// Sum appends the digest of the data written so far to b; d is unchanged.
// It finishes a copy of the chaining state (not of the key), which finish
// clears, and clears its copy of the digest too.
func (d *digest) Sum(b []byte) []byte {
	d.checkLive()
	s := d.state
	var sum [Size]byte
	s.finish(sum[:d.size])
	b = append(b, sum[:d.size]...)
	clear(sum[:])
	return b
}

// finish hashes the buffered final block and writes the first len(out)
// bytes of the chaining value, little-endian, to out. It clears s, and the
// temporaries that held the result, before returning.
func (s *state) finish(out []byte) {
	clear(s.block[s.offset:])
	// compress adds BlockSize to the counter before each block, but the
	// final block counts only its offset bytes, not the padding.
	back := uint64(BlockSize - s.offset)
	if s.c[0] < back {
		s.c[1]--
	}
	s.c[0] -= back
	compress(&s.h, &s.c, finalFlag, s.block[:])
	var full [Size]byte
	for i, w := range s.h {
		binary.LittleEndian.PutUint64(full[8*i:], w)
	}
	copy(out, full[:])
	clear(full[:])
	*s = state{}
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
