//go:build !linux

package secret

import "errors"

// Protect is not implemented outside Linux.
func Protect() error { return errors.New("memory locking is only implemented on Linux") }

// Wipe overwrites b with zeros.
func Wipe(b []byte) { clear(b) }
