//go:build !linux

package devmapper

import (
	"fmt"
	"runtime"
)

var errNotLinux = fmt.Errorf("%w: device-mapper is a Linux kernel feature, this is %s", ErrUnavailable, runtime.GOOS)

// Available returns an error wrapping ErrUnavailable: device-mapper exists
// only on Linux.
func Available() error { return errNotLinux }

// Version returns an error wrapping ErrUnavailable.
func Version() (major, minor, patch uint32, err error) { return 0, 0, 0, errNotLinux }

// CreateCrypt returns an error wrapping ErrUnavailable.
func CreateCrypt(name string, t *CryptTable) (devPath string, err error) { return "", errNotLinux }

// Remove returns an error wrapping ErrUnavailable.
func Remove(name string) error { return errNotLinux }

// Status returns an error wrapping ErrUnavailable.
func Status(name string) (*DeviceStatus, error) { return nil, errNotLinux }

// Table returns an error wrapping ErrUnavailable.
func Table(name string) ([]Target, error) { return nil, errNotLinux }
