package inplace

import (
	"bytes"
	"encoding/binary"

	"github.com/xtsctl/xtsctl/volume"
)

// signatureBytes is how much of the start of some data recognise needs:
// the btrfs superblock is the farthest, at 64 KiB.
const signatureBytes = 72 << 10

// recognise names the filesystem, partition table or encryption header at
// the start of b ("" if it finds none). It is what the guards of a new
// plain run ask of the data, and decides only refusals: every signature
// checks more than a short magic, so that random bytes (ciphertext, or
// the decryption of plaintext under a key) match with a probability far
// below 2^-32.
func recognise(b []byte) string {
	has := func(off int, magic string) bool {
		return len(b) >= off+len(magic) && string(b[off:off+len(magic)]) == magic
	}
	le16 := func(off int) uint16 { return binary.LittleEndian.Uint16(b[off:]) }
	switch {
	case has(0, volume.Magic):
		return "an xtsctl volume header"
	case has(0, "LUKS\xba\xbe"):
		return "a LUKS header"
	case has(3, "NTFS    "):
		return "an NTFS filesystem"
	case has(3, "EXFAT   "):
		return "an exFAT filesystem"
	case has(3, "-FVE-FS-"):
		return "a BitLocker volume"
	case has(0x52, "FAT32   "), has(0x36, "FAT16   "), has(0x36, "FAT12   "):
		return "a FAT filesystem"
	case has(0, "XFSB") && len(b) >= 8 && binary.BigEndian.Uint32(b[4:]) >= 512 && binary.BigEndian.Uint32(b[4:]) <= 65536:
		return "an XFS filesystem"
	case has(0, "hsqs") && len(b) >= 32 && le16(28) == 4:
		return "a squashfs filesystem"
	case len(b) >= 2048 && le16(1080) == 0xEF53 && le32(b, 1024+24) <= 6 && le32(b, 1024) > 0 && le16(1024+58) <= 7:
		// s_magic, s_log_block_size (1 KiB to 64 KiB), s_inodes_count, s_state
		return "an ext2/3/4 filesystem"
	case len(b) >= 2048 && le32(b, 1024) == 0xF2F52010 && le32(b, 1024+8) >= 9 && le32(b, 1024+8) <= 12:
		return "an F2FS filesystem"
	case has(0x10040, "_BHRfS_M"):
		return "a btrfs filesystem"
	case has(0x8001, "CD001"):
		return "an ISO 9660 filesystem"
	case has(4096-10, "SWAPSPACE2"), has(4096-10, "SWAP-SPACE"):
		return "a swap area"
	case has(512+24, "LVM2 001") && has(512, "LABELONE"):
		return "an LVM physical volume"
	case has(512, "EFI PART"), has(4096, "EFI PART"):
		return "a GPT partition table"
	case isMBR(b):
		return "an MBR partition table"
	}
	return ""
}

// isMBR: the boot signature, and four partition entries that are each
// empty or plausible (boot flag 0 or 0x80, a start and a length), at
// least one not empty.
func isMBR(b []byte) bool {
	if len(b) < 512 || b[510] != 0x55 || b[511] != 0xaa {
		return false
	}
	used := 0
	for i := range 4 {
		e := b[446+16*i : 446+16*(i+1)]
		if bytes.Equal(e, make([]byte, 16)) {
			continue
		}
		if e[0] != 0 && e[0] != 0x80 || e[4] == 0 || le32(e, 8) == 0 || le32(e, 12) == 0 {
			return false
		}
		used++
	}
	return used > 0
}
