// Command cpuid generates ../../cpuid_amd64.s: the raw CPUID and XGETBV
// probes aesni uses to find VAES and VPCLMULQDQ on ymm, which
// golang.org/x/sys/cpu reports only together with AVX-512.
package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

//go:generate go run . -out ../../cpuid_amd64.s -pkg aesni

func main() {
	ConstraintExpr("amd64,gc,!purego")

	TEXT("cpuid", NOSPLIT, "func(leaf, subleaf uint32) (eax, ebx, ecx, edx uint32)")
	Doc("cpuid executes CPUID with EAX = leaf and ECX = subleaf.",
		"Registers: only the four CPUID outputs; no loop.")
	Load(Param("leaf"), EAX)
	Load(Param("subleaf"), ECX)
	CPUID()
	Store(EAX, Return("eax"))
	Store(EBX, Return("ebx"))
	Store(ECX, Return("ecx"))
	Store(EDX, Return("edx"))
	RET()

	TEXT("xgetbv", NOSPLIT, "func() (eax, edx uint32)")
	Doc("xgetbv reads XCR0 (the register-state components the OS saves),",
		"which decides whether ymm and zmm state may be used at all.",
		"Callers must first check CPUID.1:ECX.OSXSAVE[bit 27].")
	XORL(ECX, ECX)
	XGETBV()
	Store(EAX, Return("eax"))
	Store(EDX, Return("edx"))
	RET()

	Generate()
}

var _ = Imm
