package bitlk

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"time"
)

// The volume's first sector: boot code, signature, BIOS parameter block
// and the information block that says where the FVE metadata is.
const (
	bootSectorSize   = 512
	infoOffset       = 160 // the information GUID and the metadata offsets
	infoOffsetToGo   = 424 // the same in BitLocker To Go's FAT-looking sector
	metadataArea     = 64 << 10
	blockHeaderSize  = 64
	metaHeaderSize   = 48
	entriesOffset    = blockHeaderSize + metaHeaderSize
	validationHeader = 8  // u16 size, u16 version, u32 CRC-32
	validationDatum  = 80 // the AES-CCM encrypted SHA-256 of the block
	// stateEncrypted is the current and next state of a fully encrypted
	// volume.
	stateEncrypted = 4
)

var (
	bootCodeV1 = []byte{0xeb, 0x52, 0x90} // Windows Vista
	bootCodeV2 = []byte{0xeb, 0x58, 0x90} // Windows 7 and later
	sigFVE     = []byte("-FVE-FS-")
	sigToGo    = []byte("MSWIN4.1")
	// The information GUIDs: a normally encrypted volume, and one whose
	// encryption runs as it is written (encrypt-on-write: used space only,
	// the rest still clear).
	infoGUIDNormal = guid{0x3b, 0xd6, 0x67, 0x49, 0x29, 0x2e, 0xd8, 0x4a, 0x83, 0x99, 0xf6, 0xa3, 0x39, 0xe3, 0xd0, 0x01}
	infoGUIDEOW    = guid{0x3b, 0x4d, 0xa8, 0x92, 0x80, 0xdd, 0x0e, 0x4d, 0x9e, 0x4e, 0xb1, 0xe3, 0x28, 0x4e, 0xae, 0xd8}
)

// bootInfo is what the volume's first sector says.
type bootInfo struct {
	version    int // 1 (Vista) or 2 (Windows 7 and later)
	toGo       bool
	sectorSize int      // bytes per sector from the BPB (0 there means 512)
	infoGUID   guid     // normal, EOW or unknown
	offsets    [3]int64 // of the three metadata copies
}

// readBoot reads and checks the first sector; errNotBitLocker if it is
// not BitLocker's.
func readBoot(r io.ReaderAt, size int64) (*bootInfo, error) {
	if size < bootSectorSize {
		return nil, errNotBitLocker
	}
	var s [bootSectorSize]byte
	if _, err := r.ReadAt(s[:], 0); err != nil {
		return nil, fmt.Errorf("read the boot sector: %w", err)
	}
	b := &bootInfo{}
	switch {
	case bytes.Equal(s[:3], bootCodeV2):
		b.version = 2
	case bytes.Equal(s[:3], bootCodeV1):
		b.version = 1
	default:
		return nil, errNotBitLocker
	}
	info := infoOffset
	switch {
	case bytes.Equal(s[3:11], sigFVE):
	case bytes.Equal(s[3:11], sigToGo) && b.version == 2:
		// MSWIN4.1 is every FAT volume's OEM name: only the information
		// GUID tells BitLocker To Go.
		b.toGo = true
		info = infoOffsetToGo
		if g := guid(s[info : info+16]); g != infoGUIDNormal && g != infoGUIDEOW {
			return nil, errNotBitLocker
		}
	default:
		return nil, errNotBitLocker
	}
	b.sectorSize = int(binary.LittleEndian.Uint16(s[11:]))
	if b.sectorSize == 0 {
		b.sectorSize = 512
	}
	copy(b.infoGUID[:], s[info:])
	for i := range b.offsets {
		// A u64 past 2^63 is not an offset in any image: leave it negative
		// and let the copy's read fail on it.
		b.offsets[i] = int64(binary.LittleEndian.Uint64(s[info+16+8*i:]))
	}
	return b, nil
}

var errNotBitLocker = errors.New("no BitLocker signature (-FVE-FS- or BitLocker To Go) in the first sector")

// A metaCopy is one of the three FVE metadata copies, as read: valid, or
// the reason it is not used.
type metaCopy struct {
	index  int
	offset int64
	err    error  // nil if the copy is valid
	block  []byte // the bytes the CRC and the validation hash cover
	meta   *metadata
}

// metadata is the content of a valid copy.
type metadata struct {
	covered       int // S: the bytes the CRC covers
	curState      uint16
	nextState     uint16
	volumeSize    uint64
	headerSectors uint32 // of the relocated boot sectors, in BPB sectors
	headerOffset  uint64 // of the relocated boot sectors, from the block header
	volumeGUID    guid
	method        uint16
	created       uint64 // FILETIME
	description   string
	protectors    []*protector
	fvek          *ccmBlob // the first FVEK entry
	fvekCount     int
	volHeader     *[2]uint64 // offset, size of the relocated boot sectors (entry 0x000f)
	validation    *ccmBlob   // the encrypted SHA-256 of block
	validationVer uint16
}

// readCopy reads copy i at off and checks it: signature, version, sizes,
// CRC-32, the offsets it names (those of the boot sector, so that it
// names its own place) and the entries.
func readCopy(r io.ReaderAt, size int64, boot *bootInfo, i int) *metaCopy {
	c := &metaCopy{index: i, offset: boot.offsets[i]}
	c.meta, c.block, c.err = readCopyAt(r, size, boot, c.offset)
	return c
}

func readCopyAt(r io.ReaderAt, size int64, boot *bootInfo, off int64) (*metadata, []byte, error) {
	if off < 0 || off >= size || size-off < entriesOffset {
		return nil, nil, fmt.Errorf("its offset %d is outside the %d-byte image", uint64(off), size)
	}
	buf := make([]byte, min(metadataArea, size-off))
	if n, err := r.ReadAt(buf, off); n < len(buf) {
		return nil, nil, fmt.Errorf("read: %w", err)
	}
	if !bytes.Equal(buf[:8], sigFVE) {
		return nil, nil, errors.New("no -FVE-FS- signature")
	}
	le := binary.LittleEndian
	if v := le.Uint16(buf[10:]); v != 2 {
		return nil, nil, fmt.Errorf("metadata version %d (want 2)", v)
	}
	s := int(le.Uint16(buf[8:])) * 16
	if s < entriesOffset || s > metadataArea-validationHeader-validationDatum {
		return nil, nil, fmt.Errorf("it claims %d bytes (want %d to %d)", s, entriesOffset, metadataArea-validationHeader-validationDatum)
	}
	if s+validationHeader+validationDatum > len(buf) {
		return nil, nil, fmt.Errorf("its %d bytes run past the end of the image", s+validationHeader+validationDatum)
	}
	val := buf[s:]
	m := &metadata{covered: s, validationVer: le.Uint16(val[2:])}
	if m.validationVer > 2 {
		return nil, nil, fmt.Errorf("validation version %d (want 2 at most)", m.validationVer)
	}
	if got, want := crc32.ChecksumIEEE(buf[:s]), le.Uint32(val[4:]); got != want {
		return nil, nil, fmt.Errorf("CRC-32 %08x does not match the stored %08x", got, want)
	}
	// Keep only the block: what is parsed from it points into this copy,
	// and the 64 KiB read buffer can go.
	block := bytes.Clone(buf[:s])
	for j := range 3 {
		if o := int64(le.Uint64(block[32+8*j:])); o != boot.offsets[j] {
			return nil, nil, fmt.Errorf("it puts copy %d at byte %d, the boot sector at %d", j, uint64(o), uint64(boot.offsets[j]))
		}
	}
	msize := int(le.Uint32(block[64:]))
	switch {
	case msize < metaHeaderSize || msize > s-blockHeaderSize:
		return nil, nil, fmt.Errorf("metadata size %d does not fit its %d-byte block", uint32(msize), s)
	case le.Uint32(block[68:]) != 1:
		return nil, nil, fmt.Errorf("metadata header version %d (want 1)", le.Uint32(block[68:]))
	case le.Uint32(block[72:]) != metaHeaderSize:
		return nil, nil, fmt.Errorf("metadata header size %d (want %d)", le.Uint32(block[72:]), metaHeaderSize)
	case le.Uint32(block[76:]) != uint32(msize):
		return nil, nil, fmt.Errorf("metadata size %d and its copy %d differ", msize, le.Uint32(block[76:]))
	}
	m.curState = le.Uint16(block[12:])
	m.nextState = le.Uint16(block[14:])
	m.volumeSize = le.Uint64(block[16:])
	m.headerSectors = le.Uint32(block[28:])
	m.headerOffset = le.Uint64(block[56:])
	copy(m.volumeGUID[:], block[80:])
	m.method = le.Uint16(block[100:])
	m.created = le.Uint64(block[104:])

	entries, err := parseEntries(block[entriesOffset : blockHeaderSize+msize])
	if err != nil {
		return nil, nil, err
	}
	if err := m.parseEntries(entries); err != nil {
		return nil, nil, err
	}
	// The validation datum follows its header: the SHA-256 of block,
	// AES-CCM encrypted with the VMK.
	ve, err := parseEntries(val[validationHeader : validationHeader+validationDatum])
	if err != nil || len(ve) == 0 {
		return nil, nil, errors.New("no validation datum after the block")
	}
	if m.validation, err = parseCCM(ve[0]); err != nil {
		return nil, nil, fmt.Errorf("validation datum: %w", err)
	}
	m.validation.ct = bytes.Clone(m.validation.ct)
	return m, block, nil
}

// parseEntries reads the top-level entries: protectors (VMKs), the
// FVEK, the description, where the boot sectors went. Others are skipped.
func (m *metadata) parseEntries(entries []entry) error {
	for _, e := range entries {
		switch e.typ {
		case entryVMK:
			if e.value != valueVMK {
				return fmt.Errorf("a VMK entry with value type %#04x", e.value)
			}
			if len(m.protectors) == maxTopLevelVMKs {
				return fmt.Errorf("more than %d protectors", maxTopLevelVMKs)
			}
			p, err := parseProtector(e, len(m.protectors))
			if err != nil {
				return fmt.Errorf("protector %d: %w", len(m.protectors), err)
			}
			m.protectors = append(m.protectors, p)
		case entryFVEK:
			b, err := parseCCM(e)
			if err != nil {
				return fmt.Errorf("FVEK: %w", err)
			}
			if m.fvek == nil {
				m.fvek = b
			}
			m.fvekCount++
		case entryDescription:
			if e.value != valueString {
				return fmt.Errorf("a description with value type %#04x", e.value)
			}
			m.description = decodeUTF16(e.data)
		case entryVolumeHeader:
			if e.value != valueOffsetSize || len(e.data) < 16 {
				return fmt.Errorf("a volume header entry with value type %#04x of %d bytes", e.value, len(e.data))
			}
			m.volHeader = &[2]uint64{binary.LittleEndian.Uint64(e.data), binary.LittleEndian.Uint64(e.data[8:])}
		}
	}
	return nil
}

// Protections: what a protector (VMK) needs to open.
const (
	protClearKey    = 0x0000
	protTPM         = 0x0100
	protStartupKey  = 0x0200
	protTPMPIN      = 0x0500
	protRecovery    = 0x0800
	protSmartCard   = 0x1000
	protPassword    = 0x2000
	stretchPassword = 0x1001 // the stretch-key method of a password VMK
	stretchRecovery = 0x1000 // of a recovery-password VMK
)

// A protector is a VMK entry: the volume master key wrapped for one
// way of unlocking.
type protector struct {
	index      int
	guid       guid
	modified   uint64 // FILETIME
	protection uint16
	name       string   // a string value, if any ("ExternalKey")
	hasSalt    bool     // a stretch key is present
	salt       [16]byte // of the stretch key
	encVMK     *ccmBlob // the VMK, AES-CCM encrypted with the protector's key
	clearKey   []byte   // a suspended volume's key, which decrypts encVMK
}

func parseProtector(e entry, index int) (*protector, error) {
	nested, err := parseNested(e, vmkHeaderSize, "VMK")
	if err != nil {
		return nil, err
	}
	le := binary.LittleEndian
	p := &protector{index: index, modified: le.Uint64(e.data[16:]), protection: le.Uint16(e.data[26:])}
	copy(p.guid[:], e.data)
	for _, n := range nested {
		switch n.value {
		case valueStretchKey:
			if len(n.data) < stretchHeaderSize {
				return nil, fmt.Errorf("stretch key of %d bytes", len(n.data))
			}
			if !p.hasSalt {
				p.hasSalt = true
				copy(p.salt[:], n.data[4:])
			}
		case valueAESCCM:
			b, err := parseCCM(n)
			if err != nil {
				return nil, err
			}
			if p.encVMK == nil {
				p.encVMK = b
			}
		case valueKey:
			if len(n.data) < keyHeaderSize {
				return nil, fmt.Errorf("key of %d bytes", len(n.data))
			}
			if p.clearKey == nil {
				p.clearKey = n.data[keyHeaderSize:]
			}
		case valueString:
			if p.name == "" {
				p.name = decodeUTF16(n.data)
			}
		}
	}
	return p, nil
}

// kind names what a protector needs, for people and for --protector.
func (p *protector) kind() string {
	switch p.protection {
	case protClearKey:
		return "clear-key"
	case protTPM:
		return "tpm"
	case protStartupKey:
		return "startup-key"
	case protTPMPIN:
		return "tpm-pin"
	case protRecovery:
		return "recovery"
	case protSmartCard:
		return "smart-card"
	case protPassword:
		return "password"
	}
	if p.protection&protTPM != 0 {
		return fmt.Sprintf("tpm-%#04x", p.protection)
	}
	return fmt.Sprintf("unknown-%#04x", p.protection)
}

// title names it for sentences.
func (p *protector) title() string {
	switch p.protection {
	case protClearKey:
		return "clear key (protection suspended)"
	case protTPM:
		return "TPM"
	case protStartupKey:
		return "startup key"
	case protTPMPIN:
		return "TPM and PIN"
	case protRecovery:
		return "recovery password"
	case protSmartCard:
		return "smart card"
	case protPassword:
		return "password"
	}
	if p.protection&protTPM != 0 {
		return fmt.Sprintf("TPM with protection %#04x", p.protection)
	}
	return fmt.Sprintf("unknown protection %#04x", p.protection)
}

// usable says whether xtsctl can open the protector, and why not.
func (p *protector) usable() error {
	switch p.protection {
	case protPassword, protRecovery:
		if !p.hasSalt {
			return fmt.Errorf("its %s has no stretch key (salt)", p.title())
		}
	case protStartupKey:
	case protClearKey:
		if len(p.clearKey) != vmkSize {
			return fmt.Errorf("its clear key has %d bytes (want %d)", len(p.clearKey), vmkSize)
		}
	case protTPM, protTPMPIN:
		return errors.New("it needs the computer's TPM")
	case protSmartCard:
		return errors.New("it needs a smart card")
	default:
		if p.protection&protTPM != 0 {
			return errors.New("it needs the computer's TPM")
		}
		return fmt.Errorf("its protection %#04x is unknown", p.protection)
	}
	if p.encVMK == nil {
		return errors.New("it holds no encrypted VMK")
	}
	return nil
}

func (p *protector) String() string {
	return fmt.Sprintf("protector %d {%s} (%s)", p.index, p.guid, p.title())
}

// filetime converts a Windows FILETIME (100 ns since 1601) to a time.
func filetime(ft uint64) time.Time {
	const unixEpoch = 11644473600 // seconds from 1601 to 1970
	return time.Unix(int64(ft/10000000)-unixEpoch, int64(ft%10000000)*100).UTC()
}
