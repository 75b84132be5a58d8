//go:build !linux

package volume

// availableMemoryKiB is unknown outside Linux: calibration keeps its default.
func availableMemoryKiB() uint64 { return 0 }
