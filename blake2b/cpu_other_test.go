//go:build !amd64 || !gc || purego

package blake2b

// cpuSupports reports whether implementation i can run here: without
// assembly, only generic.
func cpuSupports(i implID) bool { return i == implGeneric }
