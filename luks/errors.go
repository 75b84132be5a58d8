package luks

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrNotLUKS is returned for an image with no LUKS header at all: neither
// magic at byte 0 nor a LUKS2 secondary header at any offset the format
// allows.
var ErrNotLUKS = errors.New("no LUKS header")

// ErrWrongPassphrase is returned when no keyslot tried opens with the
// passphrase.
var ErrWrongPassphrase = errors.New("no keyslot opens with this passphrase")

// ErrUnsupported matches every *UnsupportedError with errors.Is.
var ErrUnsupported = errors.New("unsupported LUKS feature")

// Feature names what an UnsupportedError refuses. FeatureAF and
// FeatureKeyslotArea are no longer returned: cryptsetup refuses a luks2
// keyslot with another AF or area type on load (a damaged header, here
// too) and ignores the AF stripe count.
type Feature string

const (
	FeatureVersion      Feature = "LUKS version"
	FeatureCipher       Feature = "cipher"
	FeatureKeySize      Feature = "key size"
	FeatureIntegrity    Feature = "integrity protection (dm-integrity segment)"
	FeatureReencryption Feature = "reencryption in progress"
	FeatureRequirement  Feature = "mandatory requirement"
	FeatureOPAL         Feature = "OPAL hardware encryption"
	FeatureSegments     Feature = "data segments"
	FeatureSegmentType  Feature = "segment type"
	FeatureSegmentFlag  Feature = "segment flag"
	FeatureKeyslotType  Feature = "keyslot type"
	FeatureAF           Feature = "anti-forensic splitter"
	FeatureKDF          Feature = "key derivation function"
	FeatureHash         Feature = "hash"
	FeatureDigest       Feature = "digest type"
	FeatureKeyslotArea  Feature = "keyslot area"
	FeatureIVRange      Feature = "plain IV range"
	FeatureChecksum     Feature = "header checksum algorithm"
	FeatureSectorSize   Feature = "sector size"
	FeatureUnboundKey   Feature = "unbound key"       // a keyslot whose key opens no data segment
	FeatureNames        Feature = "non-canonical IDs" // names like "01" that cryptsetup numbers but never finds (writing)
)

// UnsupportedError says that the image uses something this package does
// not implement: the header is sound (it is not damaged), but asks for
// something this package cannot do. Nothing is written or decrypted when it
// is returned.
type UnsupportedError struct {
	Feature Feature
	Value   string // what the header asks for, e.g. "serpent-xts-plain64"
	Keyslot int    // the keyslot concerned, or -1
	Hint    string // what is supported instead, if useful
	// CryptsetupOpens says that cryptsetup (2.6, with device-mapper and
	// the kernel modules the header names) opens what this package
	// refuses: another cipher, dm-integrity, a reencryption in progress, a
	// hash only its crypto backend has. It is false where cryptsetup
	// refuses too (an unknown requirement or keyslot type, an unbound key,
	// an unknown KDF), so that pointing the user to cryptsetup is right
	// only when it is set.
	CryptsetupOpens bool
}

func (e *UnsupportedError) Error() string {
	s := "unsupported " + string(e.Feature)
	if e.Value != "" {
		s += " " + e.Value
	}
	if e.Keyslot >= 0 {
		s = fmt.Sprintf("keyslot %d: %s", e.Keyslot, s)
	}
	if e.Hint != "" {
		s += " (" + e.Hint + ")"
	}
	return s
}

func (e *UnsupportedError) Is(target error) bool { return target == ErrUnsupported }

func unsupported(f Feature, value, hint string) *UnsupportedError {
	return &UnsupportedError{Feature: f, Value: value, Keyslot: -1, Hint: hint}
}

func unsupportedSlot(slot int, f Feature, value, hint string) *UnsupportedError {
	return &UnsupportedError{Feature: f, Value: value, Keyslot: slot, Hint: hint}
}

// ErrCorrupt matches every *CorruptError with errors.Is.
var ErrCorrupt = errors.New("corrupt LUKS header")

// CorruptError is a header that is damaged or malformed: a checksum that
// does not match, a field out of range, an area outside the device.
type CorruptError struct {
	Where  string // "primary header", "LUKS2 metadata", "keyslot 3", ...
	Reason string
	cause  error
}

func (e *CorruptError) Error() string { return e.Where + ": " + e.Reason }

func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

func (e *CorruptError) Unwrap() error { return e.cause }

// errNoMagic marks a header copy that is simply not there (no magic),
// as opposed to one that is there but damaged.
var errNoMagic = errors.New("no magic")

func corrupt(where, format string, a ...any) *CorruptError {
	return &CorruptError{Where: where, Reason: fmt.Sprintf(format, a...)}
}

// ErrKDFCost matches every *KDFCostError with errors.Is.
var ErrKDFCost = errors.New("key derivation cost above the limit")

// KDFCostError refuses to run a key derivation whose cost, read from the
// image, is above the caller's Limits. The image decides these numbers, so
// without a bound anyone who can write it could make unlocking take hours
// or exhaust memory.
type KDFCostError struct {
	Keyslot int    // -1 for the volume key digest
	KDF     string // "argon2id", "pbkdf2-sha256", ...
	Cost    string // "memory", "time", "threads", "iterations", "work"
	Value   uint64
	Limit   uint64
	Spent   uint64 // of the limit, already spent on other keyslots in the same Unlock
	Unit    string // "KiB", "passes", ...
}

func (e *KDFCostError) Error() string {
	who := "digest"
	if e.Keyslot >= 0 {
		who = fmt.Sprintf("keyslot %d", e.Keyslot)
	}
	unit := ""
	if e.Unit != "" {
		unit = " " + e.Unit
	}
	s := fmt.Sprintf("%s: %s %s %d%s is above the limit of %d%s", who, e.KDF, e.Cost, e.Value, unit, e.Limit, unit)
	if e.Spent > 0 {
		s += fmt.Sprintf(" (%d%s of it spent on the keyslots tried before)", e.Spent, unit)
	}
	return s
}

func (e *KDFCostError) Is(target error) bool { return target == ErrKDFCost }

// ErrLastKeyslot refuses to remove the only keyslot left, which would make
// the volume impossible to unlock.
var ErrLastKeyslot = errors.New("refusing to remove the last keyslot")

// ErrHeaderChanged is returned by a write when the header on disk is no
// longer the one that was read (another program changed it meanwhile).
var ErrHeaderChanged = errors.New("the header on disk changed since it was read")

// ErrNoKeyslot is returned for a header without any keyslot: no
// passphrase opens it (its last keyslot was removed).
var ErrNoKeyslot = errors.New("the header has no keyslot: no passphrase opens it")

// KeyslotStateError refuses a keyslot asked for by ID: not in use where
// one in use is wanted (to unlock with, to remove), or in use where a free
// one is wanted (to add).
type KeyslotStateError struct {
	Keyslot int
	InUse   bool  // the keyslot is in use (and a free one was wanted)
	Used    []int // the keyslots in use
}

func (e *KeyslotStateError) Error() string {
	if e.InUse {
		return fmt.Sprintf("keyslot %d is in use", e.Keyslot)
	}
	return fmt.Sprintf("keyslot %d is not in use (keyslots in use: %s)", e.Keyslot, intList(e.Used))
}

// UnusableKeyslotsError says that the header has keyslots but none this
// package can use; Errs says why for each (*UnsupportedError,
// *CorruptError), and errors.Is sees them.
type UnusableKeyslotsError struct {
	Errs []error
}

func (e *UnusableKeyslotsError) Error() string {
	return "no keyslot this package can use: " + errors.Join(e.Errs...).Error()
}

func (e *UnusableKeyslotsError) Unwrap() []error { return e.Errs }

// ErrDataDevice matches every *DataDeviceError with errors.Is.
var ErrDataDevice = errors.New("the data device does not hold the data segment")

// DataDeviceError says that the data device (the image, or the data device
// of a detached header) does not hold the data segment the header
// describes: the device is wrong input, not the header damaged. The
// typical case is a header alone (a detached header or a header backup)
// given as the image: the segment is then empty.
type DataDeviceError struct {
	DeviceSize int64  // bytes of the data device
	Offset     uint64 // where the segment starts, bytes
	Size       uint64 // its bytes when not Dynamic
	Dynamic    bool   // the segment runs to the end of the device
	SectorSize int
	// Empty: the segment would hold no whole sector (a dynamic segment on
	// a device that ends before its first sector is complete).
	Empty bool
	// HeaderOnly: the device holds no more than the LUKS header itself
	// (both copies and the keyslots area, when the header is in the
	// image): most likely a detached header or a header backup, not an
	// image.
	HeaderOnly bool
}

func (e *DataDeviceError) Error() string {
	switch {
	case e.Empty:
		return fmt.Sprintf("data segment is empty: the %d-byte data device ends before a whole %d-byte sector after byte %d", e.DeviceSize, e.SectorSize, e.Offset)
	case e.Offset > uint64(max(e.DeviceSize, 0)):
		return fmt.Sprintf("data segment starts at byte %d, beyond the %d-byte data device", e.Offset, e.DeviceSize)
	}
	return fmt.Sprintf("data segment of %d bytes at byte %d runs past the end of the %d-byte data device", e.Size, e.Offset, e.DeviceSize)
}

func (e *DataDeviceError) Is(target error) bool { return target == ErrDataDevice }

// KeyslotStopError is an unlock that stopped at a keyslot it could not
// use, before trying the keyslots after it, as cryptsetup stops: a keyslot
// that is not simply of another type or for another segment (an unknown
// KDF or hash, a damaged salt or digest) ends the search, whatever the
// passphrase. Err says why (errors.Is and errors.As see it); picking
// another keyslot explicitly tries that one.
type KeyslotStopError struct {
	Keyslot int
	Err     error
	Untried []int // the keyslots that were not tried because of it
}

func (e *KeyslotStopError) Error() string {
	if len(e.Untried) == 0 {
		return e.Err.Error()
	}
	return fmt.Sprintf("%v (keyslots %s were not tried after it, as cryptsetup does not try them)", e.Err, intList(e.Untried))
}

func (e *KeyslotStopError) Unwrap() error { return e.Err }

// intList writes IDs for messages: "0, 3", or "none".
func intList(ids []int) string {
	if len(ids) == 0 {
		return "none"
	}
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.Itoa(id)
	}
	return strings.Join(s, ", ")
}
