//go:build amd64 && gc && !purego

package aesni

import (
	"strings"
	"unsafe"

	"golang.org/x/sys/cpu"

	"github.com/xtsctl/xtsctl/internal/cpuid"
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
// data-unit length then picks within it (autoPick). source says where the
// choice came from.
var (
	widest Impl
	source string
)

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
	available[VAES512C] = useVAES512

	row, hasRow := cpuid.This()
	widest, source = chooseKernel(row, hasRow, chooseWidest(useAESNI, useVAES256, useVAES512, preferYMM), calibrate)
	registerImpls()
}

// chooseKernel applies the per-CPU table (internal/cpuid) to the choice
// by features, byFeatures: a row's only kernel that runs here is the
// choice; several are timed (calib). A CPU without a row whose widest
// family is the zmm one times both zmm kernels: vaes512 (tuned on AMD Zen
// 4, whose tweak update avoids VPCLMULQDQ, which takes an AES slot there)
// and vaes512c (tuned on Intel, whose update avoids the shifts by bits that
// take the 512-bit AES port there).
func chooseKernel(row cpuid.Tuning, hasRow bool, byFeatures Impl, calib func([]Impl) Impl) (Impl, string) {
	if !hasRow {
		if byFeatures == VAES512 {
			return calib([]Impl{VAES512, VAES512C}), "timed at start-up (vaes512, vaes512c): no row for this CPU"
		}
		return byFeatures, "by CPU features: no row for this CPU"
	}
	var cands []Impl
	for _, name := range row.XTS {
		if i, ok := parseImplName(name); ok && available[i] {
			cands = append(cands, i)
		}
	}
	switch len(cands) {
	case 0:
		return byFeatures, "by CPU features: none of the kernels of the row for " + row.CPU + " runs here"
	case 1:
		return cands[0], "the table's row for " + row.CPU
	}
	names := make([]string, len(cands))
	for i, c := range cands {
		names[i] = c.String()
	}
	return calib(cands), "timed at start-up (" + strings.Join(names, ", ") + "), as the table's row for " + row.CPU + " asks"
}

// calibrate returns the fastest of cands (unit kernels), timed on 4096-byte
// data units under an arbitrary XTS-AES-256 key (cpuid.Fastest: turns of
// about ten microseconds, about half a millisecond in all).
func calibrate(cands []Impl) Impl {
	var c Cipher
	key := make([]byte, 64)
	for i := range key {
		key[i] = byte(i*29 + 1)
	}
	c.rounds = 14
	expandKey(&c, key[:32], key[32:])
	buf := make([]byte, 4096)
	var tw [16]byte
	i := cpuid.Fastest(len(cands), func(i int) {
		f := unitKernels[cands[i]]
		for k := range 32 {
			tw[0] = byte(k)
			f(&c.enc, &c.tweak, c.rounds, &buf[0], &buf[0], len(buf), &tw)
		}
	})
	return cands[i]
}

// unitKernels are the encrypting unit kernels calibrate may time (the
// dispatch itself switches on the Impl, without function values).
var unitKernels = [numImpls]func(ks, tk *schedule, rounds int, dst, src *byte, n int, tweak *[16]byte){
	AESNI1: xtsEncAESNI1, AESNI4: xtsEncAESNI4, AESNI8: xtsEncAESNI8,
	VAES256: xtsEncVAES256, VAES512: xtsEncVAES512, VAES512C: xtsEncVAES512C,
}

// chooseWidest picks the kernel family: zmm where it runs, unless the core
// downclocks under zmm and the ymm kernel runs too; then ymm; then AES-NI.
func chooseWidest(aesni, vaes256, vaes512, preferYMM bool) Impl {
	switch {
	case vaes512 && !(preferYMM && vaes256):
		return VAES512
	case vaes256:
		return VAES256
	case aesni:
		return AESNI4
	}
	return Portable
}

// The automatic choice. The kernel family comes from the per-CPU table in
// internal/cpuid (chooseKernel above), else from the features. Within the
// family, from measurements on AMD EPYC 9005 (Zen 5, family 26) with every
// kernel forced: XTS-AES-256, thread CPU time, minimum of 8 runs on a
// shared 2-core machine, `go test -bench 'Encrypt$|EncryptLatency'
// ./aesni`; BENCHMARKS.md ("AES-XTS kernels") has the full tables.
//
// Short data units must not pay the wide kernels' set-up (15 round keys
// broadcast to zmm, four tweak vectors built). The threshold sits inside
// the VAES kernels, one compare before any set-up: under one vector of
// blocks (64 bytes zmm, 32 ymm) they take an xmm path with the round keys
// as memory operands (_asm/xts, short). Measured there, that path beats
// the legacy-SSE aesni1, which must load every round key into a register
// first (48 bytes: 2307 MB/s against 2055; 16 bytes: 766 against 753;
// latency at 16: 38.5 ns against 40.9), and the wide path wins from one
// vector on (64 bytes: 2937 MB/s against 2337 for aesni1, latency 47.3 ns
// against 46.5; 128 bytes: 6124 against 3953 for vaes256). So on a VAES
// CPU the family's kernel takes every length, and the switch below needs
// no length threshold of its own there. (vaes512c's short path runs two or
// three whole blocks as a ymm pair and an xmm block: on Intel family 6
// model 207, 48-byte units 1.30x its one-block loop and 1.2x vaes256.)
//
// On CPUs with AES-NI but no VAES, aesni4 is chosen at every length: it
// was the fastest AES-NI kernel from 64 bytes to 16 KiB (4096: 5977 MB/s,
// aesni8 5315, aesni1 5005) and level below. With AESENC at 4 cycles and 2
// per cycle, out-of-order execution overlaps successive 4-way iterations,
// while the 8-way loop spends loads and stores on its spilled tweaks.
// Cores with a 7-cycle AESENC (before Skylake) may prefer aesni8; none is
// here to measure, so it is not chosen.

// autoPick chooses the kernel for an n-byte data unit: the kernel family
// chosen once in init, whatever the length. (The VAES kernels switch on
// the length themselves, see above.) It is one load: a switch here cost
// 128-byte units 4% against the same kernel forced.
func autoPick(int) Impl { return widest }

func dispatchTable() []DispatchRange { return []DispatchRange{{16, widest}} }

func dispatchSource() string { return source }

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

// encryptUnit and decryptUnit make one direct call per data unit, chosen by
// a switch (no function values); d and s hold n >= 16 bytes (checked by
// the caller).
func encryptUnit(c *Cipher, d, s *byte, n int, tweak *[16]byte) {
	switch Pick(n) {
	case VAES512:
		xtsEncVAES512(&c.enc, &c.tweak, c.rounds, d, s, n, tweak)
	case VAES512C:
		xtsEncVAES512C(&c.enc, &c.tweak, c.rounds, d, s, n, tweak)
	case VAES256:
		xtsEncVAES256(&c.enc, &c.tweak, c.rounds, d, s, n, tweak)
	case AESNI8:
		xtsEncAESNI8(&c.enc, &c.tweak, c.rounds, d, s, n, tweak)
	case AESNI4:
		xtsEncAESNI4(&c.enc, &c.tweak, c.rounds, d, s, n, tweak)
	case AESNI1:
		xtsEncAESNI1(&c.enc, &c.tweak, c.rounds, d, s, n, tweak)
	case Portable:
		xtsPortable(c, unsafe.Slice(d, n), unsafe.Slice(s, n), tweak, false)
	default:
		xtsGeneric(c, unsafe.Slice(d, n), unsafe.Slice(s, n), tweak, false)
	}
}

func decryptUnit(c *Cipher, d, s *byte, n int, tweak *[16]byte) {
	switch Pick(n) {
	case VAES512:
		xtsDecVAES512(&c.dec, &c.tweak, c.rounds, d, s, n, tweak)
	case VAES512C:
		xtsDecVAES512C(&c.dec, &c.tweak, c.rounds, d, s, n, tweak)
	case VAES256:
		xtsDecVAES256(&c.dec, &c.tweak, c.rounds, d, s, n, tweak)
	case AESNI8:
		xtsDecAESNI8(&c.dec, &c.tweak, c.rounds, d, s, n, tweak)
	case AESNI4:
		xtsDecAESNI4(&c.dec, &c.tweak, c.rounds, d, s, n, tweak)
	case AESNI1:
		xtsDecAESNI1(&c.dec, &c.tweak, c.rounds, d, s, n, tweak)
	case Portable:
		xtsPortable(c, unsafe.Slice(d, n), unsafe.Slice(s, n), tweak, true)
	default:
		xtsGeneric(c, unsafe.Slice(d, n), unsafe.Slice(s, n), tweak, true)
	}
}

// encryptSectors makes one call for the whole batch where a multi-sector
// kernel exists (VAES, unit a multiple of 16), else one direct call per
// data unit. The batch kernels pay their set-up once per batch, so the
// automatic choice takes the widest family's at any unit size.
func encryptSectors(c *Cipher, dst, src []byte, unit int, sector, step uint64) {
	if len(src) == 0 {
		return
	}
	d, s := unsafe.SliceData(dst), unsafe.SliceData(src)
	if unit%BlockSize == 0 {
		switch batchPick() {
		case VAES512:
			xtsEncSectorsVAES512(&c.enc, &c.tweak, c.rounds, d, s, len(src), unit, sector, step)
			return
		case VAES512C:
			xtsEncSectorsVAES512C(&c.enc, &c.tweak, c.rounds, d, s, len(src), unit, sector, step)
			return
		case VAES256:
			xtsEncSectorsVAES256(&c.enc, &c.tweak, c.rounds, d, s, len(src), unit, sector, step)
			return
		}
	}
	var t [16]byte
	for off := 0; off < len(src); off += unit {
		plain64(&t, sector)
		encryptUnit(c, &dst[off], &src[off], unit, &t)
		sector += step
	}
}

// batchPick is the kernel family for a batch of units: the forced one, or
// the widest this CPU runs.
func batchPick() Impl {
	if forced != implAuto {
		return forced
	}
	return widest
}

func decryptSectors(c *Cipher, dst, src []byte, unit int, sector, step uint64) {
	if len(src) == 0 {
		return
	}
	d, s := unsafe.SliceData(dst), unsafe.SliceData(src)
	if unit%BlockSize == 0 {
		switch batchPick() {
		case VAES512:
			xtsDecSectorsVAES512(&c.dec, &c.tweak, c.rounds, d, s, len(src), unit, sector, step)
			return
		case VAES512C:
			xtsDecSectorsVAES512C(&c.dec, &c.tweak, c.rounds, d, s, len(src), unit, sector, step)
			return
		case VAES256:
			xtsDecSectorsVAES256(&c.dec, &c.tweak, c.rounds, d, s, len(src), unit, sector, step)
			return
		}
	}
	var t [16]byte
	for off := 0; off < len(src); off += unit {
		plain64(&t, sector)
		decryptUnit(c, &dst[off], &src[off], unit, &t)
		sector += step
	}
}
