//go:build !linux

package blockdev

import (
	"fmt"
	"os"
)

func fdatasync(f *os.File) error {
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync image: %w", err)
	}
	return nil
}
