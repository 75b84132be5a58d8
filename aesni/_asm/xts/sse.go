package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

func dirName(dec bool) string {
	if dec {
		return "Dec"
	}
	return "Enc"
}

// keyMem addresses round key j of the virtual 15-key layout every kernel
// uses: key 0 at base, keys 1..4 (AES-256 only) after it, and keys 5..14
// counted back from kend = base + 16*rounds, so that AES-128 and AES-256
// share the last ten rounds and differ only in a skipped block of four.
func keyMem(base, kend GPPhysical, j int) Mem {
	switch {
	case j == 0:
		return Mem{Base: base}
	case j <= 4:
		return Mem{Base: base, Disp: 16 * j}
	default:
		return Mem{Base: kend, Disp: -16 * (14 - j)}
	}
}

// sseRounds runs whole AES (whitening, rounds, last round) on the blocks vs
// with the schedule at base/kend, loading each round key into kt first
// (legacy-SSE AESENC needs aligned memory operands, and the schedule is
// only 8-byte aligned).
func sseRounds(vs []VecPhysical, base, kend, rounds GPPhysical, kt VecPhysical, dec bool) {
	MOVOU(keyMem(base, kend, 0), kt)
	for _, v := range vs {
		PXOR(kt, v)
	}
	round := func(j int) {
		MOVOU(keyMem(base, kend, j), kt)
		for _, v := range vs {
			switch {
			case j == 14 && dec:
				AESDECLAST(kt, v)
			case j == 14:
				AESENCLAST(kt, v)
			case dec:
				AESDEC(kt, v)
			default:
				AESENC(kt, v)
			}
		}
	}
	skip := newLabel("aes128_")
	CMPQ(rounds, Imm(10))
	JE(LabelRef(skip))
	for j := 1; j <= 4; j++ {
		round(j)
	}
	Label(skip)
	for j := 5; j <= 14; j++ {
		round(j)
	}
}

// sseMulX sets t = t*x in GF(2^128): both halves shift left by one (PADDQ),
// and a PSHUFD/PSRAL sign spread of bits 63 and 127, masked with gfMulX,
// adds the carry into the high half and the reduction 0x87 into the low.
func sseMulX(t, mask, tmp VecPhysical) {
	PSHUFD(Imm(0x5f), t, tmp)
	PSRAL(Imm(31), tmp)
	PAND(mask, tmp)
	PADDQ(t, t)
	PXOR(tmp, t)
}

// sseKernel emits xts{Enc,Dec}AESNI{1,4,8}: one data unit with legacy-SSE
// AES-NI, ways blocks per main-loop iteration.
func sseKernel(ways int, dec bool) {
	name := fmt.Sprintf("xts%sAESNI%d", dirName(dec), ways)
	TEXT(name, NOSPLIT, unitSig)
	var (
		ks, tk, rounds            = RAX, RBX, RCX
		dst, src, blocks          = RDI, RSI, RDX
		tweakp, kend, kend2, tail = R8, R9, R10, R11
		kt, t, mask, tmp          = X8, X9, X10, X11
	)
	vs := []VecPhysical{X0, X1, X2, X3, X4, X5, X6, X7}[:ways]
	Comment(fmt.Sprintf("XTS-AES %s of one data unit, %d block(s) per main-loop iteration.", map[bool]string{false: "encryption", true: "decryption"}[dec], ways),
		"Registers: AX key1 schedule, BX key2 schedule, CX rounds, R9/R10 the",
		"address of their last round keys, DI dst, SI src, DX whole blocks left",
		"before stealing, R11 n%16; X8 round key, X9 the tweak T of the next",
		"block, X10 the gfMulX constant, X11 scratch.")
	var saved Mem
	switch ways {
	case 8:
		saved = AllocLocal(8 * 16)
		Comment("Main loop, per iteration: 8 tweaks T*x^i (stored on the stack, X0-X7",
			"hold the blocks), 8 blocks XORed with them, AES on all 8 round by round,",
			"XOR with the tweaks again.")
	case 4:
		Comment("Main loop, per iteration: 4 tweaks into X4-X7, 4 blocks in X0-X3",
			"XORed with them, AES on all 4 round by round, XOR again.")
	}
	Load(Param("ks"), ks)
	Load(Param("tk"), tk)
	Load(Param("rounds"), rounds)
	Load(Param("dst"), dst)
	Load(Param("src"), src)
	Load(Param("n"), blocks)
	Load(Param("tweak"), tweakp)
	MOVQ(rounds, kend)
	SHLQ(Imm(4), kend)
	MOVQ(kend, kend2)
	ADDQ(ks, kend)
	ADDQ(tk, kend2)

	Comment("T = E_K2(tweak)")
	MOVOU(Mem{Base: tweakp}, t)
	sseRounds([]VecPhysical{t}, tk, kend2, rounds, kt, false)
	MOVOU(gfMulX, mask)

	Comment("DX = whole blocks; the last one joins the stealing if n%16 != 0")
	MOVQ(blocks, tail)
	ANDQ(Imm(15), tail)
	SHRQ(Imm(4), blocks)
	noSteal := newLabel("noSteal")
	TESTQ(tail, tail)
	JZ(LabelRef(noSteal))
	DECQ(blocks)
	Label(noSteal)

	one := newLabel("loop1_")
	if ways > 1 {
		loop := newLabel(fmt.Sprintf("loop%d_", ways))
		Label(loop)
		CMPQ(blocks, Imm(uint64(ways)))
		JB(LabelRef(one))
		for i, v := range vs {
			if ways == 8 {
				MOVOU(t, saved.Offset(16*i))
			} else {
				MOVOU(t, []VecPhysical{X4, X5, X6, X7}[i])
			}
			MOVOU(Mem{Base: src, Disp: 16 * i}, v)
			PXOR(t, v)
			sseMulX(t, mask, tmp)
		}
		sseRounds(vs, ks, kend, rounds, kt, dec)
		for i, v := range vs {
			if ways == 8 {
				MOVOU(saved.Offset(16*i), tmp)
				PXOR(tmp, v)
			} else {
				PXOR([]VecPhysical{X4, X5, X6, X7}[i], v)
			}
			MOVOU(v, Mem{Base: dst, Disp: 16 * i})
		}
		ADDQ(imm(16*ways), src)
		ADDQ(imm(16*ways), dst)
		SUBQ(Imm(uint64(ways)), blocks)
		JMP(LabelRef(loop))
	}

	Comment("One block at a time")
	steal := newLabel("steal")
	Label(one)
	TESTQ(blocks, blocks)
	JZ(LabelRef(steal))
	MOVOU(Mem{Base: src}, X0)
	PXOR(t, X0)
	sseRounds([]VecPhysical{X0}, ks, kend, rounds, kt, dec)
	PXOR(t, X0)
	MOVOU(X0, Mem{Base: dst})
	sseMulX(t, mask, tmp)
	ADDQ(Imm(16), src)
	ADDQ(Imm(16), dst)
	DECQ(blocks)
	JMP(LabelRef(one))

	Label(steal)
	done := newLabel("done")
	TESTQ(tail, tail)
	JZ(LabelRef(done))
	sseSteal(dec, ks, kend, rounds, src, dst, tail, t, mask, tmp, kt)
	Label(done)
	RET()
}

// sseSteal does ciphertext stealing over the last whole block (at src/dst)
// and the tail bytes after it, as xtsGeneric does. T is the last whole
// block's tweak on entry.
func sseSteal(dec bool, ks, kend, rounds, src, dst, tail GPPhysical, t, mask, tmp, kt VecPhysical) {
	Comment("Ciphertext stealing. X4 = T_m, X9 = T_m+1; decryption uses them",
		"in the other order. X0 = XEX of the last whole block (CC, or PP when",
		"decrypting); X1 = the last 16 bytes of src shifted down so the tail",
		"bytes start at 0 (PSHUFB with a ctsShuffle window, X2); X5 = X0",
		"shifted up so its first tail bytes end the buffer, stored at",
		"dst+tail before the final block overwrites the rest of that store;",
		"X6 = the bytes >= tail mask (X2's 0x80 entries).")
	MOVOU(t, X4)
	sseMulX(t, mask, tmp)
	first, second := X4, t
	if dec {
		first, second = t, X4
	}
	MOVOU(Mem{Base: src}, X0)
	PXOR(first, X0)
	sseRounds([]VecPhysical{X0}, ks, kend, rounds, kt, dec)
	PXOR(first, X0)
	MOVOU(Mem{Base: src, Index: tail, Scale: 1}, X1)
	LEAQ(ctsShuffle, R12)
	MOVQ(U32(32), R13)
	SUBQ(tail, R13)
	MOVOU(Mem{Base: R12, Index: R13, Scale: 1}, X2)
	PSHUFB(X2, X1)
	MOVOU(Mem{Base: R12, Index: tail, Scale: 1}, X3)
	MOVOU(X0, X5)
	PSHUFB(X3, X5)
	MOVOU(X5, Mem{Base: dst, Index: tail, Scale: 1})
	PXOR(X6, X6)
	PCMPGTB(X2, X6)
	PAND(X6, X0)
	POR(X1, X0)
	PXOR(second, X0)
	sseRounds([]VecPhysical{X0}, ks, kend, rounds, kt, dec)
	PXOR(second, X0)
	MOVOU(X0, Mem{Base: dst})
}
