//go:build !linux

// Package sysmem reports the memory the machine can spare, for the
// Argon2id limits of volume and luks: a key slot asking for more than that
// is refused before it runs.
package sysmem

// AvailableKiB is unknown outside Linux (0): callers keep their defaults.
func AvailableKiB() uint64 { return 0 }
