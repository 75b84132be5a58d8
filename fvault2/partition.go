package fvault2

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"io"
	"strings"
)

// A Mac's disk image holds a GUID partition table; FileVault 2 lives in
// its CoreStorage partition, FileVault on APFS in an APFS partition. This
// file finds both, so that a whole-disk image opens (the CoreStorage
// partition is used where it lies) and an APFS one is named for what it
// is.

// Partition type GUIDs, as written.
const (
	guidCoreStorage = "53746F72-6167-11AA-AA11-00306543ECAC"
	guidAPFS        = "7C3457EF-0000-11AA-AA11-00306543ECAC"
)

// gptGUID returns a GUID's on-disk bytes: the first three fields
// little-endian, the rest as written.
func gptGUID(s string) [16]byte {
	var g [16]byte
	b, err := hex.DecodeString(strings.ReplaceAll(s, "-", ""))
	if err != nil || len(b) != 16 {
		panic("fvault2: bad GUID constant " + s)
	}
	g[0], g[1], g[2], g[3] = b[3], b[2], b[1], b[0]
	g[4], g[5] = b[5], b[4]
	g[6], g[7] = b[7], b[6]
	copy(g[8:], b[8:])
	return g
}

var (
	typeCoreStorage = gptGUID(guidCoreStorage)
	typeAPFS        = gptGUID(guidAPFS)
)

// partition is one GPT entry of interest.
type partition struct {
	Number int   // 1-based, as partx and the kernel count
	Offset int64 // bytes
	Size   int64
	APFS   bool // an APFS partition; else CoreStorage
}

const (
	maxGPTEntries   = 4096
	maxGPTEntrySize = 4096
	maxGPTTable     = 1 << 20
)

// findPartitions reads the GPT of an image of size bytes (512- or
// 4096-byte logical sectors) and returns its CoreStorage and APFS
// partitions that lie inside the image. No GPT, or a damaged one, gives
// none: partitions are a convenience, never needed.
func findPartitions(r io.ReaderAt, size int64) []partition {
	for _, ss := range []int64{512, 4096} {
		if parts, ok := readGPT(r, size, ss); ok {
			return parts
		}
	}
	return nil
}

func readGPT(r io.ReaderAt, size, ss int64) ([]partition, bool) {
	hdr := make([]byte, 512)
	if size < 2*ss || readFull(r, hdr, ss) != nil || !bytes.Equal(hdr[:8], []byte("EFI PART")) {
		return nil, false
	}
	hsize := le32(hdr[12:])
	if hsize < 92 || hsize > 512 {
		return nil, false
	}
	want := le32(hdr[16:])
	h := bytes.Clone(hdr[:hsize])
	binary.LittleEndian.PutUint32(h[16:], 0)
	if crc32.ChecksumIEEE(h) != want {
		return nil, false
	}
	start, count, esize := le64(hdr[72:]), le32(hdr[80:]), le32(hdr[84:])
	if count == 0 || count > maxGPTEntries || esize < 128 || esize > maxGPTEntrySize || esize%8 != 0 ||
		uint64(count)*uint64(esize) > maxGPTTable || start > uint64(size/ss) {
		return nil, false
	}
	table := make([]byte, int(count)*int(esize))
	if int64(start)*ss > size-int64(len(table)) || readFull(r, table, int64(start)*ss) != nil ||
		crc32.ChecksumIEEE(table) != le32(hdr[88:]) {
		return nil, false
	}
	var parts []partition
	for i := range int(count) {
		e := table[i*int(esize):]
		var t [16]byte
		copy(t[:], e[:16])
		if t != typeCoreStorage && t != typeAPFS {
			continue
		}
		first, last := le64(e[32:]), le64(e[40:])
		if first == 0 || last < first || last >= uint64(size/ss) {
			continue
		}
		parts = append(parts, partition{
			Number: i + 1, Offset: int64(first) * ss, Size: int64(last-first+1) * ss, APFS: t == typeAPFS,
		})
	}
	return parts, true
}

// isAPFSContainer: an APFS container superblock (NXSB) at the image's
// start.
func isAPFSContainer(r io.ReaderAt, size int64) bool {
	b := make([]byte, 36)
	return size >= 4096 && readFull(r, b, 0) == nil && string(b[32:36]) == "NXSB"
}

// readFull reads len(b) bytes at off.
func readFull(r io.ReaderAt, b []byte, off int64) error {
	n, err := r.ReadAt(b, off)
	if n == len(b) {
		return nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("read %d bytes at byte %d: %w", len(b), off, err)
}
