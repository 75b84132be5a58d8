//go:build amd64 && gc && !purego

#include "textflag.h"

// func cpuid(leaf uint32) (eax, ebx, ecx, edx uint32)
// Registers: AX = leaf in, CX = subleaf 0; results in AX, BX, CX, DX.
TEXT ·cpuid(SB), NOSPLIT, $0-24
	MOVL leaf+0(FP), AX
	XORL CX, CX
	CPUID
	MOVL AX, eax+8(FP)
	MOVL BX, ebx+12(FP)
	MOVL CX, ecx+16(FP)
	MOVL DX, edx+20(FP)
	RET
