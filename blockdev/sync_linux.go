//go:build linux

package blockdev

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// fdatasync flushes f's data and the metadata needed to read it back; the
// image never changes size, so that is all a write needs.
func fdatasync(f *os.File) error {
	if err := unix.Fdatasync(int(f.Fd())); err != nil {
		return fmt.Errorf("sync image: %w", err)
	}
	return nil
}
