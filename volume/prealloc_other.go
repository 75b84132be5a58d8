//go:build !linux

package volume

// preallocate is a Linux optimisation; elsewhere the file grows as written.
func preallocate(Device, int64) bool { return false }
