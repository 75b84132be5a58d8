package tcrypt

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// The header sector: 64 bytes of salt in clear, then 448 encrypted bytes.
const (
	headerSize = 512
	saltSize   = 64
	encSize    = headerSize - saltSize
)

// Highest versions xtsctl knows: TrueCrypt 7.1a wrote header version 5
// and at most 7.1a as the minimum program version; VeraCrypt writes
// header version 5 and minimum program version 1.0b (0x010b); 1.26
// is the newest it knows.
const (
	maxHeaderVersion      = 5
	maxTrueCryptMinProg   = 0x071a
	minVeraCryptMinProg   = 0x010b
	maxVeraCryptMinProg   = 0x0126
	flagSystemEncryption  = 1 << 0
	flagNonSystemInPlace  = 1 << 1
	keyAreaOff, keyAreaSz = 192, 256
)

// A header is a decrypted VeraCrypt or TrueCrypt header whose magic and
// CRCs matched. Integers are big-endian on disk.
type header struct {
	Magic          string `json:"magic"` // "VERA" or "TRUE"
	Version        uint16 `json:"header_version"`
	MinProgram     uint16 `json:"min_program_version"`
	HiddenSize     uint64 `json:"hidden_volume_size"`
	VolumeSize     uint64 `json:"volume_size"`
	DataOffset     uint64 `json:"data_offset"` // "master key scope" offset
	EncryptedSize  uint64 `json:"encrypted_area_size"`
	Flags          uint32 `json:"flags"`
	SectorSize     uint32 `json:"sector_size"`
	keys           [keyAreaSz]byte
	keyCRC, hdrCRC uint32
}

// parseHeader reads a decrypted header (the 448 bytes after the salt)
// and accepts it only if its magic and CRC-32s match: the key area's
// always, the header fields' from version 4 on (earlier TrueCrypt left it
// zero). Nothing else is read before they match, so a header that does
// not decrypt says nothing.
func parseHeader(dec []byte) (*header, bool) {
	if len(dec) != encSize {
		return nil, false
	}
	magic := string(dec[0:4])
	if magic != "VERA" && magic != "TRUE" {
		return nil, false
	}
	keyCRC := binary.BigEndian.Uint32(dec[8:])
	if crc32.ChecksumIEEE(dec[keyAreaOff:keyAreaOff+keyAreaSz]) != keyCRC {
		return nil, false
	}
	version := binary.BigEndian.Uint16(dec[4:])
	hdrCRC := binary.BigEndian.Uint32(dec[188:])
	if version >= 4 && crc32.ChecksumIEEE(dec[:188]) != hdrCRC {
		return nil, false
	}
	h := &header{
		Magic:         magic,
		Version:       version,
		MinProgram:    binary.BigEndian.Uint16(dec[6:]),
		HiddenSize:    binary.BigEndian.Uint64(dec[28:]),
		VolumeSize:    binary.BigEndian.Uint64(dec[36:]),
		DataOffset:    binary.BigEndian.Uint64(dec[44:]),
		EncryptedSize: binary.BigEndian.Uint64(dec[52:]),
		Flags:         binary.BigEndian.Uint32(dec[60:]),
		SectorSize:    binary.BigEndian.Uint32(dec[64:]),
		keyCRC:        keyCRC,
		hdrCRC:        hdrCRC,
	}
	copy(h.keys[:], dec[keyAreaOff:])
	return h, true
}

func (h *header) wipe() {
	if h != nil {
		clear(h.keys[:])
	}
}

func (h *header) product() string {
	if h.Magic == "VERA" {
		return "VeraCrypt"
	}
	return "TrueCrypt"
}

// checkVersion applies the programs' version rules to a header that
// opened: a header from a newer program, or one no program wrote, is
// refused with what it says.
func (h *header) checkVersion() error {
	switch {
	case h.Version == 0 || h.Version > maxHeaderVersion:
		return fmt.Errorf("%s header version %d: %w", h.product(), h.Version, errUnsupportedVersion)
	case h.Magic == "VERA" && h.Version < 5:
		return fmt.Errorf("VeraCrypt header version %d (VeraCrypt writes 5): %w", h.Version, errUnsupportedVersion)
	case h.Magic == "TRUE" && h.MinProgram > maxTrueCryptMinProg:
		return fmt.Errorf("the header needs TrueCrypt %s or later, and TrueCrypt's last was 7.1a: %w", programVersion(h.MinProgram), errUnsupportedVersion)
	case h.Magic == "VERA" && h.MinProgram < minVeraCryptMinProg:
		return fmt.Errorf("the header's minimum program version %s is older than VeraCrypt's first format (1.0b): %w", programVersion(h.MinProgram), errUnsupportedVersion)
	case h.Magic == "VERA" && h.MinProgram > maxVeraCryptMinProg:
		return fmt.Errorf("the header needs VeraCrypt %s or later, newer than xtsctl knows: %w", programVersion(h.MinProgram), errUnsupportedVersion)
	}
	return nil
}

// programVersion spells a BCD program version (0x071a is 7.1a, 0x010b
// 1.0b, 0x0126 1.26).
func programVersion(v uint16) string {
	major, minor := v>>8, v&0xff
	if minor&0x0f >= 0x0a {
		return fmt.Sprintf("%x.%x%c", major, minor>>4, 'a'+rune(minor&0x0f-0x0a))
	}
	return fmt.Sprintf("%x.%02x", major, minor)
}
