//go:build amd64 && gc && !purego

package blake2b

// cpuSupports reports whether implementation i should be registered here.
// Until the assembly kernels land, only generic.
func cpuSupports(i implID) bool { return i == implGeneric }
