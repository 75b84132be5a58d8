// Package dmtable writes device-mapper tables: the dm-crypt table line of
// a mapping, in dm-crypt's own units. It is a leaf, so that formats and
// the command line describe mappings without importing device-mapper code.
package dmtable

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// DefaultCipher is dm-crypt's name for XTS-AES with the plain64 IV: the
// tweak of a data unit is its sector number, little-endian, in 64 bits.
const DefaultCipher = "aes-xts-plain64"

// A CryptTable describes a dm-crypt mapping of one contiguous range of a
// block device, the table line
//
//	0 Length crypt Cipher KEYHEX IVOffset Device Offset [N sector_size:S iv_large_sectors ...]
//
// Every position and length is in dm-crypt's units, 512-byte sectors,
// whatever SectorSize is. Data unit i of the mapping (SectorSize bytes at
// byte i*SectorSize of the mapped device, read from byte
// Offset*512 + i*SectorSize of Device) is encrypted with the tweak
//
//	IVOffset + i*SectorSize/512            by default,
//	(IVOffset*512 + i*SectorSize)/SectorSize with IVLargeSectors.
//
// Offset does not enter the tweak. docs/DM.md has the table of verified cases.
type CryptTable struct {
	// Cipher is the dm-crypt cipher specification; "" means DefaultCipher.
	Cipher string

	// Key is the raw key: key1 || key2, 32 bytes (AES-128) or 64 bytes
	// (AES-256) for XTS. It is hex-encoded only into the ioctl buffer,
	// which is wiped after the load; the caller owns and wipes Key.
	Key []byte

	// Device is the backing block device: a path such as /dev/loop0, or
	// "major:minor".
	Device string

	// Offset is where the mapped data starts on Device, in 512-byte
	// sectors (cryptsetup --offset). It must be a multiple of
	// SectorSize/512.
	Offset uint64

	// Length is the size of the mapping in 512-byte sectors. It must be a
	// multiple of SectorSize/512.
	Length uint64

	// IVOffset is added to the 512-byte sector number before the tweak is
	// made (cryptsetup --skip). It must be a multiple of SectorSize/512.
	IVOffset uint64

	// SectorSize is the encryption data unit in bytes: 0 (meaning 512),
	// 512, 1024, 2048 or 4096 (table option sector_size:N).
	SectorSize int

	// IVLargeSectors counts tweaks in SectorSize units instead of 512-byte
	// units (table option iv_large_sectors). With 512-byte sectors the two
	// countings agree, and the option is left out of the table.
	IVLargeSectors bool

	// AllowDiscards passes discards down to Device (allow_discards). It
	// reveals which sectors are unused.
	AllowDiscards bool

	// The performance options of dm-crypt, which LUKS2 headers record as
	// persistent flags (cryptsetup --perf-*, --persistent). None changes
	// what is encrypted. SameCPUCrypt (same_cpu_crypt) encrypts on the CPU
	// that issued the I/O; HighPriority (high_priority, Linux 6.10 and
	// later; older kernels refuse the table) runs dm-crypt's workqueues at
	// high priority; SubmitFromCryptCPUs (submit_from_crypt_cpus) submits
	// writes from the encrypting threads; NoReadWorkqueue and
	// NoWriteWorkqueue (no_read_workqueue, no_write_workqueue) process
	// I/O synchronously instead of through workqueues.
	SameCPUCrypt        bool
	HighPriority        bool
	SubmitFromCryptCPUs bool
	NoReadWorkqueue     bool
	NoWriteWorkqueue    bool

	// ReadOnly loads the table read-only (DM_READONLY_FLAG); it is not part
	// of the table line. A read-only Device needs a read-only table.
	ReadOnly bool
}

func (t *CryptTable) cipher() string {
	if t.Cipher == "" {
		return DefaultCipher
	}
	return t.Cipher
}

func (t *CryptTable) sectorSize() int {
	if t.SectorSize == 0 {
		return 512
	}
	return t.SectorSize
}

// options returns the optional parameters in the order dm-crypt's status
// prints them (crypt_status in drivers/md/dm-crypt.c), so a table reads
// back exactly as it was loaded.
func (t *CryptTable) options() []string {
	var opts []string
	for _, o := range []struct {
		on   bool
		name string
	}{
		{t.AllowDiscards, "allow_discards"},
		{t.SameCPUCrypt, "same_cpu_crypt"},
		{t.HighPriority, "high_priority"},
		{t.SubmitFromCryptCPUs, "submit_from_crypt_cpus"},
		{t.NoReadWorkqueue, "no_read_workqueue"},
		{t.NoWriteWorkqueue, "no_write_workqueue"},
	} {
		if o.on {
			opts = append(opts, o.name)
		}
	}
	if ss := t.sectorSize(); ss != 512 {
		opts = append(opts, "sector_size:"+strconv.Itoa(ss))
		if t.IVLargeSectors {
			opts = append(opts, "iv_large_sectors")
		}
	}
	return opts
}

// Validate checks the table for mistakes the kernel would reject with no
// more than "Invalid argument", and a few it would accept.
func (t *CryptTable) Validate() error {
	if err := checkWord("cipher", t.cipher()); err != nil {
		return err
	}
	if strings.HasPrefix(t.cipher(), "aes-xts-") && len(t.Key) != 32 && len(t.Key) != 64 {
		return fmt.Errorf("devmapper: %s key must be 32 or 64 bytes, not %d", t.cipher(), len(t.Key))
	}
	if len(t.Key) == 0 {
		return errors.New("devmapper: crypt table without a key")
	}
	if err := checkWord("device", t.Device); err != nil {
		return err
	}
	ss := t.sectorSize()
	switch ss {
	case 512, 1024, 2048, 4096:
	default:
		return fmt.Errorf("devmapper: invalid sector size %d (want 512, 1024, 2048 or 4096)", t.SectorSize)
	}
	unit := uint64(ss / 512)
	if t.Length == 0 || t.Length%unit != 0 {
		return fmt.Errorf("devmapper: length %d sectors is not a positive multiple of the %d-byte sector size", t.Length, ss)
	}
	if t.IVOffset%unit != 0 {
		return fmt.Errorf("devmapper: iv offset %d is not a multiple of the %d-byte sector size (in 512-byte units)", t.IVOffset, ss)
	}
	// The kernel checks that the data start is aligned to the mapping's
	// logical block size, which dm-crypt sets to the sector size.
	if t.Offset%unit != 0 {
		return fmt.Errorf("devmapper: offset %d is not a multiple of the %d-byte sector size (in 512-byte units)", t.Offset, ss)
	}
	if t.Offset+t.Length < t.Offset {
		return fmt.Errorf("devmapper: offset %d + length %d overflows", t.Offset, t.Length)
	}
	return nil
}

// checkWord rejects empty values and ones that would split or end the table
// line.
func checkWord(what, s string) error {
	if s == "" {
		return fmt.Errorf("devmapper: empty %s", what)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f {
			return fmt.Errorf("devmapper: %s %q contains a space or a control character", what, s)
		}
	}
	return nil
}

// paramsLen is the exact length of the parameter string appendParams writes.
func (t *CryptTable) paramsLen() int {
	n := len(t.cipher()) + 1 + 2*len(t.Key) + 1 + decimalLen(t.IVOffset) + 1 + len(t.Device) + 1 + decimalLen(t.Offset)
	if opts := t.options(); len(opts) > 0 {
		n += 1 + decimalLen(uint64(len(opts)))
		for _, o := range opts {
			n += 1 + len(o)
		}
	}
	return n
}

func decimalLen(v uint64) int {
	n := 1
	for ; v >= 10; v /= 10 {
		n++
	}
	return n
}

// appendParams appends "CIPHER KEYHEX IV_OFFSET DEVICE OFFSET [N OPTS...]"
// to dst. The table must be valid.
func (t *CryptTable) appendParams(dst []byte, maskKey bool) []byte {
	const hexDigits = "0123456789abcdef"
	dst = append(dst, t.cipher()...)
	dst = append(dst, ' ')
	for _, b := range t.Key {
		if maskKey {
			dst = append(dst, '0', '0')
		} else {
			dst = append(dst, hexDigits[b>>4], hexDigits[b&15])
		}
	}
	dst = append(dst, ' ')
	dst = strconv.AppendUint(dst, t.IVOffset, 10)
	dst = append(dst, ' ')
	dst = append(dst, t.Device...)
	dst = append(dst, ' ')
	dst = strconv.AppendUint(dst, t.Offset, 10)
	if opts := t.options(); len(opts) > 0 {
		dst = append(dst, ' ')
		dst = strconv.AppendInt(dst, int64(len(opts)), 10)
		for _, o := range opts {
			dst = append(dst, ' ')
			dst = append(dst, o...)
		}
	}
	return dst
}

// AppendLine validates the table and appends the whole table line, as
// dmsetup reads it: "0 LENGTH crypt " and the parameters. The result holds
// the key: wipe it after use. If dst lacks the capacity, the result is a
// new exactly sized slice, so no partial copy of the key is left behind in
// memory that append would have abandoned.
func (t *CryptTable) AppendLine(dst []byte) ([]byte, error) {
	if err := t.Validate(); err != nil {
		return dst, err
	}
	prefix := t.linePrefix()
	dst = reserve(dst, len(prefix)+t.paramsLen())
	return t.appendParams(append(dst, prefix...), false), nil
}

func (t *CryptTable) linePrefix() string {
	return "0 " + strconv.FormatUint(t.Length, 10) + " crypt "
}

func reserve(dst []byte, n int) []byte {
	if cap(dst)-len(dst) >= n {
		return dst
	}
	grown := make([]byte, len(dst), len(dst)+n)
	copy(grown, dst)
	return grown
}

// KeyPlaceholder stands for the key in a table line printed without it
// (Template). It is not hex, so the line cannot be loaded by mistake.
const KeyPlaceholder = "<master-key>"

// Template returns the table line with KeyPlaceholder in place of the key
// (which may be unset), for showing what the table will be.
func (t CryptTable) Template() string {
	t.Key = nil
	line := string(t.appendParams([]byte(t.linePrefix()), false))
	c := t.cipher()
	return line[:len(t.linePrefix())+len(c)+1] + KeyPlaceholder + line[len(t.linePrefix())+len(c)+1:]
}

// String returns the table line with every key digit replaced by 0, as
// dmsetup shows tables, so that printing a table never prints its key.
func (t CryptTable) String() string {
	return t.linePrefix() + string(t.appendParams(nil, true))
}

// GoString is String: %#v must not print the key either.
func (t CryptTable) GoString() string { return t.String() }

// ParamsLen is the length of the target's parameters (AppendParams).
func (t *CryptTable) ParamsLen() int { return t.paramsLen() }

// AppendParams appends the crypt target's parameters, key and all, as
// DM_TABLE_LOAD takes them; the caller wipes what holds the key.
func (t *CryptTable) AppendParams(dst []byte) []byte { return t.appendParams(dst, false) }

// CryptInfo is a crypt target's table line as the kernel reports it, without
// the key.
type CryptInfo struct {
	Cipher string
	// KeySize is the key length in bytes (0 for a key held in the kernel
	// keyring, whose size is in KeyRef).
	KeySize int
	// KeyRef is the kernel keyring reference (":SIZE:TYPE:DESCRIPTION")
	// when the key lives there, else "".
	KeyRef         string
	IVOffset       uint64
	Device         string // as the kernel prints it: "major:minor"
	Offset         uint64
	SectorSize     int
	IVLargeSectors bool
	AllowDiscards  bool
	// Options holds every optional parameter, verbatim.
	Options []string
}

// ParseCrypt parses the parameters of a crypt target's table line (from
// Table, whose keys are masked).
func ParseCrypt(params string) (*CryptInfo, error) {
	f := strings.Fields(params)
	if len(f) < 5 {
		return nil, fmt.Errorf("devmapper: crypt table %q: want at least 5 fields", params)
	}
	c := &CryptInfo{Cipher: f[0], Device: f[3], SectorSize: 512}
	switch key := f[1]; {
	case key == "-":
	case strings.HasPrefix(key, ":"):
		c.KeyRef = key
	case len(key)%2 == 0 && isHex(key):
		c.KeySize = len(key) / 2
	default:
		return nil, fmt.Errorf("devmapper: crypt table: malformed key field of %d characters", len(key))
	}
	var err error
	if c.IVOffset, err = strconv.ParseUint(f[2], 10, 64); err != nil {
		return nil, fmt.Errorf("devmapper: crypt table iv offset: %w", err)
	}
	if c.Offset, err = strconv.ParseUint(f[4], 10, 64); err != nil {
		return nil, fmt.Errorf("devmapper: crypt table offset: %w", err)
	}
	if len(f) == 5 {
		return c, nil
	}
	n, err := strconv.Atoi(f[5])
	if err != nil || n != len(f)-6 {
		return nil, fmt.Errorf("devmapper: crypt table %q: option count %q does not match %d options", params, f[5], len(f)-6)
	}
	c.Options = f[6:]
	for _, o := range c.Options {
		switch {
		case o == "iv_large_sectors":
			c.IVLargeSectors = true
		case o == "allow_discards":
			c.AllowDiscards = true
		case strings.HasPrefix(o, "sector_size:"):
			if c.SectorSize, err = strconv.Atoi(o[len("sector_size:"):]); err != nil {
				return nil, fmt.Errorf("devmapper: crypt table option %q: %w", o, err)
			}
		}
	}
	return c, nil
}

func isHex[T string | []byte](s T) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// MaskCryptKey overwrites the hex digits of the key field (the second word)
// of a crypt target's parameters with '0', in place, before the parameters
// become a Go string that could not be wiped.
func MaskCryptKey(params []byte) {
	i := 0
	for i < len(params) && params[i] != ' ' { // cipher
		i++
	}
	for i < len(params) && params[i] == ' ' {
		i++
	}
	start := i
	for i < len(params) && params[i] != ' ' {
		i++
	}
	key := params[start:i]
	if !isHex(key) { // "-" or a keyring reference: not secret
		return
	}
	for j := range key {
		key[j] = '0'
	}
}

// SetOption turns on the optional parameter name of a crypt target
// (dm-crypt's spelling: "allow_discards", "same_cpu_crypt",
// "submit_from_crypt_cpus", "no_read_workqueue", "no_write_workqueue",
// "high_priority"); it reports false for a name it does not know.
func (t *CryptTable) SetOption(name string) bool {
	switch name {
	case "allow_discards":
		t.AllowDiscards = true
	case "same_cpu_crypt":
		t.SameCPUCrypt = true
	case "submit_from_crypt_cpus":
		t.SubmitFromCryptCPUs = true
	case "no_read_workqueue":
		t.NoReadWorkqueue = true
	case "no_write_workqueue":
		t.NoWriteWorkqueue = true
	case "high_priority":
		t.HighPriority = true
	default:
		return false
	}
	return true
}
