package main

import (
	"fmt"
	"strings"

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

// sseRounds runs AES on the blocks vs with the schedule at base/kend,
// loading each round key into kt first (legacy-SSE AESENC needs aligned
// memory operands, and the schedule is only 8-byte aligned). The blocks
// must already hold their input XORed with round key 0 (see sseWhiten).
// lastKey[i], if given, is XORed into the last round key of block i first:
// XEX's final tweak XOR then costs nothing after the last round.
func sseRounds(vs []VecPhysical, base, kend, rounds GPPhysical, kt VecPhysical, dec bool, lastKey []VecPhysical) {
	round := func(j int) {
		MOVOU(keyMem(base, kend, j), kt)
		for _, v := range vs {
			if dec {
				AESDEC(kt, v)
			} else {
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
	for j := 5; j <= 13; j++ {
		round(j)
	}
	MOVOU(keyMem(base, kend, 14), kt)
	for i, v := range vs {
		k := kt
		if lastKey != nil {
			PXOR(kt, lastKey[i])
			k = lastKey[i]
		}
		if dec {
			AESDECLAST(k, v)
		} else {
			AESENCLAST(k, v)
		}
	}
}

// sseWhiten XORs round key 0 into the blocks vs.
func sseWhiten(vs []VecPhysical, base GPPhysical, kt VecPhysical) {
	MOVOU(Mem{Base: base}, kt)
	for _, v := range vs {
		PXOR(kt, v)
	}
}

// sseXEX1 runs XEX on block x (already loaded and XORed with round key 0,
// which does not wait for the tweak) with tweak tw; the tweak's final XOR
// rides in the last round key, built in the scratch register last.
func sseXEX1(x, tw, last VecPhysical, base, kend, rounds GPPhysical, kt VecPhysical, dec bool) {
	PXOR(tw, x)
	MOVOU(tw, last)
	sseRounds([]VecPhysical{x}, base, kend, rounds, kt, dec, []VecPhysical{last})
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
	fold := "The final XOR with a block's tweak is folded into its last round key\n" +
		"(X4 in the one-block loop)."
	switch ways {
	case 4:
		fold = "The final XOR with a block's tweak is folded into its last round key\n" +
			"(X4-X7, which hold the tweaks in the 4-way loop; X4 in the one-block loop)."
	case 8:
		fold = "The 8-way loop XORs the tweaks back from the stack after the last\n" +
			"round; the 4-way step and the one-block loop fold them into the last\n" +
			"round key (X4-X7, X4)."
	}
	Comment(append([]string{fmt.Sprintf("XTS-AES %s of one data unit with AES-NI (legacy SSE encoding).", map[bool]string{false: "encryption", true: "decryption"}[dec]),
		"Registers: AX key1 schedule, BX key2 schedule, CX rounds, R9/R10 the",
		"address of their last round keys, DI dst, SI src, DX whole blocks left",
		"before stealing, R11 n%16; X8 round key, X9 the tweak T of the next",
		"block, X10 the gfMulX constant, X11 scratch."}, strings.Split(fold, "\n")...)...)
	var saved Mem
	switch ways {
	case 8:
		saved = AllocLocal(8 * 16)
		Comment("Main loop, per iteration: 8 tweaks T*x^i (stored on the stack, X0-X7",
			"hold the blocks), 8 blocks XORed with them, AES on all 8 round by round,",
			"XOR with the tweaks again. Then at most one 4-way step (as in the",
			"4-way kernel), then one block at a time, then the stealing.")
	case 4:
		Comment("Main loop, per iteration: 4 tweaks into X4-X7, 4 blocks in X0-X3",
			"XORed with them, AES on all 4 round by round. Then one block at a",
			"time, then the stealing.")
	case 1:
		Comment("Per iteration: one block, XORed with key 0 and its tweak, AES, the",
			"next tweak T*x. Then the stealing.")
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

	Comment("T = E_K2(tweak). The tweak is loaded as two qwords: callers build",
		"it with 8-byte stores, which a 16-byte load could not forward from.")
	MOVQ(Mem{Base: tweakp}, t)
	MOVQ(Mem{Base: tweakp, Disp: 8}, tmp)
	PUNPCKLQDQ(tmp, t)
	sseWhiten([]VecPhysical{t}, tk, kt)
	sseRounds([]VecPhysical{t}, tk, kend2, rounds, kt, false, nil)
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
	// The 8-way kernel finishes with at most one 4-way step, so that
	// 4..7 leftover blocks do not run one at a time.
	widths := []int{ways}
	if ways == 8 {
		widths = []int{8, 4}
	}
	if ways == 1 {
		widths = nil
	}
	labels := make([]string, len(widths))
	for i, w := range widths {
		labels[i] = newLabel(fmt.Sprintf("loop%d_", w))
	}
	for i, w := range widths {
		next := one
		if i+1 < len(widths) {
			next = labels[i+1]
		}
		sseWays(w, labels[i], next, w == ways, saved, vs[:w], src, dst, blocks, ks, kend, rounds, t, mask, tmp, kt, dec)
	}

	Comment("One block at a time")
	steal := newLabel("steal")
	Label(one)
	TESTQ(blocks, blocks)
	JZ(LabelRef(steal))
	MOVOU(Mem{Base: src}, X0)
	sseWhiten([]VecPhysical{X0}, ks, kt)
	sseXEX1(X0, t, X4, ks, kend, rounds, kt, dec)
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

// sseWays emits the loop over w blocks per iteration (w = 8: tweaks spilled
// to the stack; otherwise w <= 4 with the tweaks in X4..X7). With loop
// false (the 4-way step after an 8-way loop) it runs at most once.
func sseWays(w int, label, next string, loop bool, saved Mem, vs []VecPhysical, src, dst, blocks, ks, kend, rounds GPPhysical, t, mask, tmp, kt VecPhysical, dec bool) {
	tws := []VecPhysical{X4, X5, X6, X7}
	Label(label)
	CMPQ(blocks, Imm(uint64(w)))
	JB(LabelRef(next))
	for i, v := range vs {
		if w == 8 {
			MOVOU(t, saved.Offset(16*i))
		} else {
			MOVOU(t, tws[i])
		}
		MOVOU(Mem{Base: src, Disp: 16 * i}, v)
		PXOR(t, v)
		sseMulX(t, mask, tmp)
	}
	sseWhiten(vs, ks, kt)
	if w == 8 {
		sseRounds(vs, ks, kend, rounds, kt, dec, nil)
		for i, v := range vs {
			MOVOU(saved.Offset(16*i), tmp)
			PXOR(tmp, v)
		}
	} else {
		sseRounds(vs, ks, kend, rounds, kt, dec, tws[:w])
	}
	for i, v := range vs {
		MOVOU(v, Mem{Base: dst, Disp: 16 * i})
	}
	ADDQ(imm(16*w), src)
	ADDQ(imm(16*w), dst)
	SUBQ(Imm(uint64(w)), blocks)
	if loop {
		JMP(LabelRef(label))
	}
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
	sseWhiten([]VecPhysical{X0}, ks, kt)
	sseXEX1(X0, first, X7, ks, kend, rounds, kt, dec)
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
	sseWhiten([]VecPhysical{X0}, ks, kt)
	sseXEX1(X0, second, X7, ks, kend, rounds, kt, dec)
	MOVOU(X0, Mem{Base: dst})
}
