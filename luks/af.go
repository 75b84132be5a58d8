package luks

import (
	"encoding/binary"
	"hash"
	"io"
)

// The anti-forensic splitter (LUKS1 spec section 2.4, LUKS2 af type
// "luks1") spreads a key of n bytes over stripes × n bytes so that
// destroying any part of the keyslot area destroys the key.

// stripesLUKS is the only stripe count cryptsetup reads or writes: it
// checks it in LUKS1 and ignores the field in LUKS2, using 4000 anyway.
const stripesLUKS = 4000

// afMaterialSize is the size of the split key on disk: stripes × keyLen,
// rounded up to whole 512-byte sectors (cryptsetup's AF_split_sectors).
func afMaterialSize(keyLen, stripes int) int {
	return (keyLen*stripes + 511) &^ 511
}

// diffuse replaces buf with H(be32(0) || block0) || H(be32(1) || block1) ...
// over digest-sized blocks; the last, shorter block gets a truncated hash.
func diffuse(h hash.Hash, buf, scratch []byte) {
	ds := h.Size()
	var idx [4]byte
	for i, off := uint32(0), 0; off < len(buf); i, off = i+1, off+ds {
		end := min(off+ds, len(buf))
		binary.BigEndian.PutUint32(idx[:], i)
		h.Reset()
		h.Write(idx[:])
		h.Write(buf[off:end])
		scratch = h.Sum(scratch[:0])
		copy(buf[off:end], scratch)
	}
}

func xorInto(dst, src []byte) {
	for i := range dst {
		dst[i] ^= src[i]
	}
}

// afMerge recovers the key of len(key) bytes from the first stripes ×
// len(key) bytes of material.
func afMerge(key, material []byte, stripes int, newHash func() hash.Hash) {
	n := len(key)
	h := newHash()
	scratch := make([]byte, 0, h.Size())
	clear(key)
	for i := 0; i < stripes-1; i++ {
		xorInto(key, material[i*n:(i+1)*n])
		diffuse(h, key, scratch)
	}
	xorInto(key, material[(stripes-1)*n:stripes*n])
}

// afSplit is the inverse of afMerge: random stripes, the last one chosen so
// that merging gives key. material must be afMaterialSize bytes; the
// padding after the stripes is left as random too.
func afSplit(material, key []byte, stripes int, newHash func() hash.Hash, rand io.Reader) error {
	n := len(key)
	if _, err := io.ReadFull(rand, material); err != nil {
		return err
	}
	h := newHash()
	scratch := make([]byte, 0, h.Size())
	d := make([]byte, n)
	defer clear(d)
	for i := 0; i < stripes-1; i++ {
		xorInto(d, material[i*n:(i+1)*n])
		diffuse(h, d, scratch)
	}
	last := material[(stripes-1)*n : stripes*n]
	copy(last, d)
	xorInto(last, key)
	return nil
}
