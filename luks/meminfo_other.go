//go:build !linux

package luks

// availableMemoryKiB is unknown outside Linux: the limits keep their defaults.
func availableMemoryKiB() uint64 { return 0 }
