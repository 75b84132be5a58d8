package volume

import (
	"encoding/binary"
	"hash"

	"github.com/xtsctl/xtsctl/blake2b"
)

// The end-to-end digest is a two-level BLAKE2b-512 tree over the plaintext
// (docs/FORMAT.md, "End-to-end digest"): every 64 KiB leaf is hashed on its
// own, several side by side (blake2b.SumMany) and on every core, and the
// root hashes the leaf digests in order. A sequential BLAKE2b of the whole
// image would run on one core at about 1 GB/s and set the pace of encrypt
// and decrypt; the tree costs the same work spread over all cores.
const (
	DigestLeafSize = 64 << 10
	digestPrefix   = "xtsctl tree digest v1"
)

// treeDigest accumulates leaf digests, in order, into the root.
type treeDigest struct {
	root hash.Hash
}

func newTreeDigest(total int64) *treeDigest {
	root, _ := blake2b.New512(nil)
	var hdr [len(digestPrefix) + 16]byte
	copy(hdr[:], digestPrefix)
	binary.LittleEndian.PutUint64(hdr[len(digestPrefix):], uint64(total))
	binary.LittleEndian.PutUint64(hdr[len(digestPrefix)+8:], DigestLeafSize)
	root.Write(hdr[:])
	return &treeDigest{root: root}
}

// leafSums writes the digests of the leaves of data (which starts on a leaf
// boundary; only its last leaf may be short) to sums, 64 bytes each.
func leafSums(sums, data []byte) {
	full := len(data) / DigestLeafSize
	blake2b.SumMany(sums[:full*blake2b.Size], blake2b.Size, nil, data[:full*DigestLeafSize], DigestLeafSize)
	if tail := data[full*DigestLeafSize:]; len(tail) > 0 {
		s := blake2b.Sum512(tail)
		copy(sums[full*blake2b.Size:], s[:])
	}
}

// leafCount is the number of leaves of n bytes.
func leafCount(n int) int { return (n + DigestLeafSize - 1) / DigestLeafSize }

// add feeds the next leaf digests to the root.
func (d *treeDigest) add(sums []byte) { d.root.Write(sums) }

// sum returns the root: the digest of everything added.
func (d *treeDigest) sum() (s [blake2b.Size]byte) {
	copy(s[:], d.root.Sum(nil))
	return s
}

// Digest computes the end-to-end digest of data, as encrypt records it.
func Digest(data []byte) [blake2b.Size]byte {
	d := newTreeDigest(int64(len(data)))
	sums := make([]byte, leafCount(len(data))*blake2b.Size)
	leafSums(sums, data)
	d.add(sums)
	return d.sum()
}
