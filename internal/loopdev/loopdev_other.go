//go:build !linux

package loopdev

import (
	"io/fs"
	"os"
)

// Attach returns ErrUnsupported: loop devices exist only on Linux.
func Attach(file string, opts Options) (*Device, error) {
	if err := opts.check(); err != nil {
		return nil, err
	}
	return nil, ErrUnsupported
}

// AttachFile returns ErrUnsupported: loop devices exist only on Linux.
func AttachFile(backing *os.File, opts Options) (*Device, error) {
	if err := opts.check(); err != nil {
		return nil, err
	}
	return nil, ErrUnsupported
}

// Close does nothing: no Device is ever attached here.
func (d *Device) Close() error { return nil }

// Detach does nothing: no Device is ever attached here.
func (d *Device) Detach() error { return nil }

// BackedBy returns ErrUnsupported: loop devices exist only on Linux.
func BackedBy(file string) ([]string, error) { return nil, ErrUnsupported }

// BackedByFile returns ErrUnsupported: loop devices exist only on Linux.
func BackedByFile(fi fs.FileInfo) ([]string, error) { return nil, ErrUnsupported }

// DetachPath returns ErrUnsupported: loop devices exist only on Linux.
func DetachPath(path string) error { return ErrUnsupported }
