// Package devmapper drives the Linux kernel's device-mapper through its
// ioctl interface on /dev/mapper/control, without libdevmapper, cryptsetup
// or udev, to serve a volume's data area through the kernel's dm-crypt.
//
// CreateCrypt creates a device, loads a crypt table and activates it;
// Status and Table read it back; Remove takes it down. The key reaches the
// kernel hex-encoded in one ioctl buffer that is wiped right after the load
// (and DM_SECURE_DATA_FLAG makes the kernel wipe its copies), and tables
// read back have their keys masked before they become Go strings.
//
// Devices are created udev-free: the udev cookie carries only the
// DM_UDEV_DISABLE_* flags, so no udev rule acts on our devices and nothing
// waits for udev, and the /dev/mapper/NAME node is created and removed here
// with mknod from the device number the kernel returns. This works the same
// with udev running, with udev absent (containers, initramfs, test VMs) and
// with udev but without the device-mapper rules installed.
//
// On systems other than Linux every operation returns an error wrapping
// ErrUnavailable.
package devmapper

import (
	"errors"
	"fmt"
)

// Errors that callers may want to tell apart; returned errors wrap them.
var (
	// ErrUnavailable means device-mapper cannot be used here at all; the
	// wrapping error says what is missing.
	ErrUnavailable = errors.New("device-mapper is not available")
	// ErrNotFound means no device-mapper device has the name.
	ErrNotFound = errors.New("no such device-mapper device")
	// ErrExists means a device-mapper device with the name exists already.
	ErrExists = errors.New("device-mapper device already exists")
	// ErrBusy means the device is open (mounted, or held by a program).
	ErrBusy = errors.New("device-mapper device is in use")
)

// mapperDir is where device nodes are named after their device.
const mapperDir = "/dev/mapper"

// uuidPrefix starts the device-mapper UUID of every device this package
// creates; the rest is the device name. It marks our devices as ours.
const uuidPrefix = "XTSCTL-"

// maxNameLen is the longest device name: the kernel's 127 bytes, less what
// the UUID needs for uuidPrefix.
const maxNameLen = uuidLen - 1 - len(uuidPrefix)

// CheckName reports whether name can name a device: 1 to maxNameLen bytes
// of letters, digits and "#+-.:=@_" (the characters libdevmapper uses
// without mangling), not "." or "..", and not "control", which
// /dev/mapper/control already is.
func CheckName(name string) error {
	if name == "" || len(name) > maxNameLen {
		return fmt.Errorf("devmapper: device name must be 1 to %d bytes long, not %d", maxNameLen, len(name))
	}
	if name == "." || name == ".." || name == "control" {
		return fmt.Errorf("devmapper: %q cannot name a device", name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' {
			continue
		}
		switch c {
		case '#', '+', '-', '.', ':', '=', '@', '_':
			continue
		}
		return fmt.Errorf("devmapper: device name %q: character %q not allowed (use letters, digits and #+-.:=@_)", name, c)
	}
	return nil
}

// Info is what DM_DEV_STATUS tells about a device.
type Info struct {
	Name string
	UUID string
	// Major and Minor are the block device's number.
	Major, Minor uint32
	// OpenCount is how many times the block device is open (a mounted
	// file system counts once).
	OpenCount int
	// EventNr counts the device's events (table swaps, target events).
	EventNr uint32
	// TargetCount is the number of targets in the live table.
	TargetCount int
	Suspended   bool
	ReadOnly    bool
	// LiveTable and InactiveTable report whether a table is active, and
	// whether one is loaded and waiting for a resume.
	LiveTable      bool
	InactiveTable  bool
	DeferredRemove bool
}

// Ours reports whether this package created the device.
func (i *Info) Ours() bool {
	return len(i.UUID) > len(uuidPrefix) && i.UUID[:len(uuidPrefix)] == uuidPrefix
}

// A Target is one line of a device's table: Length 512-byte sectors at
// sector Start handled by target Type. Params is the target's status (from
// Status) or its table parameters (from Table).
type Target struct {
	Start  uint64
	Length uint64
	Type   string
	Params string
}

// DeviceStatus is a device's Info and the status of each target of its live
// table. (dm-crypt reports an empty status; see Table for its parameters.)
type DeviceStatus struct {
	Info
	Targets []Target
}

// DevPath returns the device node path of the device named name.
func DevPath(name string) string { return mapperDir + "/" + name }

func infoFromHeader(h header) Info {
	major, minor := decodeDev(h.dev)
	return Info{
		Name:           h.name,
		UUID:           h.uuid,
		Major:          major,
		Minor:          minor,
		OpenCount:      int(h.openCount),
		EventNr:        h.eventNr,
		TargetCount:    int(h.targetCount),
		Suspended:      h.flags&flagSuspend != 0,
		ReadOnly:       h.flags&flagReadOnly != 0,
		LiveTable:      h.flags&flagActivePresent != 0,
		InactiveTable:  h.flags&flagInactivePresent != 0,
		DeferredRemove: h.flags&flagDeferredRemove != 0,
	}
}
