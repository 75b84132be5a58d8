//go:build amd64 && gc && !purego

package bench

import (
	"encoding/binary"
	"strings"
)

// cpuid executes CPUID with EAX=leaf, ECX=0.
//
//go:noescape
func cpuid(leaf uint32) (eax, ebx, ecx, edx uint32)

// cpuBrand returns the processor brand string (CPUID 0x80000002..4), the
// name the CPU gives itself, which a hypervisor's /proc/cpuinfo may shorten.
func cpuBrand() string {
	if max, _, _, _ := cpuid(0x80000000); max < 0x80000004 {
		return ""
	}
	var b [48]byte
	for i := range uint32(3) {
		a, bx, c, d := cpuid(0x80000002 + i)
		for j, r := range [4]uint32{a, bx, c, d} {
			binary.LittleEndian.PutUint32(b[16*i+4*uint32(j):], r)
		}
	}
	return strings.TrimSpace(strings.TrimRight(string(b[:]), "\x00"))
}
