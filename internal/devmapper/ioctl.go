package devmapper

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// The device-mapper ioctl ABI, from the kernel's include/uapi/linux/dm-ioctl.h.
// Every command passes one buffer: a struct dm_ioctl header, then a payload
// (table targets on the way in, target status or table lines on the way out).
// We marshal it by hand, field by field, so no Go struct layout is assumed.

// Sizes of the uapi structures and their fixed strings (the string lengths
// count the terminating NUL).
const (
	ioctlHeaderSize = 312 // sizeof(struct dm_ioctl)
	targetSpecSize  = 40  // sizeof(struct dm_target_spec)
	nameLen         = 128 // DM_NAME_LEN
	uuidLen         = 129 // DM_UUID_LEN
	targetTypeLen   = 16  // DM_MAX_TYPE_NAME
)

// Byte offsets of the fields of struct dm_ioctl.
const (
	offVersion     = 0  // __u32 version[3]: interface version in, kernel's out
	offDataSize    = 12 // __u32 data_size: whole buffer, header included
	offDataStart   = 16 // __u32 data_start: payload offset from the header start
	offTargetCount = 20 // __u32 target_count
	offOpenCount   = 24 // __s32 open_count
	offFlags       = 28 // __u32 flags
	offEventNr     = 32 // __u32 event_nr: event number, or udev cookie in
	offPadding     = 36 // __u32 padding
	offDev         = 40 // __u64 dev: huge_encode_dev() of the block device
	offName        = 48 // char name[DM_NAME_LEN]
	offUUID        = 176
	offData        = 305 // char data[7]: pads the header to 312 bytes
)

// Byte offsets of the fields of struct dm_target_spec.
const (
	offSpecStart  = 0  // __u64 sector_start
	offSpecLength = 8  // __u64 length
	offSpecStatus = 16 // __s32 status
	offSpecNext   = 20 // __u32 next
	offSpecType   = 24 // char target_type[DM_MAX_TYPE_NAME]
)

// Command numbers (the nr of _IOWR(DM_IOCTL, nr, struct dm_ioctl)).
const (
	cmdVersion     = 0
	cmdDevCreate   = 3
	cmdDevRemove   = 4
	cmdDevSuspend  = 6
	cmdDevStatus   = 7
	cmdTableLoad   = 9
	cmdTableStatus = 12
)

// Flags in dm_ioctl.flags.
const (
	flagReadOnly        = 1 << 0  // in/out: table and device read-only
	flagSuspend         = 1 << 1  // in/out: suspend rather than resume; device is suspended
	flagStatusTable     = 1 << 4  // in: DM_TABLE_STATUS returns table lines, not status
	flagActivePresent   = 1 << 5  // out: a live table is loaded
	flagInactivePresent = 1 << 6  // out: a table waits to be activated by resume
	flagBufferFull      = 1 << 8  // out: the payload did not fit; retry bigger
	flagSecureData      = 1 << 15 // in: the kernel wipes its copies of the buffer
	flagDeferredRemove  = 1 << 17 // in/out: removal waits for the last close
)

// udev cookie flags (libdevmapper's DM_UDEV_*), passed in the high 16 bits of
// event_nr to DM_DEV_SUSPEND (resume) and DM_DEV_REMOVE. The kernel only
// forwards the value to udev as DM_COOKIE. The low 16 bits would name a
// semaphore for udev to signal; we leave them 0 and never wait for udev.
const (
	udevDisableDMRules        = 0x0001 // 10-dm.rules: no /dev/mapper link
	udevDisableSubsystemRules = 0x0002 // LVM and other subsystem rules
	udevDisableDiskRules      = 0x0004 // 13-dm-disk.rules: no blkid, no /dev/disk/by-*
	udevDisableOtherRules     = 0x0008 // everything else: no auto-mount, SYSTEMD_READY=0
	udevFlagsShift            = 16

	// udevCookie makes udev leave the device alone: we create and remove
	// its /dev/mapper node ourselves, so there is nothing to wait for, and
	// no probing or auto-mounting races with the caller's own use of it.
	udevCookie = (udevDisableDMRules | udevDisableSubsystemRules |
		udevDisableDiskRules | udevDisableOtherRules) << udevFlagsShift
)

// interfaceVersion is the ioctl interface version we speak. The kernel
// accepts any request with the same major and a minor not above its own;
// 4.0.0 uses nothing newer than the first version-4 kernels had.
var interfaceVersion = [3]uint32{4, 0, 0}

// ioctlNumber returns _IOWR(DM_IOCTL, nr, struct dm_ioctl), DM_IOCTL = 0xfd.
// _IOWR puts read|write in the top bits, the argument size below them, then
// the type and the number. The generic encoding (dir << 30, size << 16) and
// the one of mips, powerpc and sparc (dir 6 << 29, 13-bit size) give the same
// bits for a read-write command, so this holds on every Linux architecture.
func ioctlNumber(nr uint8) uint32 {
	const readWrite = 3 << 30
	return readWrite | ioctlHeaderSize<<16 | 0xfd<<8 | uint32(nr)
}

// header is struct dm_ioctl without its padding.
type header struct {
	version     [3]uint32
	dataSize    uint32
	dataStart   uint32
	targetCount uint32
	openCount   int32
	flags       uint32
	eventNr     uint32
	dev         uint64
	name        string
	uuid        string
}

// newRequest returns a zeroed buffer of ioctlHeaderSize+payload bytes that
// starts with h, completed with our interface version, the buffer size and
// the payload offset.
func newRequest(h header, payload int) []byte {
	b := make([]byte, ioctlHeaderSize+payload)
	h.version = interfaceVersion
	h.dataSize = uint32(len(b))
	h.dataStart = ioctlHeaderSize
	h.put(b)
	return b
}

// put writes h into b[:ioctlHeaderSize]. The names must already be valid.
func (h *header) put(b []byte) {
	ne := binary.NativeEndian
	for i, v := range h.version {
		ne.PutUint32(b[offVersion+4*i:], v)
	}
	ne.PutUint32(b[offDataSize:], h.dataSize)
	ne.PutUint32(b[offDataStart:], h.dataStart)
	ne.PutUint32(b[offTargetCount:], h.targetCount)
	ne.PutUint32(b[offOpenCount:], uint32(h.openCount))
	ne.PutUint32(b[offFlags:], h.flags)
	ne.PutUint32(b[offEventNr:], h.eventNr)
	ne.PutUint32(b[offPadding:], 0)
	ne.PutUint64(b[offDev:], h.dev)
	putCString(b[offName:offName+nameLen], h.name)
	putCString(b[offUUID:offUUID+uuidLen], h.uuid)
	clear(b[offData:ioctlHeaderSize])
}

// putCString writes s NUL-padded into field, which must be longer than s.
func putCString(field []byte, s string) {
	if len(s) >= len(field) {
		panic("devmapper: string too long for its ioctl field")
	}
	clear(field[copy(field, s):])
}

var errMalformed = errors.New("malformed device-mapper reply")

// parseHeader reads the header the kernel wrote back into b.
func parseHeader(b []byte) (header, error) {
	if len(b) < ioctlHeaderSize {
		return header{}, fmt.Errorf("%w: %d bytes, shorter than the %d-byte header", errMalformed, len(b), ioctlHeaderSize)
	}
	ne := binary.NativeEndian
	var h header
	for i := range h.version {
		h.version[i] = ne.Uint32(b[offVersion+4*i:])
	}
	h.dataSize = ne.Uint32(b[offDataSize:])
	h.dataStart = ne.Uint32(b[offDataStart:])
	h.targetCount = ne.Uint32(b[offTargetCount:])
	h.openCount = int32(ne.Uint32(b[offOpenCount:]))
	h.flags = ne.Uint32(b[offFlags:])
	h.eventNr = ne.Uint32(b[offEventNr:])
	h.dev = ne.Uint64(b[offDev:])
	var err error
	if h.name, err = cString(b[offName : offName+nameLen]); err != nil {
		return header{}, fmt.Errorf("%w: device name: %w", errMalformed, err)
	}
	if h.uuid, err = cString(b[offUUID : offUUID+uuidLen]); err != nil {
		return header{}, fmt.Errorf("%w: device uuid: %w", errMalformed, err)
	}
	return h, nil
}

func cString(field []byte) (string, error) {
	n := bytes.IndexByte(field, 0)
	if n < 0 {
		return "", errors.New("no terminating NUL")
	}
	return string(field[:n]), nil
}

// decodeDev splits the kernel's huge_encode_dev() value: minor bits 0-7,
// major bits 8-19, minor bits 8-19 at bits 20-31.
func decodeDev(dev uint64) (major, minor uint32) {
	major = uint32(dev&0xfff00) >> 8
	minor = uint32(dev&0xff) | uint32(dev>>12)&0xfff00
	return major, minor
}

// A loadTarget is one line of a table to load. Its parameters are written
// by appendParams straight into the ioctl buffer, so secret parameters (a
// crypt key) never exist anywhere but there.
type loadTarget struct {
	start, length uint64
	typ           string
	paramsLen     int
	appendParams  func(dst []byte) []byte
}

func align8(n int) int { return (n + 7) &^ 7 }

// specSize is the space one target takes in a DM_TABLE_LOAD payload: the
// spec, the NUL-terminated parameters, padding to keep the next spec 8-byte
// aligned.
func (t *loadTarget) specSize() int { return align8(targetSpecSize + t.paramsLen + 1) }

// newTableLoad returns the DM_TABLE_LOAD request with header h and the
// targets. The caller must wipe it after use: it holds the parameters.
func newTableLoad(h header, targets []loadTarget) []byte {
	payload := 0
	for i := range targets {
		if len(targets[i].typ) >= targetTypeLen {
			panic("devmapper: target type name too long")
		}
		payload += targets[i].specSize()
	}
	h.targetCount = uint32(len(targets))
	b := newRequest(h, payload)
	pos := ioctlHeaderSize
	for i := range targets {
		t := &targets[i]
		spec := b[pos:]
		binary.NativeEndian.PutUint64(spec[offSpecStart:], t.start)
		binary.NativeEndian.PutUint64(spec[offSpecLength:], t.length)
		// next is relative to this spec when loading (and to the first
		// spec in replies).
		binary.NativeEndian.PutUint32(spec[offSpecNext:], uint32(t.specSize()))
		putCString(spec[offSpecType:offSpecType+targetTypeLen], t.typ)
		params := spec[targetSpecSize : targetSpecSize : targetSpecSize+t.paramsLen]
		if got := t.appendParams(params); len(got) != t.paramsLen || (len(got) > 0 && &got[0] != &spec[targetSpecSize]) {
			panic("devmapper: target parameters do not match their computed length")
		}
		pos += t.specSize()
	}
	return b
}

// A rawTarget is one target of a DM_TABLE_STATUS reply. params aliases the
// reply buffer.
type rawTarget struct {
	start, length uint64
	status        int32
	typ           string
	params        []byte
}

// parseTargets reads the h.targetCount targets of a DM_TABLE_STATUS reply in
// b. In replies, each spec's next is the offset of the following spec from
// the first one, which sits at data_start; data_size ends the used part.
func parseTargets(b []byte, h header) ([]rawTarget, error) {
	if h.targetCount == 0 {
		return nil, nil
	}
	end := int(h.dataSize)
	if end > len(b) || int(h.dataStart) < ioctlHeaderSize || int(h.dataStart) > end {
		return nil, fmt.Errorf("%w: payload %d..%d outside the %d-byte buffer", errMalformed, h.dataStart, h.dataSize, len(b))
	}
	// Each target takes at least a spec and a NUL, which bounds the count
	// before we allocate for it.
	if uint64(h.targetCount) > uint64(end-int(h.dataStart))/(targetSpecSize+1) {
		return nil, fmt.Errorf("%w: %d targets cannot fit in %d bytes", errMalformed, h.targetCount, end-int(h.dataStart))
	}
	targets := make([]rawTarget, 0, h.targetCount)
	pos := int(h.dataStart)
	for i := range int(h.targetCount) {
		if pos+targetSpecSize > end {
			return nil, fmt.Errorf("%w: target %d spec at %d runs past %d", errMalformed, i, pos, end)
		}
		spec := b[pos:]
		ne := binary.NativeEndian
		t := rawTarget{
			start:  ne.Uint64(spec[offSpecStart:]),
			length: ne.Uint64(spec[offSpecLength:]),
			status: int32(ne.Uint32(spec[offSpecStatus:])),
		}
		var err error
		if t.typ, err = cString(spec[offSpecType : offSpecType+targetTypeLen]); err != nil {
			return nil, fmt.Errorf("%w: target %d type: %w", errMalformed, i, err)
		}
		paramStart := pos + targetSpecSize
		n := bytes.IndexByte(b[paramStart:end], 0)
		if n < 0 {
			return nil, fmt.Errorf("%w: target %d parameters have no terminating NUL", errMalformed, i)
		}
		t.params = b[paramStart : paramStart+n : paramStart+n]
		targets = append(targets, t)

		if i+1 == int(h.targetCount) {
			break
		}
		next := uint64(h.dataStart) + uint64(ne.Uint32(spec[offSpecNext:]))
		if next < uint64(paramStart+n+1) || next > uint64(end) {
			return nil, fmt.Errorf("%w: target %d: next spec at %d, not after its parameters and before %d", errMalformed, i, next, end)
		}
		pos = int(next)
	}
	return targets, nil
}
