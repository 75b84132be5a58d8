package mount

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
)

// Filesystem names that Detect returns and Mount takes. Most are also the
// kernel's names for their drivers; the driver table (Drivers) says which
// kernel driver or FUSE program mounts each.
const (
	FSExt4     = "ext4" // ext2, ext3 and ext4: the ext4 driver serves all three
	FSXFS      = "xfs"
	FSBtrfs    = "btrfs"
	FSVFAT     = "vfat" // FAT12, FAT16, FAT32
	FSExFAT    = "exfat"
	FSNTFS     = "ntfs"
	FSHFSPlus  = "hfsplus" // HFS+ and HFSX
	FSSquashfs = "squashfs"
	FSEROFS    = "erofs"
)

// detectSize is how much of a device Detect reads: btrfs's superblock,
// the farthest magic it looks for, ends below 64 KiB + 4 KiB.
const detectSize = 128 << 10

// Detect names the filesystem on the block device at path from its
// superblock (one of the FS names above), or "" when it finds none. It
// reads the device itself, so it sees what mount(2) would.
func Detect(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	buf := make([]byte, detectSize)
	n, err := f.ReadAt(buf, 0)
	if n < 4096 {
		if err == nil {
			err = errors.New("device too small")
		}
		return "", fmt.Errorf("read superblock of %s: %w", path, err)
	}
	return detect(buf[:n]), nil
}

// detect recognises superblock magics in the first bytes of a device; ""
// means none. Offsets are from each filesystem's on-disk format. The OEM
// names of NTFS and exFAT come first: their boot sectors also look like a
// FAT boot sector (the jump, the 0x55AA signature), and a FAT type string
// may survive from an earlier format in the bytes they leave alone.
func detect(b []byte) string {
	has := func(off int, magic string) bool {
		return len(b) >= off+len(magic) && bytes.Equal(b[off:off+len(magic)], []byte(magic))
	}
	le16 := func(off int) uint16 {
		if len(b) < off+2 {
			return 0
		}
		return binary.LittleEndian.Uint16(b[off:])
	}
	be16 := func(off int) uint16 {
		if len(b) < off+2 {
			return 0
		}
		return binary.BigEndian.Uint16(b[off:])
	}
	switch {
	case has(3, "NTFS    ") && le16(510) == 0xAA55:
		return FSNTFS
	case has(3, "EXFAT   ") && le16(510) == 0xAA55:
		return FSExFAT
	case le16(1080) == 0xEF53:
		return FSExt4
	case has(0, "XFSB"):
		return FSXFS
	case has(0x10040, "_BHRfS_M"):
		return FSBtrfs
	// HFS+ ("H+", version 4) and HFSX ("HX", version 5): the volume
	// header at 1024, big-endian (Apple TN1150).
	case has(1024, "H+") && be16(1026) == 4, has(1024, "HX") && be16(1026) == 5:
		return FSHFSPlus
	case has(0, "hsqs"): // squashfs 4, little-endian
		return FSSquashfs
	case len(b) >= 1028 && binary.LittleEndian.Uint32(b[1024:]) == 0xE0F5E1E2:
		return FSEROFS
	case has(0x52, "FAT32   "), has(0x36, "FAT16   "), has(0x36, "FAT12   "):
		return FSVFAT
	}
	return ""
}
