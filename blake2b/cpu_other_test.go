//go:build !amd64 || !gc || purego

package blake2b

import "testing"

// cpuSupports reports whether implementation i can run here: without
// assembly, only generic.
func cpuSupports(_ *testing.T, i implID, lanes bool) bool { return i == implGeneric }
