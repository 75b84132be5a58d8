package fvault2

import (
	"context"
	"encoding/binary"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/xtsctl/xtsctl/disk"
)

// memImage is a sparse image in memory: chunks of data, zeros elsewhere.
type memImage struct {
	size   int64
	chunks []memChunk
}

type memChunk struct {
	off int64
	b   []byte
}

func (m *memImage) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off >= m.size {
		return 0, os.ErrInvalid
	}
	n := int(min(int64(len(p)), m.size-off))
	clear(p[:n])
	for _, c := range m.chunks {
		lo, hi := max(off, c.off), min(off+int64(n), c.off+int64(len(c.b)))
		if lo < hi {
			copy(p[lo-off:hi-off], c.b[lo-c.off:hi-c.off])
		}
	}
	if n < len(p) {
		return n, os.ErrClosed
	}
	return n, nil
}

// sampleParts is the sample's data (it is sparse: the first 16 KiB, the
// encrypted metadata, the logical volume's first 4 KiB) and its four
// decrypted metadata blocks, read once.
var sampleParts struct {
	once   sync.Once
	chunks []memChunk
	blocks [4][]byte
	err    error
}

func loadSample(t testing.TB) {
	sampleParts.once.Do(func() {
		path := sampleImage(t)
		for _, r := range []struct {
			off int64
			n   int
		}{{0, 16384}, {sampleEncFirst * 4096, 32768}, {sampleLVOffset, 4096}} {
			sampleParts.chunks = append(sampleParts.chunks, memChunk{r.off, readAt(t, path, r.off, r.n)})
		}
		c := metadataCipher(t, sampleParts.chunks[0].b)
		for i := range sampleParts.blocks {
			b := make([]byte, mdBlockSize)
			c.Decrypt(b, sampleParts.chunks[1].b[i*mdBlockSize:(i+1)*mdBlockSize], uint64(i))
			sampleParts.blocks[i] = b
		}
	})
}

// imageWith is the sample with its encrypted metadata blocks replaced by
// blocks (checksummed and encrypted as CoreStorage does): what an
// attacker who writes the image can make xtsctl read.
func imageWith(t testing.TB, blocks [][]byte) *memImage {
	c := metadataCipher(t, sampleParts.chunks[0].b)
	enc := make([]byte, 0, len(blocks)*mdBlockSize)
	for i, b := range blocks {
		blk := make([]byte, mdBlockSize)
		copy(blk, b)
		setChecksum(blk)
		c.Encrypt(blk, blk, uint64(i))
		enc = append(enc, blk...)
	}
	return &memImage{size: sampleSize, chunks: []memChunk{
		sampleParts.chunks[0], {sampleEncFirst * 4096, enc}, sampleParts.chunks[2],
	}}
}

// FuzzEncryptedMetadata feeds the whole path after the checksums (extent
// map, plists, encryption context, layout, report, the unlock plan) with
// metadata blocks an attacker made. It must never panic, and a layout it
// makes must pass the layer's check against the image.
func FuzzEncryptedMetadata(f *testing.F) {
	loadSample(f)
	b := sampleParts.blocks
	f.Add(b[0], b[1], b[2], b[3])
	f.Add(b[1], b[0], b[3], b[2])
	f.Add(b[0], b[1], []byte{}, []byte{})
	f.Fuzz(func(t *testing.T, b0, b1, b2, b3 []byte) {
		var blocks [][]byte
		for _, b := range [][]byte{b0, b1, b2, b3} {
			if len(b) > mdBlockSize {
				b = b[:mdBlockSize]
			}
			if len(b) < mdBlockSize {
				b = append(b, make([]byte, mdBlockSize-len(b))...)
			}
			// Keep the header's size field right, or every block is
			// refused before its type is read.
			binary.LittleEndian.PutUint32(b[48:], mdBlockSize)
			blocks = append(blocks, b)
		}
		img := imageWith(t, blocks)
		v, err := readVolume(img, 0, img.size)
		if err != nil {
			return
		}
		if v.layout != nil {
			if err := v.layout.Check(img.size); err != nil {
				t.Fatalf("a layout that fails the layer's check: %v", err)
			}
			if v.layout.Size != int64(v.lv.Size) {
				t.Fatalf("layout of %d bytes for a %d-byte volume", v.layout.Size, v.lv.Size)
			}
		}
		h := &header{path: "fuzz", v: v}
		if _, err := h.Report(disk.ReportOptions{}); err != nil {
			t.Fatal(err)
		}
		for _, slot := range []int{-1, 0, 1} {
			r := &disk.Request{Slot: slot, TestOnly: slot == 1, ReadOnly: true}
			if _, err := h.Check(r); err != nil {
				continue
			}
			cheap := true
			for _, u := range v.ctx.Users {
				cheap = cheap && u.Iterations <= 64
			}
			if cheap {
				u, err := h.Unlock(context.Background(), r, &disk.Secret{Passphrase: []byte("x")})
				if err == nil && len(u.Key) != 0 && len(u.Key) != 32 {
					t.Fatalf("a %d-byte key", len(u.Key))
				}
			}
		}
	})
}

// FuzzPVHeader: any 512 bytes, with the checksum made right or not.
func FuzzPVHeader(f *testing.F) {
	loadSample(f)
	f.Add(sampleParts.chunks[0].b[:512], true)
	f.Add(make([]byte, 512), false)
	f.Fuzz(func(t *testing.T, b []byte, fix bool) {
		if len(b) >= pvHeaderSize && fix {
			setChecksum(b[:pvHeaderSize])
		}
		h, err := parsePVHeader(b)
		if err != nil {
			return
		}
		if h.BlockSize < minBlockSize || h.BlockSize&(h.BlockSize-1) != 0 || h.Size < uint64(h.BlockSize) {
			t.Fatalf("accepted %+v", h)
		}
		for _, n := range []uint64{0, 1, h.LabelBlock, 1 << 63} {
			if off, ok := h.blockOffset(n, uint64(h.MetadataSize)); ok && (off < 0 || uint64(off)+uint64(h.MetadataSize) > h.Size) {
				t.Fatalf("block %d at %d, outside %d bytes", n, off, h.Size)
			}
		}
	})
}

// FuzzPlist: the plist parser and every lookup this package makes.
func FuzzPlist(f *testing.F) {
	loadSample(f)
	for _, i := range []int{1, 2} {
		var x []byte
		var err error
		if i == 1 {
			x, err = encContextXML(sampleParts.blocks[i])
		} else {
			x, err = lvInfoXML(sampleParts.blocks[i])
		}
		if err != nil {
			f.Fatal(err)
		}
		f.Add(x)
	}
	for _, s := range []string{
		`<plist version="1.0"><dict><key>a</key><array><integer size="8">0xff</integer><true/></array></dict></plist>`,
		`<dict ID="0"><key>a</key><reference IDREF="0"/><key>b</key><reference IDREF="1"/></dict>`,
		`<dict><key>x</key><data>AAEC` + "\n" + `AwQ=</data></dict>`,
		strings.Repeat("<array>", 40) + strings.Repeat("</array>", 40),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := parsePlist(b)
		if err != nil {
			return
		}
		if p.root == nil || p.root.kind == plRef {
			t.Fatal("a root that is no value")
		}
		walk(p, p.root, 0)
	})
}

// walk visits every value, following references once each level, as
// the lookups do; it must end (references do not chain).
func walk(p *plist, v *plistValue, depth int) {
	v = p.resolve(v)
	if v == nil || depth > maxPlistDepth+1 {
		return
	}
	for i, k := range v.keys {
		p.get(v, k)
		walk(p, v.vals[i], depth+1)
	}
	for _, it := range v.items {
		walk(p, it, depth+1)
	}
	_ = parseUser(p, v)
}

// TestFuzzHarness: the fuzz harness's image, with the sample's own blocks,
// is the sample (so the fuzzer starts from a volume that opens).
func TestFuzzHarness(t *testing.T) {
	loadSample(t)
	b := sampleParts.blocks
	img := imageWith(t, [][]byte{b[0], b[1], b[2], b[3]})
	v, err := readVolume(img, 0, img.size)
	if err != nil || v.layout == nil || v.lv.Size != sampleLVSize || v.unlockable != nil || len(v.ctx.Users) != 1 {
		t.Fatalf("harness image: %v, %+v", err, v)
	}
}
