// Package loopdev attaches a regular file to a Linux loop block device and
// detaches it again.
//
// A device is configured in one atomic LOOP_CONFIGURE call with
// LO_FLAGS_AUTOCLEAR set, so the kernel detaches it by itself once the last
// user lets go: after Close, a loop device that a device-mapper table or a
// mount still holds stays attached exactly as long as they hold it, and one
// that nothing holds disappears at once. Nothing is left behind when a
// program dies between Attach and its cleanup.
//
// On systems other than Linux, Attach returns ErrUnsupported.
package loopdev

import (
	"errors"
	"fmt"
	"os"
)

// ErrUnsupported is returned by Attach on systems without loop devices.
var ErrUnsupported = errors.New("loop devices are only supported on Linux")

// Options tune how the file is attached. The zero value attaches the whole
// file read-write with 512-byte logical blocks.
type Options struct {
	// ReadOnly opens the file read-only and makes the block device
	// read-only (LO_FLAGS_READ_ONLY).
	ReadOnly bool

	// Offset is where the device starts in the file, in bytes.
	Offset uint64

	// SizeLimit caps the device size in bytes; 0 means up to the end of
	// the file.
	SizeLimit uint64

	// DirectIO makes the loop driver read and write the file with
	// O_DIRECT (LO_FLAGS_DIRECT_IO), so its data is not cached twice: once
	// for the file and once for the block device. The file system under
	// the file must support it.
	DirectIO bool

	// BlockSize is the device's logical block size: 0 (512), 512, 1024,
	// 2048 or 4096.
	BlockSize uint32
}

// A Device is an attached loop device. Its open handle is what keeps an
// auto-clearing device attached while nothing else uses it.
type Device struct {
	// Path is the device node, e.g. /dev/loop3.
	Path string
	// Number is the loop device number, the N in /dev/loopN.
	Number int
	// Major and Minor are the block device number; "Major:Minor" names
	// the device in a device-mapper table.
	Major, Minor uint32

	f    *os.File
	mode int // how f was opened: O_RDONLY or O_RDWR
}

func (o *Options) check() error {
	switch o.BlockSize {
	case 0, 512, 1024, 2048, 4096:
	default:
		return fmt.Errorf("loopdev: invalid block size %d (want 512, 1024, 2048 or 4096)", o.BlockSize)
	}
	return nil
}
