//go:build amd64 && gc && !purego

package aesni

import "golang.org/x/sys/cpu"

// The raw-AES loops of roofline_amd64.s. Each runs iters iterations of
// rounds rounds over zeroed blocks held in registers, with an all-zero round
// key, and stores block 0's final state to out. rounds and iters must be
// positive; callers reach them only through rawAESRounds.

//go:noescape
func rawAESRoundsXMM(out *[16]byte, rounds, iters int)

//go:noescape
func rawAESRoundsYMM(out *[16]byte, rounds, iters int)

//go:noescape
func rawAESRoundsZMM(out *[16]byte, rounds, iters int)

// rawAESChainXMM runs iters iterations of rounds AESENC on one block, each
// round waiting for the one before: AESENC's latency (benchmarks only).
//
//go:noescape
func rawAESChainXMM(out *[16]byte, rounds, iters int)

// addChain runs 8*iters dependent one-cycle ADDs: the core clock's
// reference for turning latencies into cycles (benchmarks only).
func addChain(iters int) int

// rooflineVAES is our CPUID probe's VAES-on-ymm answer (x/sys/cpu reports
// VAES only with AVX-512), read once.
var rooflineVAES = func() bool { p := probeCPU(); return p.vaes && p.osYMM }()

// Feature predicates AND every flag they need, since GODEBUG can turn each
// off on its own.
func rooflineAvailable(u RooflineUnit) bool {
	x := &cpu.X86
	switch u {
	case RooflineXMM:
		return x.HasAES
	case RooflineYMM:
		return x.HasAES && x.HasAVX && x.HasAVX2 && rooflineVAES
	case RooflineZMM:
		return x.HasAES && x.HasAVX512F && x.HasAVX512VAES
	}
	return false
}

func rooflineUnits() []RooflineUnit {
	var us []RooflineUnit
	for _, u := range []RooflineUnit{RooflineXMM, RooflineYMM, RooflineZMM} {
		if rooflineAvailable(u) {
			us = append(us, u)
		}
	}
	if len(us) == 0 {
		us = append(us, RooflineGo)
	}
	return us
}

func rawAESRounds(u RooflineUnit, rounds, iters int) (out [16]byte) {
	if u != RooflineGo && !rooflineAvailable(u) {
		panic("aesni: roofline unit " + u.String() + " does not run on this CPU")
	}
	switch u {
	case RooflineGo:
		return rawAESRoundsGo(rounds, iters)
	case RooflineXMM:
		rawAESRoundsXMM(&out, rounds, iters)
	case RooflineYMM:
		rawAESRoundsYMM(&out, rounds, iters)
	case RooflineZMM:
		rawAESRoundsZMM(&out, rounds, iters)
	default:
		panic("aesni: unknown roofline unit")
	}
	return out
}
