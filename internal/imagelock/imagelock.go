// Package imagelock is the one way every xtsctl process opens and locks an
// image: exclusively to write, shared to read (flock, which a loop device
// holding the file keeps for as long as it is attached). So an image is
// never written by two processes, nor its header rewritten while it is
// served.
package imagelock

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// ErrInUse: another process holds a conflicting lock on the image.
var ErrInUse = errors.New("the image is in use by another process (open, or being changed)")

// Open opens the image (a file or block device) at path and locks it:
// exclusively unless readOnly, shared otherwise. It returns ErrInUse when
// another process holds a conflicting lock. flag adds open flags
// (O_DIRECT).
func Open(path string, readOnly bool, flag int) (*os.File, error) {
	mode := os.O_RDWR
	if readOnly {
		mode = os.O_RDONLY
	}
	f, err := os.OpenFile(path, mode|flag, 0)
	if err != nil {
		return nil, err
	}
	if err := Lock(f, readOnly); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// Lock locks an open image as Open does.
func Lock(f *os.File, readOnly bool) error {
	lock := unix.LOCK_EX
	if readOnly {
		lock = unix.LOCK_SH
	}
	if err := unix.Flock(int(f.Fd()), lock|unix.LOCK_NB); err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) {
			return ErrInUse
		}
		return fmt.Errorf("cannot lock %s: %w", f.Name(), err)
	}
	return nil
}
