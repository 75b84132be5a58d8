package blake2b

import (
	"encoding/binary"
	"unsafe"
)

// SumSectors computes one keyed BLAKE2b tag per sector, many sectors at a
// time (4, 8 or 16 side by side in vector lanes where the CPU allows).
//
// data holds n = len(data)/sectorSize consecutive sectors, numbered first,
// first+1, ..., first+n-1 (modulo 2^64). The tag of sector i is
//
//	BLAKE2b(digest size tagSize, key)(le64(first+i) || data[i*sectorSize:(i+1)*sectorSize])
//
// where le64 is the 8-byte little-endian encoding. It is written to
// tags[i*tagSize:(i+1)*tagSize]. The result equals
//
//	h, _ := New(tagSize, key); h.Write(le64(first+i)); h.Write(sector); h.Sum(nil)
//
// for every sector: a tag of 16 bytes is a true 16-byte BLAKE2b digest (the
// digest length is in the parameter block), not a 32-byte digest cut short.
//
// tagSize must be 1..64 and key at most 64 bytes (empty: unkeyed); sectorSize
// must be positive, len(data) a multiple of it and len(tags) exactly
// n*tagSize, and tags must not overlap data. SumSectors panics otherwise.
// It does not allocate.
func SumSectors(tags []byte, tagSize int, key []byte, first uint64, data []byte, sectorSize int) {
	if sectorSize <= 0 {
		panic("blake2b: SumSectors: sector size must be positive")
	}
	if len(data)%sectorSize != 0 {
		panic("blake2b: SumSectors: data is not a whole number of sectors")
	}
	sumMany(tags, tagSize, key, data, sectorSize, len(data)/sectorSize, true, first)
}

// SumMany computes the BLAKE2b digest, of size bytes and keyed with key, of
// each of n equal-length messages, several at a time like SumSectors.
// Message i is msgs[i*msgLen:(i+1)*msgLen] and its digest is written to
// sums[i*size:(i+1)*size]; n = len(sums)/size, so msgLen may be zero.
//
// size must be 1..64 and key at most 64 bytes (empty: unkeyed); msgLen must
// not be negative, len(sums) must be a multiple of size, len(msgs) exactly
// n*msgLen, and sums must not overlap msgs. SumMany panics otherwise. It
// does not allocate.
func SumMany(sums []byte, size int, key []byte, msgs []byte, msgLen int) {
	if size < 1 || size > Size {
		panic("blake2b: SumMany: digest size must be 1..64")
	}
	if len(sums)%size != 0 {
		panic("blake2b: SumMany: len(sums) is not a multiple of the digest size")
	}
	n := len(sums) / size
	if msgLen < 0 || n > 0 && len(msgs)/n != msgLen || len(msgs) != n*msgLen {
		panic("blake2b: SumMany: len(msgs) is not n*msgLen")
	}
	sumMany(sums, size, key, msgs, msgLen, n, false, 0)
}

// maxLanes is the widest kernel: 16 lanes, two groups of 8 in zmm.
const maxLanes = 16

// laneState is the chaining values of up to maxLanes messages, transposed
// for the vector kernels: h[k][j] is word k of lane j, so a row is one
// vector register.
type laneState [8][maxLanes]uint64

// batch describes the messages of one SumSectors or SumMany call. Message
// i is prefix(i) || msgs[i*msgLen:(i+1)*msgLen], prefix(i) being
// le64(first+i) or nothing; the kernels see it as a stream of blocks.
type batch struct {
	size     int
	start    [8]uint64 // chaining value before the first message block
	t0       uint64    // byte counter before the first message block
	msgs     []byte
	msgLen   int
	prefix   int // 8 or 0
	first    uint64
	blocks   int // message blocks per lane, at least 1
	totalLen int // prefix + msgLen
}

func sumMany(sums []byte, size int, key, msgs []byte, msgLen, n int, prefixed bool, first uint64) {
	if size < 1 || size > Size {
		panic("blake2b: digest size must be 1..64")
	}
	if len(key) > Size {
		panic("blake2b: key longer than 64 bytes")
	}
	if len(sums) != n*size {
		panic("blake2b: output is not one digest per message")
	}
	if overlap(sums, msgs) {
		panic("blake2b: output overlaps input")
	}
	if n == 0 {
		return
	}
	b := batch{size: size, msgs: msgs, msgLen: msgLen, first: first}
	if prefixed {
		b.prefix = 8
	}
	b.totalLen = b.prefix + msgLen
	b.start = initState(size, len(key))
	var keyBlock [BlockSize]byte
	copy(keyBlock[:], key)

	if b.totalLen == 0 {
		// Every message is empty: one digest, copied n times. The final
		// block is the key block, or an all-zero block when unkeyed.
		var t uint64
		if len(key) > 0 {
			t = BlockSize
		}
		compressAt(&b.start, keyBlock[:], t, finalFlag)
		clear(keyBlock[:])
		var sum [Size]byte
		putState(sum[:], &b.start)
		for i := range n {
			copy(sums[i*size:(i+1)*size], sum[:size])
		}
		return
	}
	if len(key) > 0 {
		// The key block is the same in every lane: hash it once.
		compressAt(&b.start, keyBlock[:], BlockSize, 0)
		b.t0 = BlockSize
	}
	clear(keyBlock[:])
	b.blocks = (b.totalLen + BlockSize - 1) / BlockSize

	width := laneWidth()
	for lane0 := 0; lane0 < n; lane0 += width {
		b.group(sums, lane0, min(width, n-lane0))
	}
	// After a key block, start is as good as the key for forging tags.
	b.start = [8]uint64{}
}

// group hashes messages lane0..lane0+lanes-1 side by side. The first block
// (when it carries the prefix) and the last block (always: it is padded) are
// assembled in buffers; the blocks between are read in place. Kernels
// wider than lanes compute copies of lane 0 in the unused lanes.
func (b *batch) group(sums []byte, lane0, lanes int) {
	var h laneState
	for k := range h {
		for j := range h[k] {
			h[k][j] = b.start[k]
		}
	}
	var ptr [maxLanes]*byte
	var buf [maxLanes][BlockSize]byte
	fillUnused := func() {
		for j := lanes; j < maxLanes; j++ {
			ptr[j] = ptr[0]
		}
	}
	msg := func(j int) []byte {
		i := lane0 + j
		return b.msgs[i*b.msgLen : (i+1)*b.msgLen]
	}

	next := 0 // next block to hash
	if b.prefix > 0 || b.blocks == 1 {
		for j := range lanes {
			if b.prefix > 0 {
				binary.LittleEndian.PutUint64(buf[j][:], b.first+uint64(lane0+j))
			}
			copy(buf[j][b.prefix:], msg(j))
			ptr[j] = &buf[j][0]
		}
		fillUnused()
		final := b.blocks == 1
		hashLanes(&h, &ptr, lanes, 1, b.t0+uint64(min(b.totalLen, BlockSize)), final)
		next = 1
	}
	if middle := b.blocks - 1 - next; middle > 0 {
		off := next*BlockSize - b.prefix
		for j := range lanes {
			ptr[j] = &msg(j)[off]
		}
		fillUnused()
		hashLanes(&h, &ptr, lanes, middle, b.t0+uint64(next+1)*BlockSize, false)
		next += middle
	}
	if next < b.blocks {
		off := next*BlockSize - b.prefix
		for j := range lanes {
			buf[j] = [BlockSize]byte{}
			copy(buf[j][:], msg(j)[off:])
			ptr[j] = &buf[j][0]
		}
		fillUnused()
		hashLanes(&h, &ptr, lanes, 1, b.t0+uint64(b.totalLen), true)
	}

	for j := range lanes {
		var s [8]uint64
		for k := range s {
			s[k] = h[k][j]
		}
		var sum [Size]byte
		putState(sum[:], &s)
		i := lane0 + j
		copy(sums[i*b.size:(i+1)*b.size], sum[:b.size])
	}
	// Lanes no kernel finished still hold the keyed start state.
	h = laneState{}
}

// compressAt compresses one block whose byte counter, this block included,
// is t, with the dispatched compression function.
func compressAt(h *[8]uint64, block []byte, t, flag uint64) {
	c := [2]uint64{t - BlockSize, 0}
	if t < BlockSize {
		c[1] = ^uint64(0) // compress adds BlockSize back, carrying out
	}
	compress(h, &c, flag, block)
}

func putState(out []byte, h *[8]uint64) {
	for i, w := range h {
		binary.LittleEndian.PutUint64(out[8*i:], w)
	}
}

// unsafeBlocks returns the blocks*BlockSize bytes at p. The lane driver
// (batch.group) guarantees they lie inside one message or buffer.
func unsafeBlocks(p *byte, blocks int) []byte {
	return unsafe.Slice(p, blocks*BlockSize)
}

// overlap reports whether a and b share any byte.
func overlap(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	pa := uintptr(unsafe.Pointer(unsafe.SliceData(a)))
	pb := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return pa < pb+uintptr(len(b)) && pb < pa+uintptr(len(a))
}
