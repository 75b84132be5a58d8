//go:build !amd64 || !gc || purego

package bench

// cpuBrand has no portable source; DetectCPU falls back to /proc/cpuinfo.
func cpuBrand() string { return "" }
