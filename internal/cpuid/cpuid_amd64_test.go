//go:build amd64 && gc && !purego

package cpuid

import (
	"os"
	"strings"
	"testing"
)

// TestAgainstProcCPUInfo checks CPUID against what Linux reports for the
// same CPU: the AES-NI bit (leaf 1, ECX bit 25), the vendor string (leaf
// 0) and, via XGETBV, that the OS saves AVX state when it reports avx.
func TestAgainstProcCPUInfo(t *testing.T) {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		t.Skipf("cannot read /proc/cpuinfo: %v", err)
	}
	flags := map[string]bool{}
	vendor := ""
	for _, line := range strings.Split(string(b), "\n") {
		name, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch strings.TrimSpace(name) {
		case "flags":
			if len(flags) == 0 {
				for _, f := range strings.Fields(val) {
					flags[f] = true
				}
			}
		case "vendor_id":
			vendor = strings.TrimSpace(val)
		}
	}
	if len(flags) == 0 {
		t.Skip("no flags line in /proc/cpuinfo")
	}
	_, ebx, ecx, edx := CPUID(0, 0)
	var v [12]byte
	for i, r := range []uint32{ebx, edx, ecx} {
		for j := range 4 {
			v[4*i+j] = byte(r >> (8 * j))
		}
	}
	if vendor != "" && string(v[:]) != vendor {
		t.Errorf("CPUID vendor %q, /proc/cpuinfo %q", v, vendor)
	}
	_, _, ecx1, _ := CPUID(1, 0)
	if got := ecx1&(1<<25) != 0; got != flags["aes"] {
		t.Errorf("CPUID AES-NI bit %v, /proc/cpuinfo aes %v", got, flags["aes"])
	}
	if flags["avx"] {
		if ecx1&(1<<27) == 0 {
			t.Fatal("the kernel reports avx but CPUID shows no OSXSAVE")
		}
		if xcr0, _ := XGETBV(); xcr0&6 != 6 {
			t.Errorf("XCR0 = %#x: the OS does not save SSE and AVX state, yet reports avx", xcr0)
		}
	}
	if max, _, _, _ := CPUID(0x80000000, 0); max >= 0x80000004 {
		brand := Brand()
		if brand == "" || strings.IndexFunc(brand, func(r rune) bool { return r < ' ' || r > '~' }) >= 0 {
			t.Errorf("brand string %q: empty or not printable ASCII", brand)
		}
	}
}
