//go:build amd64 && gc && !purego

// Raw-AES roofline loops (benchmarks only; see roofline.go). Each holds
// independent blocks in registers and applies one AES round to all of them
// per inner step, with the same round key, so nothing but the AES units
// limits the rate. The only memory access is the final store of block 0
// (the low lane of register 1) to out, which lets tests check the rounds.
//
// Registers: DI = out, AX = rounds (inner count), BX = iters (outer count),
// CX = rounds left in this iteration, X0/Y0/Z0 = round key,
// X1..X12 / Y1..Y12 / Z1..Z16 = the blocks (1, 2 or 4 per register).

#include "textflag.h"

// func rawAESRoundsXMM(out *[16]byte, rounds, iters int)
// Requires: AES
TEXT ·rawAESRoundsXMM(SB), NOSPLIT, $0-24
	MOVQ out+0(FP), DI
	MOVQ rounds+8(FP), AX
	MOVQ iters+16(FP), BX
	PXOR X0, X0
	PXOR X1, X1
	PXOR X2, X2
	PXOR X3, X3
	PXOR X4, X4
	PXOR X5, X5
	PXOR X6, X6
	PXOR X7, X7
	PXOR X8, X8
	PXOR X9, X9
	PXOR X10, X10
	PXOR X11, X11
	PXOR X12, X12
rawAESRoundsXMM_iter:
	MOVQ AX, CX
rawAESRoundsXMM_round:
	AESENC X0, X1
	AESENC X0, X2
	AESENC X0, X3
	AESENC X0, X4
	AESENC X0, X5
	AESENC X0, X6
	AESENC X0, X7
	AESENC X0, X8
	AESENC X0, X9
	AESENC X0, X10
	AESENC X0, X11
	AESENC X0, X12
	DECQ CX
	JNZ  rawAESRoundsXMM_round
	DECQ BX
	JNZ  rawAESRoundsXMM_iter
	MOVOU X1, (DI)
	RET

// func rawAESRoundsYMM(out *[16]byte, rounds, iters int)
// Requires: AVX, VAES
TEXT ·rawAESRoundsYMM(SB), NOSPLIT, $0-24
	MOVQ out+0(FP), DI
	MOVQ rounds+8(FP), AX
	MOVQ iters+16(FP), BX
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	VPXOR Y4, Y4, Y4
	VPXOR Y5, Y5, Y5
	VPXOR Y6, Y6, Y6
	VPXOR Y7, Y7, Y7
	VPXOR Y8, Y8, Y8
	VPXOR Y9, Y9, Y9
	VPXOR Y10, Y10, Y10
	VPXOR Y11, Y11, Y11
	VPXOR Y12, Y12, Y12
rawAESRoundsYMM_iter:
	MOVQ AX, CX
rawAESRoundsYMM_round:
	VAESENC Y0, Y1, Y1
	VAESENC Y0, Y2, Y2
	VAESENC Y0, Y3, Y3
	VAESENC Y0, Y4, Y4
	VAESENC Y0, Y5, Y5
	VAESENC Y0, Y6, Y6
	VAESENC Y0, Y7, Y7
	VAESENC Y0, Y8, Y8
	VAESENC Y0, Y9, Y9
	VAESENC Y0, Y10, Y10
	VAESENC Y0, Y11, Y11
	VAESENC Y0, Y12, Y12
	DECQ CX
	JNZ  rawAESRoundsYMM_round
	DECQ BX
	JNZ  rawAESRoundsYMM_iter
	VMOVDQU X1, (DI)
	VZEROUPPER
	RET

// func rawAESRoundsZMM(out *[16]byte, rounds, iters int)
// Requires: AVX512F, VAES
TEXT ·rawAESRoundsZMM(SB), NOSPLIT, $0-24
	MOVQ out+0(FP), DI
	MOVQ rounds+8(FP), AX
	MOVQ iters+16(FP), BX
	VPXORQ Z0, Z0, Z0
	VPXORQ Z1, Z1, Z1
	VPXORQ Z2, Z2, Z2
	VPXORQ Z3, Z3, Z3
	VPXORQ Z4, Z4, Z4
	VPXORQ Z5, Z5, Z5
	VPXORQ Z6, Z6, Z6
	VPXORQ Z7, Z7, Z7
	VPXORQ Z8, Z8, Z8
	VPXORQ Z9, Z9, Z9
	VPXORQ Z10, Z10, Z10
	VPXORQ Z11, Z11, Z11
	VPXORQ Z12, Z12, Z12
	VPXORQ Z13, Z13, Z13
	VPXORQ Z14, Z14, Z14
	VPXORQ Z15, Z15, Z15
	VPXORQ Z16, Z16, Z16
rawAESRoundsZMM_iter:
	MOVQ AX, CX
rawAESRoundsZMM_round:
	VAESENC Z0, Z1, Z1
	VAESENC Z0, Z2, Z2
	VAESENC Z0, Z3, Z3
	VAESENC Z0, Z4, Z4
	VAESENC Z0, Z5, Z5
	VAESENC Z0, Z6, Z6
	VAESENC Z0, Z7, Z7
	VAESENC Z0, Z8, Z8
	VAESENC Z0, Z9, Z9
	VAESENC Z0, Z10, Z10
	VAESENC Z0, Z11, Z11
	VAESENC Z0, Z12, Z12
	VAESENC Z0, Z13, Z13
	VAESENC Z0, Z14, Z14
	VAESENC Z0, Z15, Z15
	VAESENC Z0, Z16, Z16
	DECQ CX
	JNZ  rawAESRoundsZMM_round
	DECQ BX
	JNZ  rawAESRoundsZMM_iter
	VMOVDQU X1, (DI)
	VZEROUPPER
	RET

// func rawAESChainXMM(out *[16]byte, rounds, iters int)
// Requires: AES
// Latency, not throughput: one block in X1, every AESENC waiting for the
// one before (rounds per iteration, iters iterations), round key X0 = 0.
TEXT ·rawAESChainXMM(SB), NOSPLIT, $0-24
	MOVQ out+0(FP), DI
	MOVQ rounds+8(FP), AX
	MOVQ iters+16(FP), BX
	PXOR X0, X0
	PXOR X1, X1
rawAESChainXMM_iter:
	MOVQ AX, CX
rawAESChainXMM_round:
	AESENC X0, X1
	DECQ CX
	JNZ  rawAESChainXMM_round
	DECQ BX
	JNZ  rawAESChainXMM_iter
	MOVOU X1, (DI)
	RET

// func addChain(iters int) int
// The core clock's reference: 8 dependent one-cycle ADDs per iteration
// (AX), so iters*8 cycles; returns AX so the chain is not dead.
TEXT ·addChain(SB), NOSPLIT, $0-16
	MOVQ iters+0(FP), CX
	XORQ AX, AX
addChain_loop:
	ADDQ $1, AX
	ADDQ $1, AX
	ADDQ $1, AX
	ADDQ $1, AX
	ADDQ $1, AX
	ADDQ $1, AX
	ADDQ $1, AX
	ADDQ $1, AX
	DECQ CX
	JNZ  addChain_loop
	MOVQ AX, ret+8(FP)
	RET
