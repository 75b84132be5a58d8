// Command cpuid generates ../cpuid_amd64.s: the raw CPUID and XGETBV
// instructions behind package cpuid.
package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

//go:generate go run . -out ../cpuid_amd64.s -pkg cpuid

func main() {
	ConstraintExpr("amd64,gc,!purego")

	TEXT("CPUID", NOSPLIT, "func(leaf, subleaf uint32) (eax, ebx, ecx, edx uint32)")
	Comment("CPUID with EAX = leaf, ECX = subleaf; returns EAX, EBX, ECX, EDX.",
		"No loop; only those four registers are used.")
	Load(Param("leaf"), EAX)
	Load(Param("subleaf"), ECX)
	CPUID()
	Store(EAX, Return("eax"))
	Store(EBX, Return("ebx"))
	Store(ECX, Return("ecx"))
	Store(EDX, Return("edx"))
	RET()

	TEXT("XGETBV", NOSPLIT, "func() (eax, edx uint32)")
	Comment("XGETBV with ECX = 0 reads XCR0 (the register state the OS saves:",
		"bits 1-2 SSE/AVX, 5-7 AVX-512) into EDX:EAX. Callers first check",
		"CPUID.1:ECX.OSXSAVE[bit 27]. No loop.")
	XORL(ECX, ECX)
	XGETBV()
	Store(EAX, Return("eax"))
	Store(EDX, Return("edx"))
	RET()

	Generate()
}

var _ = Imm
