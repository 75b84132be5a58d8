// Package fsblock reads, from the superblock of a filesystem in an image,
// the smallest unit of I/O the filesystem needs from its device. A block
// device whose logical sectors are larger cannot hold it: Linux refuses
// to mount an ext4 filesystem with 1024-byte blocks, or an XFS one with
// 512-byte sectors, from a device with 4096-byte sectors ("invalid
// argument"). An encrypted device's logical sector is its encryption
// sector size, so whoever chooses that size for data that will be served
// as a device must not choose it larger.
//
// It knows ext2/3/4, XFS, btrfs, FAT12/16/32, exFAT and NTFS, and says
// "unknown" for anything else (a partitioned disk image included: it does
// not look inside partitions). The image may be hostile: every field read
// is checked against what its filesystem allows before it is believed,
// nothing is allocated from a field, and the reads are a few fixed-size
// blocks at fixed offsets.
package fsblock

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// FS is what a superblock says.
type FS struct {
	// Type is "ext2", "ext3", "ext4", "xfs", "btrfs", "vfat", "exfat" or
	// "ntfs"; empty when no filesystem was recognised.
	Type string
	// BlockSize is the filesystem's block size (ext, XFS, btrfs) or
	// cluster size (FAT, exFAT, NTFS), in bytes: what its tools call the
	// filesystem's unit, for messages.
	BlockSize int
	// IOSize is the smallest unit of I/O the filesystem does to its device,
	// in bytes, a power of two from 512: the largest logical sector size a
	// device may have to hold it. ext: the block size; XFS: its sector
	// size (sb_sectsize; XFS refuses a device with larger sectors even
	// where its blocks are larger); btrfs: its sector size; FAT, exFAT,
	// NTFS: the bytes per sector of the boot sector.
	IOSize int
}

// Known reports whether a filesystem was recognised.
func (f FS) Known() bool { return f.Type != "" }

// Allows reports whether a device with sectorSize-byte sectors can hold
// f. An unknown filesystem allows anything.
func (f FS) Allows(sectorSize int) bool { return !f.Known() || sectorSize <= f.IOSize }

// String describes f for messages: "an ext4 filesystem with 1024-byte
// blocks", "an XFS filesystem with 512-byte sectors (4096-byte blocks)".
func (f FS) String() string {
	if !f.Known() {
		return "no filesystem xtsctl recognises"
	}
	name := map[string]string{"xfs": "XFS", "btrfs": "btrfs", "vfat": "FAT", "exfat": "exFAT", "ntfs": "NTFS"}[f.Type]
	if name == "" {
		name = f.Type
	}
	article := "an" // ext, XFS, exFAT, NTFS are read letter by letter
	if name == "btrfs" || name == "FAT" {
		article = "a"
	}
	if f.BlockSize == f.IOSize {
		unit := "sectors"
		if f.Type == "ext2" || f.Type == "ext3" || f.Type == "ext4" {
			unit = "blocks"
		}
		return fmt.Sprintf("%s %s filesystem with %d-byte %s", article, name, f.IOSize, unit)
	}
	unit := "blocks"
	if f.Type == "vfat" || f.Type == "exfat" || f.Type == "ntfs" {
		unit = "clusters"
	}
	return fmt.Sprintf("%s %s filesystem with %d-byte sectors (%d-byte %s)", article, name, f.IOSize, f.BlockSize, unit)
}

// Probe reads the superblocks of the filesystems this package knows from
// r, an image of size bytes, and returns what the one it recognises says,
// or the zero FS if it recognises none. If more than one is recognised
// (an old filesystem's signature left beside a new one's), it returns the
// one with the smallest IOSize: a device that holds that one holds the
// other too. The error is only a read error other than reading past the
// end.
func Probe(r io.ReaderAt, size int64) (FS, error) {
	var head, btrfsSB [blockSize]byte
	if err := readBlock(r, size, head[:], 0); err != nil {
		return FS{}, err
	}
	if err := readBlock(r, size, btrfsSB[:], btrfsOffset); err != nil {
		return FS{}, err
	}
	var best FS
	for _, f := range []FS{ext(head[:]), xfs(head[:]), btrfs(btrfsSB[:]), ntfs(head[:]), exfat(head[:]), fat(head[:])} {
		if f.Known() && (!best.Known() || f.IOSize < best.IOSize) {
			best = f
		}
	}
	return best, nil
}

// blockSize is how much is read at each place: the first 4 KiB of the
// image hold the ext superblock (at 1024), XFS's (at 0) and the FAT,
// exFAT and NTFS boot sectors; btrfs's is 4 KiB at 64 KiB.
const (
	blockSize   = 4096
	btrfsOffset = 64 << 10
)

// readBlock fills b from r at off, with zeros where the image ends.
func readBlock(r io.ReaderAt, size int64, b []byte, off int64) error {
	clear(b)
	if off >= size {
		return nil
	}
	n := int64(len(b))
	if size-off < n {
		n = size - off
	}
	if _, err := r.ReadAt(b[:n], off); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("cannot read the filesystem's superblock: %w", err)
	}
	return nil
}

// pow2In reports whether v is a power of two within [lo, hi].
func pow2In(v, lo, hi uint64) bool { return v >= lo && v <= hi && v&(v-1) == 0 }

var (
	le, be     = binary.LittleEndian, binary.BigEndian
	castagnoli = crc32.MakeTable(crc32.Castagnoli)
)

// ext reads the ext2/3/4 superblock, 1024 bytes at byte 1024.
func ext(head []byte) FS {
	sb := head[1024:2048]
	const (
		magic         = 0xEF53
		compatJournal = 0x4
		// incompat: extents, 64bit, flex_bg, inline_data; ro_compat:
		// huge_file, gdt_csum, dir_nlink, extra_isize, metadata_csum:
		// features ext2/3 never had.
		ext4Incompat = 0x40 | 0x80 | 0x200 | 0x8000
		ext4ROCompat = 0x8 | 0x10 | 0x20 | 0x40 | 0x400
	)
	if le.Uint16(sb[56:]) != magic {
		return FS{}
	}
	logBlock := le.Uint32(sb[24:])
	if logBlock > 6 { // 1 KiB << 6 = 64 KiB, ext4's largest block
		return FS{}
	}
	block := 1024 << logBlock
	// The first data block is 0 with blocks above 1 KiB (the boot block
	// and the superblock share block 0); 1 KiB blocks have it at 1 (0
	// with bigalloc).
	if firstData := le.Uint32(sb[20:]); firstData > 1 || firstData == 1 && block != 1024 {
		return FS{}
	}
	if le.Uint32(sb[0:]) == 0 || le.Uint32(sb[4:]) == 0 || le.Uint32(sb[32:]) == 0 { // inodes, blocks, blocks per group
		return FS{}
	}
	typ := "ext2"
	switch {
	case le.Uint32(sb[96:])&ext4Incompat != 0 || le.Uint32(sb[100:])&ext4ROCompat != 0:
		typ = "ext4"
	case le.Uint32(sb[92:])&compatJournal != 0:
		typ = "ext3"
	}
	return FS{Type: typ, BlockSize: block, IOSize: block}
}

// xfs reads the XFS superblock at byte 0 (big-endian).
func xfs(sb []byte) FS {
	if string(sb[0:4]) != "XFSB" {
		return FS{}
	}
	block := uint64(be.Uint32(sb[4:]))
	sect := uint64(be.Uint16(sb[102:]))
	blockLog, sectLog := uint64(sb[120]), uint64(sb[121])
	switch {
	case !pow2In(block, 512, 64<<10), !pow2In(sect, 512, 32<<10), sect > block:
		return FS{}
	case 1<<blockLog != block, 1<<sectLog != sect:
		return FS{}
	}
	return FS{Type: "xfs", BlockSize: int(block), IOSize: int(sect)}
}

// btrfs reads the btrfs superblock at 64 KiB: its checksum (CRC-32C,
// the default; other checksum types are taken on the other checks), its
// own offset, and its sector size.
func btrfs(sb []byte) FS {
	const csumCRC32C = 0
	if string(sb[0x40:0x48]) != "_BHRfS_M" || le.Uint64(sb[0x30:]) != btrfsOffset {
		return FS{}
	}
	if le.Uint16(sb[0xc4:]) == csumCRC32C && crc32.Checksum(sb[0x20:], castagnoli) != le.Uint32(sb[0:]) {
		return FS{}
	}
	sector := uint64(le.Uint32(sb[0x90:]))
	node := uint64(le.Uint32(sb[0x94:]))
	if !pow2In(sector, 512, 64<<10) || !pow2In(node, sector, 64<<10) {
		return FS{}
	}
	return FS{Type: "btrfs", BlockSize: int(sector), IOSize: int(sector)}
}

// ntfs reads the NTFS boot sector at byte 0.
func ntfs(b []byte) FS {
	if string(b[3:11]) != "NTFS    " || b[510] != 0x55 || b[511] != 0xaa {
		return FS{}
	}
	sector := uint64(le.Uint16(b[11:]))
	if !pow2In(sector, 512, 4096) {
		return FS{}
	}
	// Sectors per cluster: a count up to 128, or above that 2^(256-v)
	// (clusters of 64 KiB and up on large volumes).
	spc := uint64(b[13])
	switch {
	case spc == 0:
		return FS{}
	case spc > 0x80:
		if 256-spc > 12 {
			return FS{}
		}
		spc = 1 << (256 - spc)
	case spc&(spc-1) != 0:
		return FS{}
	}
	return FS{Type: "ntfs", BlockSize: int(sector * spc), IOSize: int(sector)}
}

// exfat reads the exFAT boot sector at byte 0.
func exfat(b []byte) FS {
	if string(b[3:11]) != "EXFAT   " || b[510] != 0x55 || b[511] != 0xaa {
		return FS{}
	}
	for _, c := range b[11:64] { // MustBeZero, where FAT keeps its BPB
		if c != 0 {
			return FS{}
		}
	}
	sectorShift, clusterShift := uint(b[108]), uint(b[109])
	if sectorShift < 9 || sectorShift > 12 || clusterShift > 25-sectorShift {
		return FS{}
	}
	return FS{Type: "exfat", BlockSize: 1 << (sectorShift + clusterShift), IOSize: 1 << sectorShift}
}

// fat reads a FAT12/16/32 boot sector's BIOS parameter block at byte 0.
// FAT has no magic number: like blkid, it takes the BPB's fields for one
// only when each has a value FAT allows.
func fat(b []byte) FS {
	if b[510] != 0x55 || b[511] != 0xaa || !(b[0] == 0xeb && b[2] == 0x90 || b[0] == 0xe9) {
		return FS{}
	}
	sector := uint64(le.Uint16(b[11:]))
	spc := uint64(b[13])
	reserved := le.Uint16(b[14:])
	fats := b[16]
	media := b[21]
	total16, total32 := le.Uint16(b[19:]), le.Uint32(b[32:])
	fatSize16, fatSize32 := le.Uint16(b[22:]), le.Uint32(b[36:])
	switch {
	case !pow2In(sector, 512, 4096), !pow2In(spc, 1, 128):
		return FS{}
	case reserved == 0, fats == 0, fats > 4:
		return FS{}
	case media != 0xf0 && media < 0xf8:
		return FS{}
	case total16 == 0 && total32 == 0:
		return FS{}
	case fatSize16 == 0 && (fatSize32 == 0 || string(b[82:87]) != "FAT32"):
		return FS{}
	}
	return FS{Type: "vfat", BlockSize: int(sector * spc), IOSize: int(sector)}
}

// SizeError: a sector size larger than the filesystem's I/O unit.
type SizeError struct {
	FS         FS
	SectorSize int
}

func (e *SizeError) Error() string {
	return fmt.Sprintf("it holds %s: a device with %d-byte sectors could not mount it", e.FS, e.SectorSize)
}

// ChooseSectorSize picks the sector size of an encrypted device that will
// hold fs: explicit (a size the user gave; 0 for none) if fs allows it,
// otherwise a *SizeError; without one, def lowered, if fs needs it, to
// fs.IOSize, the largest sector size it allows (lowered is then true).
// Sector sizes are powers of two from 512, which every filesystem
// recognised allows.
func ChooseSectorSize(fs FS, explicit, def int) (size int, lowered bool, err error) {
	if explicit != 0 {
		if !fs.Allows(explicit) {
			return 0, false, &SizeError{FS: fs, SectorSize: explicit}
		}
		return explicit, false, nil
	}
	if fs.Allows(def) {
		return def, false, nil
	}
	return fs.IOSize, true, nil // a power of two from 512, below def
}
