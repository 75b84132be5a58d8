//go:build amd64 && gc && !purego

package aesni

import "github.com/xtsctl/xtsctl/internal/cpuid"

// cpuProbe is what our own CPUID probe finds. golang.org/x/sys/cpu sets
// HasAVX512VAES and HasAVX512VPCLMULQDQ only when AVX-512 is usable, but
// the CPUID bits (leaf 7, ECX bits 9 and 10) also cover the VEX-encoded
// ymm forms; a CPU with VAES and no AVX-512 (AMD Zen 3, Intel Alder Lake)
// is seen only through this probe.
type cpuProbe struct {
	vaes       bool // CPUID.(EAX=7,ECX=0):ECX[9], VAES on ymm (and zmm with AVX-512)
	vpclmulqdq bool // CPUID.(EAX=7,ECX=0):ECX[10]
	osYMM      bool // OSXSAVE set and XCR0 enables SSE and AVX state (bits 1, 2)
	intel      bool // vendor GenuineIntel
	family     uint32
	model      uint32 // extended model folded in, as Intel documents for families 6 and 15
}

func probeCPU() cpuProbe {
	var p cpuProbe
	maxLeaf, ebx, ecx, edx := cpuid.CPUID(0, 0)
	// "GenuineIntel" is returned in EBX, EDX, ECX.
	p.intel = ebx == 0x756e6547 && edx == 0x49656e69 && ecx == 0x6c65746e
	if maxLeaf < 1 {
		return p
	}
	eax1, _, ecx1, _ := cpuid.CPUID(1, 0)
	p.family = eax1 >> 8 & 0xf
	p.model = eax1 >> 4 & 0xf
	if p.family == 0xf {
		p.family += eax1 >> 20 & 0xff
	}
	if p.family == 6 || p.family >= 0xf {
		p.model |= (eax1 >> 16 & 0xf) << 4
	}
	if ecx1&(1<<27) != 0 { // OSXSAVE
		xcr0, _ := cpuid.XGETBV()
		p.osYMM = xcr0&6 == 6
	}
	if maxLeaf < 7 {
		return p
	}
	_, _, ecx7, _ := cpuid.CPUID(7, 0)
	p.vaes = ecx7&(1<<9) != 0
	p.vpclmulqdq = ecx7&(1<<10) != 0
	return p
}

// zmmDownclocks reports whether this is one of the Intel cores that lower
// their clock while 512-bit instructions run (Skylake-SP/X, Ice Lake client
// and server, Tiger Lake), where the ymm kernel is faster in practice. It is
// the list Linux keeps as X86_FEATURE_PREFER_YMM (arch/x86/kernel/cpu/intel.c,
// zmm_exclusion_list). AMD Zen 4 runs zmm at full clock (as two 256-bit
// halves) and Zen 5 natively; Sapphire Rapids and later lost the penalty.
func (p cpuProbe) zmmDownclocks() bool {
	if !p.intel || p.family != 6 {
		return false
	}
	switch p.model {
	case 0x55, // Skylake-SP/X (no VAES, listed for completeness)
		0x6a, 0x6c, // Ice Lake-SP, Ice Lake-D
		0x7d, 0x7e, 0x9d, // Ice Lake client, Ice Lake NNPI
		0x8c, 0x8d: // Tiger Lake
		return true
	}
	return false
}
