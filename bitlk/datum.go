package bitlk

import (
	"encoding/binary"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf16"
)

// FVE metadata is a list of entries ("datums"), each an 8-byte header
// (u16 size including the header, u16 entry type, u16 value type, u16
// version) and the value; some values hold a nested list of their own.
// A size of 0 ends a list. Nothing here allocates from a length read
// from the image: entries are slices of the buffer they were read into,
// whose size is the format's fixed 64 KiB at most.

const entryHeaderSize = 8

// Entry types.
const (
	entryProperty     = 0x0000
	entryVMK          = 0x0002
	entryFVEK         = 0x0003
	entryStartupKey   = 0x0006
	entryDescription  = 0x0007
	entryVolumeHeader = 0x000f
	entryVolumeGUID   = 0x0019
)

// Value types.
const (
	valueKey          = 0x0001
	valueString       = 0x0002
	valueStretchKey   = 0x0003
	valueAESCCM       = 0x0005
	valueVMK          = 0x0008
	valueExternalKey  = 0x0009
	valueOffsetSize   = 0x000f
	valueGUID         = 0x0017
	maxNestedEntries  = 64 // in one VMK or external key: samples have up to 5
	maxTopLevelVMKs   = 64 // protectors in one metadata copy
	ccmNonceSize      = 12
	ccmTagSize        = 16
	vmkHeaderSize     = 28 // GUID, FILETIME, u16 unknown, u16 protection
	stretchHeaderSize = 20 // u32 method, salt[16]
	keyHeaderSize     = 4  // u32 method
	extKeyHeaderSize  = 24 // GUID, FILETIME
)

// An entry is one datum.
type entry struct {
	typ     uint16 // entry type
	value   uint16 // value type
	version uint16
	data    []byte // the value, after the header
}

// parseEntries splits b into entries, up to a size-0 entry or to fewer
// than a header's bytes left. An entry shorter than its header or longer
// than what is left is an error.
func parseEntries(b []byte) ([]entry, error) {
	var out []entry
	for off := 0; len(b)-off >= entryHeaderSize; {
		size := int(binary.LittleEndian.Uint16(b[off:]))
		if size == 0 {
			break
		}
		if size < entryHeaderSize || size > len(b)-off {
			return nil, fmt.Errorf("entry at byte %d claims %d bytes (%d left)", off, size, len(b)-off)
		}
		out = append(out, entry{
			typ:     binary.LittleEndian.Uint16(b[off+2:]),
			value:   binary.LittleEndian.Uint16(b[off+4:]),
			version: binary.LittleEndian.Uint16(b[off+6:]),
			data:    b[off+entryHeaderSize : off+size],
		})
		off += size
	}
	return out, nil
}

// parseNested parses the list nested in an entry's value from byte skip;
// the value must be at least skip bytes long.
func parseNested(e entry, skip int, what string) ([]entry, error) {
	if len(e.data) < skip {
		return nil, fmt.Errorf("%s of %d bytes is shorter than its %d-byte header", what, len(e.data), skip)
	}
	l, err := parseEntries(e.data[skip:])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if len(l) > maxNestedEntries {
		return nil, fmt.Errorf("%s holds %d entries (at most %d)", what, len(l), maxNestedEntries)
	}
	return l, nil
}

// A ccmBlob is an AES-CCM encrypted value (value type 5): nonce, tag
// (stored before the ciphertext) and ciphertext.
type ccmBlob struct {
	nonce [ccmNonceSize]byte
	tag   [ccmTagSize]byte
	ct    []byte
}

func parseCCM(e entry) (*ccmBlob, error) {
	if e.value != valueAESCCM {
		return nil, fmt.Errorf("value type %#04x where an AES-CCM encrypted key belongs", e.value)
	}
	if len(e.data) < ccmNonceSize+ccmTagSize+keyDatumHeaderSize {
		return nil, fmt.Errorf("AES-CCM encrypted key of %d bytes is too short", len(e.data))
	}
	b := &ccmBlob{ct: e.data[ccmNonceSize+ccmTagSize:]}
	copy(b.nonce[:], e.data)
	copy(b.tag[:], e.data[ccmNonceSize:])
	return b, nil
}

// decodeUTF16 turns a UTF-16LE string value into text for people: NULs at
// the end dropped, an odd last byte ignored, unpaired surrogates and
// characters that are not printable (an attacker's escape sequences)
// replaced.
func decodeUTF16(b []byte) string {
	u := make([]uint16, len(b)/2)
	for i := range u {
		u[i] = binary.LittleEndian.Uint16(b[2*i:])
	}
	for len(u) > 0 && u[len(u)-1] == 0 {
		u = u[:len(u)-1]
	}
	return strings.Map(func(r rune) rune {
		if unicode.IsPrint(r) {
			return r
		}
		return unicode.ReplacementChar
	}, string(utf16.Decode(u)))
}

// A GUID as BitLocker stores it: Microsoft's mixed-endian layout (the
// first three fields little-endian).
type guid [16]byte

func (g guid) String() string {
	return fmt.Sprintf("%08x-%04x-%04x-%x-%x",
		binary.LittleEndian.Uint32(g[0:]), binary.LittleEndian.Uint16(g[4:]),
		binary.LittleEndian.Uint16(g[6:]), g[8:10], g[10:16])
}

// parseGUID reads a GUID as String writes it, in either case, with or
// without braces.
func parseGUID(s string) (guid, bool) {
	var g guid
	s = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(s), "{"), "}")
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return g, false
	}
	hex := strings.ReplaceAll(s, "-", "")
	var raw [16]byte
	for i := range raw {
		hi, ok1 := unhex(hex[2*i])
		lo, ok2 := unhex(hex[2*i+1])
		if !ok1 || !ok2 {
			return g, false
		}
		raw[i] = hi<<4 | lo
	}
	// The text is big-endian in each field; the first three are stored
	// little-endian.
	g[0], g[1], g[2], g[3] = raw[3], raw[2], raw[1], raw[0]
	g[4], g[5] = raw[5], raw[4]
	g[6], g[7] = raw[7], raw[6]
	copy(g[8:], raw[8:])
	return g, true
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
