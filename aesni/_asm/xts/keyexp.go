package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// keyExpansion emits the AES-NI key schedule builders; they mirror
// expandEncGeneric and invertScheduleGeneric in aes_generic.go.
func keyExpansion() {
	expand128()
	expand256()
	invertSchedule()
}

// prefixXOR sets w to (w0, w0^w1, w0^w1^w2, w0^w1^w2^w3) over its four
// 32-bit words: the running XOR of FIPS-197's key expansion recurrence.
func prefixXOR(w, tmp VecPhysical) {
	MOVOU(w, tmp)
	for i := 0; i < 3; i++ {
		PSLLDQ(Imm(4), tmp)
		PXOR(tmp, w)
	}
}

func expand128() {
	TEXT("expandKey128Asm", NOSPLIT, "func(key *[16]byte, enc *[240]byte)")
	Comment("AES-128 encryption schedule, 11 round keys.",
		"AX key, DI schedule; X0 the previous round key, X1 AESKEYGENASSIST's",
		"RotWord(SubWord(w3)) ^ rcon broadcast to all words, X2 scratch.",
		"Each step: X0 = prefixXOR(X0) ^ X1, stored as the next round key.")
	Load(Param("key"), RAX)
	Load(Param("enc"), RDI)
	MOVOU(Mem{Base: RAX}, X0)
	MOVOU(X0, Mem{Base: RDI})
	rcon := 1
	for i := 1; i <= 10; i++ {
		AESKEYGENASSIST(Imm(uint64(rcon)), X0, X1)
		PSHUFD(Imm(0xff), X1, X1)
		prefixXOR(X0, X2)
		PXOR(X1, X0)
		MOVOU(X0, Mem{Base: RDI, Disp: 16 * i})
		rcon = xtime(rcon)
	}
	RET()
}

func expand256() {
	TEXT("expandKey256Asm", NOSPLIT, "func(key *[32]byte, enc *[240]byte)")
	Comment("AES-256 encryption schedule, 15 round keys.",
		"AX key, DI schedule; X0 and X3 the last two round keys (even and odd),",
		"X1 AESKEYGENASSIST output, X2 scratch. Even keys use",
		"RotWord(SubWord(w3)) ^ rcon of the odd key before, odd keys SubWord(w3)",
		"of the even key before (FIPS-197 5.2, Nk = 8).")
	Load(Param("key"), RAX)
	Load(Param("enc"), RDI)
	MOVOU(Mem{Base: RAX}, X0)
	MOVOU(Mem{Base: RAX, Disp: 16}, X3)
	MOVOU(X0, Mem{Base: RDI})
	MOVOU(X3, Mem{Base: RDI, Disp: 16})
	rcon := 1
	for i := 1; i <= 7; i++ {
		AESKEYGENASSIST(Imm(uint64(rcon)), X3, X1)
		PSHUFD(Imm(0xff), X1, X1)
		prefixXOR(X0, X2)
		PXOR(X1, X0)
		MOVOU(X0, Mem{Base: RDI, Disp: 32 * i})
		rcon = xtime(rcon)
		if i == 7 {
			break
		}
		AESKEYGENASSIST(Imm(0), X0, X1)
		PSHUFD(Imm(0xaa), X1, X1)
		prefixXOR(X3, X2)
		PXOR(X1, X3)
		MOVOU(X3, Mem{Base: RDI, Disp: 32*i + 16})
	}
	RET()
}

func invertSchedule() {
	TEXT("invertScheduleAsm", NOSPLIT, "func(dec *[240]byte, enc *[240]byte, rounds int)")
	Comment("Decryption schedule for AESDEC (FIPS-197 5.3.5, equivalent inverse",
		"cipher): dec[0] = enc[rounds], dec[rounds] = enc[0], and",
		"dec[r] = InvMixColumns(enc[rounds-r]) in between.",
		"SI walks enc backwards, DI walks dec forwards, CX counts the",
		"rounds-1 inner keys; X0 carries one key per iteration.")
	Load(Param("dec"), RDI)
	Load(Param("enc"), RSI)
	Load(Param("rounds"), RCX)
	MOVQ(RCX, RDX)
	SHLQ(Imm(4), RDX)
	MOVOU(Mem{Base: RSI, Index: RDX, Scale: 1}, X0)
	MOVOU(X0, Mem{Base: RDI})
	MOVOU(Mem{Base: RSI}, X0)
	MOVOU(X0, Mem{Base: RDI, Index: RDX, Scale: 1})
	LEAQ(Mem{Base: RSI, Index: RDX, Scale: 1, Disp: -16}, RSI)
	ADDQ(Imm(16), RDI)
	DECQ(RCX)
	Label("invLoop")
	MOVOU(Mem{Base: RSI}, X0)
	AESIMC(X0, X0)
	MOVOU(X0, Mem{Base: RDI})
	SUBQ(Imm(16), RSI)
	ADDQ(Imm(16), RDI)
	DECQ(RCX)
	JNZ(LabelRef("invLoop"))
	RET()
}

// xtime multiplies b by x in GF(2^8) (the round-constant sequence).
func xtime(b int) int {
	b <<= 1
	if b&0x100 != 0 {
		b ^= 0x11b
	}
	return b
}
