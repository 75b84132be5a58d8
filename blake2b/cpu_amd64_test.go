//go:build amd64 && gc && !purego

package blake2b

import (
	"os"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/cpu"
)

// cpuSupports reports whether implementation i of the lane kernels (lanes)
// or of the compression function should be registered here.
// Without GODEBUG cpu options it reads the kernel's view (/proc/cpuinfo),
// independent of x/sys/cpu; with them it falls back to x/sys/cpu, which
// applies the options.
func cpuSupports(t *testing.T, i implID, lanes bool) bool {
	var has func(string) bool
	if info, err := os.ReadFile("/proc/cpuinfo"); err == nil && !strings.Contains(os.Getenv("GODEBUG"), "cpu.") {
		_, rest, _ := strings.Cut(string(info), "\nflags")
		line, _, _ := strings.Cut(rest, "\n")
		flags := strings.Fields(line)
		has = func(f string) bool { return slices.Contains(flags, f) }
	} else {
		t.Log("checking against x/sys/cpu")
		x := map[string]bool{
			"avx": cpu.X86.HasAVX, "avx2": cpu.X86.HasAVX2,
			"avx512f": cpu.X86.HasAVX512 && cpu.X86.HasAVX512F, "avx512vl": cpu.X86.HasAVX512VL,
		}
		has = func(f string) bool { return x[f] }
	}
	switch i {
	case implScalar:
		return !lanes
	case implAVX2:
		return has("avx") && has("avx2")
	case implAVX512:
		return has("avx") && has("avx2") && has("avx512f") && has("avx512vl")
	case implAVX512x16:
		return lanes && has("avx") && has("avx2") && has("avx512f") && has("avx512vl")
	}
	return i == implGeneric
}
