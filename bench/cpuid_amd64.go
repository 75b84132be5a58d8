//go:build amd64 && gc && !purego

package bench

import "github.com/xtsctl/xtsctl/internal/cpuid"

// cpuBrand returns the processor brand string, the name the CPU gives
// itself, which a hypervisor's /proc/cpuinfo may shorten.
func cpuBrand() string { return cpuid.Brand() }
