// Command xts generates ../../xts_amd64.s: AES key expansion and the XTS
// kernels of package aesni (AES-NI 1-, 4- and 8-way on xmm, VAES on ymm and
// zmm), all from the builders in this directory.
//
// The kernels follow aesni/xts_generic.go section by section: encrypt the
// tweak with key2, then XEX every whole block (C = E_K1(P ^ T) ^ T, with T
// multiplied by x after each block), then ciphertext stealing over the last
// whole block and the partial one.
//
// avo v0.5.0 (the newest release) has no forms for VAES and VPCLMULQDQ on
// ymm and zmm registers, nor for their EVEX xmm forms on X16-X31; raw()
// emits those few opcodes as plain instructions. All registers here are
// physical and named after their role, so avo's register allocator is not
// involved and raw instructions cannot confuse it.
package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/ir"
	. "github.com/mmcloughlin/avo/operand"
)

//go:generate go run . -out ../../xts_amd64.s -pkg aesni

func main() {
	ConstraintExpr("amd64,gc,!purego")
	tables()
	keyExpansion()
	for _, dec := range []bool{false, true} {
		for _, ways := range []int{1, 4, 8} {
			sseKernel(ways, dec)
		}
		vaesKernel(ymm, dec)
		vaesKernel(zmm, dec)
		vaesKernel(zmmC, dec)
		vaesSectors(zmm, dec)
		vaesSectors(zmmC, dec)
		vaesSectors(ymm, dec)
	}
	Generate()
}

// raw emits an instruction avo has no form for; operands are in Go
// assembler order, the last one is the destination.
func raw(isa []string, op string, ops ...Op) {
	Instruction(&ir.Instruction{
		Opcode:   op,
		Operands: ops,
		Inputs:   ops[:len(ops)-1],
		Outputs:  ops[len(ops)-1:],
		ISA:      isa,
	})
}

// pcalign pads to the next multiple of n bytes (the Go assembler's
// PCALIGN), at a label that only jumps reach, so no padding runs.
func pcalign(n uint64) {
	Instruction(&ir.Instruction{Opcode: "PCALIGN", Operands: []Op{Imm(n)}})
}

var labelCount int

// newLabel returns a fresh label name; builders emit the same code shape
// several times per function.
func newLabel(what string) string {
	labelCount++
	return fmt.Sprintf("%s%d", what, labelCount)
}

// Signature shared by the single-data-unit kernels. ks is key1's encryption
// schedule (or its decryption schedule for the decrypting kernels), tk is
// key2's encryption schedule; n >= 16 is the data-unit length.
const unitSig = "func(ks *[240]byte, tk *[240]byte, rounds int, dst *byte, src *byte, n int, tweak *[16]byte)"

// Signature of the multi-sector kernels: n/unit consecutive data units,
// unit a multiple of 16, unit i with the plain64 tweak of sector + i*step.
const sectorsSig = "func(ks *[240]byte, tk *[240]byte, rounds int, dst *byte, src *byte, n int, unit int, sector uint64, step uint64)"

var (
	ctsShuffle Mem // 48 bytes: 0x80 x16, 0..15, 0x80 x16 (PSHUFB windows for stealing)
	gfMulX     Mem // dwords 0x87, 0, 1, 0: carries of a multiplication by x
	gfPoly     Mem // qwords 0x87, 0: x^128 mod the XTS polynomial, for PCLMULQDQ
	laneShiftL Mem // qwords 0,0,1,1,...,19,19: lane j of the tweak vectors is T*x^j
	laneShiftR Mem // qwords 64,64,63,63,...,45,45: the bits those shifts carry out
)

func tables() {
	ctsShuffle = GLOBL("ctsShuffle", RODATA|NOPTR)
	for i := 0; i < 48; i++ {
		b := byte(0x80)
		if i >= 16 && i < 32 {
			b = byte(i - 16)
		}
		DATA(i, U8(b))
	}
	gfMulX = GLOBL("gfMulX", RODATA|NOPTR)
	DATA(0, U32(0x87))
	DATA(4, U32(0))
	DATA(8, U32(1))
	DATA(12, U32(0))
	gfPoly = GLOBL("gfPoly", RODATA|NOPTR)
	DATA(0, U64(0x87))
	DATA(8, U64(0))
	laneShiftL = GLOBL("laneShiftL", RODATA|NOPTR)
	for j := 0; j < 20; j++ {
		DATA(16*j, U64(uint64(j)))
		DATA(16*j+8, U64(uint64(j)))
	}
	laneShiftR = GLOBL("laneShiftR", RODATA|NOPTR)
	for j := 0; j < 20; j++ {
		DATA(16*j, U64(uint64(64-j)))
		DATA(16*j+8, U64(uint64(64-j)))
	}
}

// imm returns an immediate operand for n that the 8- or 32-bit forms of
// the integer instructions accept.
func imm(n int) Op {
	if n < 128 {
		return Imm(uint64(n))
	}
	return U32(uint32(n))
}
