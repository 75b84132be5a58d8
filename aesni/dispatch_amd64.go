//go:build amd64 && gc && !purego

package aesni

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// Features, read once at start-up. Each flag ANDs every x/sys/cpu flag its
// kernels need, because GODEBUG=cpu.<name>=off clears them one by one.
var (
	useAESNI   bool // AESNI1/4/8 and the key expansion: AES, SSSE3
	useVAES256 bool // VEX-encoded VAES and VPCLMULQDQ on ymm (our CPUID probe)
	useVAES512 bool // EVEX VAES and VPCLMULQDQ on zmm
	preferYMM  bool // a core that downclocks under zmm (see zmmDownclocks)
)

// widest is the kernel family the automatic choice uses on this CPU; the
// data-unit length then picks within it (autoPick).
var widest Impl

func init() {
	p := probeCPU()
	x := &cpu.X86
	useAESNI = x.HasAES && x.HasSSSE3
	// Every CPU with VAES has AVX2; requiring AVX2 for both wide paths
	// means GODEBUG=cpu.avx2=off turns both off, as users expect.
	useVAES256 = useAESNI && x.HasPCLMULQDQ && x.HasAVX && x.HasAVX2 &&
		p.osYMM && p.vaes && p.vpclmulqdq
	useVAES512 = useAESNI && x.HasPCLMULQDQ && x.HasAVX && x.HasAVX2 &&
		x.HasAVX512 && x.HasAVX512F && x.HasAVX512BW && x.HasAVX512VL &&
		x.HasAVX512VAES && x.HasAVX512VPCLMULQDQ
	preferYMM = p.zmmDownclocks()

	available[AESNI1] = useAESNI
	available[AESNI4] = useAESNI
	available[AESNI8] = useAESNI
	available[VAES256] = useVAES256
	available[VAES512] = useVAES512

	switch {
	case useVAES512 && !(preferYMM && useVAES256):
		widest = VAES512
	case useVAES256:
		widest = VAES256
	case useAESNI:
		widest = AESNI8
	default:
		widest = Generic
	}
	selectFromEnv()
}

// Length thresholds of the automatic choice, in bytes.
// TODO(measure): placeholders until the per-size benchmarks are in.
const (
	vaes512Min = 64
	vaes256Min = 64
	aesni8Min  = 128
)

// autoPick chooses the kernel for an n-byte data unit: a switch on the
// CPU's family chosen once in init, then on the length.
func autoPick(n int) Impl {
	switch widest {
	case VAES512:
		if n >= vaes512Min {
			return VAES512
		}
		return AESNI4
	case VAES256:
		if n >= vaes256Min {
			return VAES256
		}
		return AESNI4
	case AESNI8:
		if n >= aesni8Min {
			return AESNI8
		}
		return AESNI4
	}
	return Generic
}

func dispatchTable() []DispatchRange {
	switch widest {
	case VAES512:
		return []DispatchRange{{16, AESNI4}, {vaes512Min, VAES512}}
	case VAES256:
		return []DispatchRange{{16, AESNI4}, {vaes256Min, VAES256}}
	case AESNI8:
		return []DispatchRange{{16, AESNI4}, {aesni8Min, AESNI8}}
	}
	return []DispatchRange{{16, Generic}}
}

func expandKey(c *Cipher, k1, k2 []byte) {
	if !useAESNI {
		expandKeyGeneric(c, k1, k2)
		return
	}
	if len(k1) == 16 {
		expandKey128Asm((*[16]byte)(k1), &c.enc)
		expandKey128Asm((*[16]byte)(k2), &c.tweak)
	} else {
		expandKey256Asm((*[32]byte)(k1), &c.enc)
		expandKey256Asm((*[32]byte)(k2), &c.tweak)
	}
	invertScheduleAsm(&c.dec, &c.enc, c.rounds)
}

// encryptUnit and decryptUnit make one direct call per data unit;
// len(dst) == len(src) >= 16 (checked by the caller).
func encryptUnit(c *Cipher, dst, src []byte, tweak *[16]byte) {
	encryptWith(Pick(len(src)), c, dst, src, tweak)
}

func decryptUnit(c *Cipher, dst, src []byte, tweak *[16]byte) {
	decryptWith(Pick(len(src)), c, dst, src, tweak)
}

func encryptWith(impl Impl, c *Cipher, dst, src []byte, tweak *[16]byte) {
	d, s, n := unsafe.SliceData(dst), unsafe.SliceData(src), len(src)
	switch impl {
	case VAES512:
		xtsEncVAES512(&c.enc, &c.tweak, c.rounds, d, s, n, tweak)
	case VAES256:
		xtsEncVAES256(&c.enc, &c.tweak, c.rounds, d, s, n, tweak)
	case AESNI8:
		xtsEncAESNI8(&c.enc, &c.tweak, c.rounds, d, s, n, tweak)
	case AESNI4:
		xtsEncAESNI4(&c.enc, &c.tweak, c.rounds, d, s, n, tweak)
	case AESNI1:
		xtsEncAESNI1(&c.enc, &c.tweak, c.rounds, d, s, n, tweak)
	default:
		xtsGeneric(c, dst, src, tweak, false)
	}
}

func decryptWith(impl Impl, c *Cipher, dst, src []byte, tweak *[16]byte) {
	d, s, n := unsafe.SliceData(dst), unsafe.SliceData(src), len(src)
	switch impl {
	case VAES512:
		xtsDecVAES512(&c.dec, &c.tweak, c.rounds, d, s, n, tweak)
	case VAES256:
		xtsDecVAES256(&c.dec, &c.tweak, c.rounds, d, s, n, tweak)
	case AESNI8:
		xtsDecAESNI8(&c.dec, &c.tweak, c.rounds, d, s, n, tweak)
	case AESNI4:
		xtsDecAESNI4(&c.dec, &c.tweak, c.rounds, d, s, n, tweak)
	case AESNI1:
		xtsDecAESNI1(&c.dec, &c.tweak, c.rounds, d, s, n, tweak)
	default:
		xtsGeneric(c, dst, src, tweak, true)
	}
}

// encryptSectors makes one call for the whole batch where a multi-sector
// kernel exists (VAES, unit a multiple of 16), else one direct call per
// data unit.
func encryptSectors(c *Cipher, dst, src []byte, unit int, sector, step uint64) {
	if len(src) == 0 {
		return
	}
	impl := Pick(unit)
	d, s := unsafe.SliceData(dst), unsafe.SliceData(src)
	if unit%BlockSize == 0 {
		switch impl {
		case VAES512:
			xtsEncSectorsVAES512(&c.enc, &c.tweak, c.rounds, d, s, len(src), unit, sector, step)
			return
		case VAES256:
			xtsEncSectorsVAES256(&c.enc, &c.tweak, c.rounds, d, s, len(src), unit, sector, step)
			return
		}
	}
	var t [16]byte
	for off := 0; off < len(src); off += unit {
		plain64(&t, sector)
		encryptWith(impl, c, dst[off:off+unit], src[off:off+unit], &t)
		sector += step
	}
}

func decryptSectors(c *Cipher, dst, src []byte, unit int, sector, step uint64) {
	if len(src) == 0 {
		return
	}
	impl := Pick(unit)
	d, s := unsafe.SliceData(dst), unsafe.SliceData(src)
	if unit%BlockSize == 0 {
		switch impl {
		case VAES512:
			xtsDecSectorsVAES512(&c.dec, &c.tweak, c.rounds, d, s, len(src), unit, sector, step)
			return
		case VAES256:
			xtsDecSectorsVAES256(&c.dec, &c.tweak, c.rounds, d, s, len(src), unit, sector, step)
			return
		}
	}
	var t [16]byte
	for off := 0; off < len(src); off += unit {
		plain64(&t, sector)
		decryptWith(impl, c, dst[off:off+unit], src[off:off+unit], &t)
		sector += step
	}
}
