// Command _asm generates blake2b_amd64.s: the BLAKE2b compression function
// in general-purpose registers and for AVX2 and AVX-512, and the multi-lane
// kernels that hash 4, 8 or 16 messages side by side. Run it with
// `go generate` in this directory.
//
// With -study it emits, for the study module in ../_study, the kernels
// dispatch uses and next to each its other shape (rolled where the shipped
// one is unrolled, and the reverse): the rolled-vs-unrolled study in
// BENCHMARKS.md. The shipped file carries only what dispatch can pick.
//
// Every kernel mirrors compressGeneric in ../blake2b_generic.go: the same
// G, the same rounds, the same message schedule (sigma), with the vector
// layout being the only difference.
//
// Unlike x/crypto's generators this one does not import the package it
// generates for: the signatures are spelled out below with plain types. An
// import would tie this module's go.mod to the whole xtsctl module graph, and
// it would need updating every time the root go.mod changes. go vet's
// asmdecl check still compares the .s with the Go declarations.
package main

import (
	"flag"
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

//go:generate go run . -out ../blake2b_amd64.s -pkg blake2b
//go:generate go run . -study -out ../_study/blake2b_amd64.s -pkg study

var study = flag.Bool("study", false, "also emit the study variants (for ../_study)")

// sigma is RFC 7693's message schedule, one row per round (rounds 10 and 11
// repeat rounds 0 and 1), as in blake2b_generic.go.
var sigma = [12][16]int{
	{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
	{14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
	{11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4},
	{7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8},
	{9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13},
	{2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9},
	{12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11},
	{13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10},
	{6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5},
	{10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0},
	{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
	{14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
}

var iv = [8]uint64{
	0x6a09e667f3bcc908, 0xbb67ae8584caa73b, 0x3c6ef372fe94f82b, 0xa54ff53a5f1d36f1,
	0x510e527fade682d1, 0x9b05688c2b3e6c1f, 0x1f83d9abfb41bd6b, 0x5be0cd19137e2179,
}

var (
	xs = []VecPhysical{X0, X1, X2, X3, X4, X5, X6, X7, X8, X9, X10, X11, X12, X13, X14, X15,
		X16, X17, X18, X19, X20, X21, X22, X23, X24, X25, X26, X27, X28, X29, X30, X31}
	ys = []VecPhysical{Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7, Y8, Y9, Y10, Y11, Y12, Y13, Y14, Y15,
		Y16, Y17, Y18, Y19, Y20, Y21, Y22, Y23, Y24, Y25, Y26, Y27, Y28, Y29, Y30, Y31}
	zs = []VecPhysical{Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7, Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15,
		Z16, Z17, Z18, Z19, Z20, Z21, Z22, Z23, Z24, Z25, Z26, Z27, Z28, Z29, Z30, Z31}
)

// Read-only tables.
var (
	ivMem     Mem // the 8 IV words
	rot24Mask Mem // VPSHUFB control rotating each qword right by 24 bits
	rot16Mask Mem // ... by 16 bits
	rowSched  Mem // compressAVX512Gather (study): per round, 4 groups of 8 message indices (bytes)
	laneSched Mem // lane kernels, rolled: per round, 16 message indices times 8 (bytes)
)

func main() {
	flag.Parse() // before Generate, which would parse it too: -study decides what to emit
	ConstraintExpr("amd64,gc,!purego")
	tables()

	// The compression functions are dispatched unrolled, the lane kernels
	// rolled: rolled, they run as fast as unrolled at a fifth of the size
	// (BENCHMARKS.md).
	compressScalar()
	if *study {
		compressScalarRolled()
	}
	compress("compressAVX2", false, false)
	if *study {
		compress("compressAVX2Rolled", false, true)
	}
	compress("compressAVX512", true, false)
	if *study {
		compress("compressAVX512Rolled", true, true)
		gather = true
		compress("compressAVX512Gather", true, false)
		gather = false
	}
	lanes("hashLanes4AVX2", 4, false, true)
	if *study {
		lanes("hashLanes4AVX2Unrolled", 4, false, false)
	}
	lanes("hashLanes4AVX512", 4, true, true)
	lanes("hashLanes8AVX512", 8, true, true)
	if *study {
		lanes("hashLanes8AVX512Unrolled", 8, true, false)
	}
	lanes16("hashLanes16AVX512", true)
	if *study {
		lanes16("hashLanes16AVX512Unrolled", false)
	}

	Generate()
}

func tables() {
	ivMem = GLOBL("iv", RODATA|NOPTR)
	for i, w := range iv {
		DATA(8*i, U64(w))
	}

	// Byte i of a rotated qword is byte (i+n/8) mod 8 of the input.
	mask := func(name string, bytes int) Mem {
		m := GLOBL(name, RODATA|NOPTR)
		for i := range 32 {
			DATA(i, U8(i&^7|(i+bytes)&7))
		}
		return m
	}
	rot24Mask = mask("rot24", 3)
	rot16Mask = mask("rot16", 2)

	// The rolled lane kernels index the transposed message with
	// (SP)(reg*scale); the table holds 8*index so one byte covers 0..120.
	laneSched = GLOBL("laneSched", RODATA|NOPTR)
	for r, s := range sigma {
		for i, m := range s {
			DATA(16*r+i, U8(8*m))
		}
	}
	if !*study {
		return
	}
	// The row-parallel compress holds v0..v3 in one register, v4..v7 in the
	// next, and so on. Per round it gathers 4 message vectors: the x and y
	// inputs of the 4 column G's, then of the 4 diagonal G's, in the lane
	// order diagonalize leaves the rows in (see compress).
	rowSched = GLOBL("rowSched", RODATA|NOPTR)
	for r, s := range sigma {
		groups := [4][4]int{
			{s[0], s[2], s[4], s[6]},
			{s[1], s[3], s[5], s[7]},
			{s[14], s[8], s[10], s[12]},
			{s[15], s[9], s[11], s[13]},
		}
		for g, idx := range groups {
			for k, m := range idx {
				DATA(32*r+8*g+k, U8(m))
			}
			for k := 4; k < 8; k++ { // unused upper lanes
				DATA(32*r+8*g+k, U8(0))
			}
		}
	}

}

// schedule hands out the operands that depend on the round: unrolled code
// has them as constants, rolled code reads them from a table through a
// pointer register that advances once per round.
type schedule struct {
	rolled bool
	round  int      // unrolled: the round being emitted
	ptr    Register // rolled: current row of the table
	tmp    []Register
	next   int
}

func (s *schedule) gpr() Register {
	r := s.tmp[s.next%len(s.tmp)]
	s.next++
	return r
}

// rounds emits the 12 rounds: unrolled, 12 copies of body; rolled, a loop
// around one copy, the schedule pointer stepping by stride bytes.
func rounds(s *schedule, table Mem, stride int, body func()) {
	if !s.rolled {
		for r := range sigma {
			Commentf("Round %d", r)
			s.round = r
			body()
		}
		return
	}
	counter := GP64()
	LEAQ(table, s.ptr)
	MOVQ(U32(len(sigma)), counter)
	label := fmt.Sprintf("rounds%d", labelSeq)
	labelSeq++
	Label(label)
	body()
	ADDQ(U32(stride), s.ptr)
	DECQ(counter)
	JNZ(LabelRef(label))
}

var labelSeq int

// rotate emits x = x >>> n (a right rotation of each qword) with
// VPRORQ, or with AVX2 shuffles; rot63 via shift and add needs tmp.
func rotate(x Register, n int, avx512 bool, tmp Register) {
	if avx512 {
		VPRORQ(U8(n), x, x)
		return
	}
	switch n {
	case 32:
		VPSHUFD(U8(0xb1), x, x)
	case 24:
		VPSHUFB(rot24Mask, x, x)
	case 16:
		VPSHUFB(rot16Mask, x, x)
	case 63:
		VPSRLQ(U8(63), x, tmp)
		VPADDQ(x, x, x)
		VPOR(tmp, x, x)
	}
}

// compress emits func(h *[8]uint64, c *[2]uint64, flag uint64, blocks []byte),
// the row-parallel compression function: each ymm register holds one row
// of the 4x4 state, so one instruction does a step of 4 G's.
// gather makes compress load the message as its first AVX-512 form did
// (study module only): the block in Z16, Z17 and each group's words
// gathered by VPERMI2Q. On an Intel Xeon (family 6 model 207) that ran
// 13% slower than loading two qwords into each half, as the AVX2 form
// does: a zmm register in use takes port 1 from the vector units there.
var gather bool

func compress(name string, avx512, rolled bool) {
	TEXT(name, NOSPLIT, "func(h *[8]uint64, c *[2]uint64, flag uint64, blocks []byte)")
	requires := "AVX, AVX2"
	if avx512 {
		requires = "AVX, AVX2, AVX512F, AVX512VL"
	}
	Comment(fmt.Sprintf("%s hashes len(blocks)/128 whole blocks into h, adding 128 to the", name),
		"128-bit counter c before each and using flag as f0.",
		"Dispatch requires "+requires+" (the Requires line lists what this code uses).")
	msgHow := "two qwords loaded into each half"
	if gather {
		msgHow = "gathered by VPERMI2Q from the block in Z16, Z17"
	}
	Comment(
		"Registers: Y0..Y3 = state rows a (v0..v3), b (v4..v7), c (v8..v11), d (v12..v15);",
		"Y4, Y5 = h; Y6, Y7 = IV; Y8 = (t0, t1, f0, 0); X9 = (f0, 0); Y10..Y13 = the",
		"round's message vectors ("+msgHow+"); Y14 scratch.",
		"Per iteration: one block, 12 rounds of 4 G steps (columns, then diagonals: a, c",
		"and d rotate across lanes while b stays, keeping the permutes off b's chain).",
		"AVX-512 differs from AVX2 in VPRORQ for the rotations and VPTERNLOGQ for the",
		"final XOR.",
	)
	a, b, c, d := Y0, Y1, Y2, Y3
	hLo, hHi, ivLo, ivHi, tf := Y4, Y5, Y6, Y7, Y8
	msg := []VecPhysical{Y10, Y11, Y12, Y13}
	tmp := Y14

	hp := Load(Param("h"), GP64())
	cp := Load(Param("c"), GP64())
	flag := Load(Param("flag"), GP64())
	base := Load(Param("blocks").Base(), GP64())
	n := Load(Param("blocks").Len(), GP64())
	SHRQ(U8(7), n)
	JZ(LabelRef(name + "_done"))

	t0, t1 := GP64(), GP64()
	MOVQ(Mem{Base: cp}, t0)
	MOVQ(Mem{Base: cp, Disp: 8}, t1)
	VMOVDQU(Mem{Base: hp}, hLo)
	VMOVDQU(Mem{Base: hp, Disp: 32}, hHi)
	VMOVDQU(ivMem, ivLo)
	VMOVDQU(ivMem.Offset(32), ivHi)
	VMOVQ(flag, X9)

	sched := &schedule{rolled: rolled, ptr: GP64()}
	if !gather {
		sched.tmp = []Register{GP64(), GP64(), GP64(), GP64()}
	}

	Label(name + "_loop")
	ADDQ(U32(128), t0)
	ADCQ(U32(0), t1)
	VMOVQ(t0, X8)
	VPINSRQ(U8(1), t1, X8, X8)
	VINSERTI128(U8(1), X9, tf, tf)
	VMOVDQA(hLo, a)
	VMOVDQA(hHi, b)
	VMOVDQA(ivLo, c)
	VPXOR(tf, ivHi, d)
	if gather {
		VMOVDQU64(Mem{Base: base}, Z16)
		VMOVDQU64(Mem{Base: base, Disp: 64}, Z17)
	}

	// loadMsg fills msg[g] with message words for group g of the round.
	loadMsg := func(g int) {
		if gather {
			src := rowSched.Offset(32*sched.round + 8*g)
			if rolled {
				src = Mem{Base: sched.ptr, Disp: 8 * g}
			}
			VPMOVZXBQ(src, msg[g].AsZ())
			VPERMI2Q(Z17, Z16, msg[g].AsZ())
			return
		}
		// Two qwords into each half, then join the halves.
		var idx [4]int
		s := sigma[sched.round]
		switch g {
		case 0:
			idx = [4]int{0, 2, 4, 6}
		case 1:
			idx = [4]int{1, 3, 5, 7}
		case 2:
			idx = [4]int{14, 8, 10, 12}
		case 3:
			idx = [4]int{15, 9, 11, 13}
		}
		word := func(k int) Mem {
			if !rolled {
				return Mem{Base: base, Disp: 8 * s[idx[k]]}
			}
			r := sched.gpr()
			MOVBQZX(Mem{Base: sched.ptr, Disp: idx[k]}, r)
			return Mem{Base: base, Index: r, Scale: 1}
		}
		lo, hi := msg[g].AsX(), X15
		VMOVQ(word(0), lo)
		VPINSRQ(U8(1), word(1), lo, lo)
		VMOVQ(word(2), hi)
		VPINSRQ(U8(1), word(3), hi, hi)
		VINSERTI128(U8(1), hi, msg[g], msg[g])
	}

	half := func(m VecPhysical, r1, r2 int) {
		VPADDQ(m, a, a)
		VPADDQ(b, a, a)
		VPXOR(a, d, d)
		rotate(d, r1, avx512, tmp)
		VPADDQ(d, c, c)
		VPXOR(c, b, b)
		rotate(b, r2, avx512, tmp)
	}
	table, stride := laneSched, 16 // byte offsets of the words: 8*index
	if gather {
		table, stride = rowSched, 32
	}
	rounds(sched, table, stride, func() {
		for g := range 4 {
			loadMsg(g)
		}
		half(msg[0], 32, 24)
		half(msg[1], 16, 63)
		Comment("Diagonalize: lane k of b is v(4+k); bring a, c, d to match.")
		VPERMQ(U8(0x93), a, a)
		VPERMQ(U8(0x39), c, c)
		VPERMQ(U8(0x4e), d, d)
		half(msg[2], 32, 24)
		half(msg[3], 16, 63)
		VPERMQ(U8(0x39), a, a)
		VPERMQ(U8(0x93), c, c)
		VPERMQ(U8(0x4e), d, d)
	})

	Comment("h ^= v[0..7] ^ v[8..15]")
	if avx512 {
		VPTERNLOGQ(U8(0x96), c, a, hLo)
		VPTERNLOGQ(U8(0x96), d, b, hHi)
	} else {
		VPXOR(c, a, a)
		VPXOR(a, hLo, hLo)
		VPXOR(d, b, b)
		VPXOR(b, hHi, hHi)
	}
	ADDQ(U32(128), base)
	DECQ(n)
	JNZ(LabelRef(name + "_loop"))

	VMOVDQU(hLo, Mem{Base: hp})
	VMOVDQU(hHi, Mem{Base: hp, Disp: 32})
	MOVQ(t0, Mem{Base: cp})
	MOVQ(t1, Mem{Base: cp, Disp: 8})
	VZEROUPPER()
	Label(name + "_done")
	RET()
}

// The lane kernels share laneState and the pointer array of sectors.go:
// h is 8 rows of maxLanes words, row k holding word k of every lane.
const (
	maxLanes       = 16
	laneRowBytes   = 8 * maxLanes
	lanesSignature = "func(h *[128]uint64, ptr *[16]*byte, blocks int, t uint64, flag uint64)"
)

// lanes emits func(h *laneState, ptr *[maxLanes]*byte, blocks int, t uint64, flag uint64):
// width messages hashed side by side, one per 64-bit lane of a ymm (width
// 4) or zmm (width 8) register. The state is transposed: register k holds
// word k of every lane, so the G steps are the scalar code, vectorised
// across messages, with no diagonal permutes.
func lanes(name string, width int, avx512, rolled bool) {
	vecBytes := 8 * width
	TEXT(name, 0, lanesSignature)
	requires := "AVX, AVX2"
	if avx512 {
		requires = "AVX, AVX2, AVX512F, AVX512VL"
	}
	Comment(fmt.Sprintf("%s hashes blocks blocks of %d messages at once. Block b of lane j", name, width),
		"is the 128 bytes at ptr[j]+128*b; its counter is t+128*b and its f0 is flag",
		"(callers pass a non-zero flag only with one block). h[k][j] is word k of lane",
		fmt.Sprintf("j's chaining value; only lanes 0..%d are read and written.", width-1),
		"Dispatch requires "+requires+" (the Requires line lists what this code uses).")

	vec := func(i int) VecPhysical {
		if width == 8 {
			return zs[i]
		}
		return ys[i]
	}
	v := make([]VecPhysical, 16)
	for i := range v {
		v[i] = vec(i)
	}
	rn := map[int]string{4: "Y", 8: "Z"}[width]
	Comment(
		fmt.Sprintf("Registers: v0..v15 in %s0..%s15, register k holding word k of every lane.", rn, rn),
		"Per iteration: transpose one block of each lane onto the stack (message word m",
		fmt.Sprintf("of every lane at msg+%d*m), 12 rounds of 8 G's done 4 at a time with the", vecBytes),
		"message as memory operands, then the feed-forward into h.",
	)
	// AVX-512 keeps h in registers 16..23 across blocks and constants in
	// 24..26; AVX2 has only 16 registers, all taken by v, so it works on h
	// in memory and spills c0 to rotate by 63.
	var hreg []VecPhysical
	var ivT4, ivF6, tvec VecPhysical
	if avx512 {
		for k := range 8 {
			hreg = append(hreg, vec(16+k))
		}
		ivT4, ivF6, tvec = vec(24), vec(25), vec(26)
		Comment(fmt.Sprintf("%s16..%s23 = h; %s24 = IV[4]; %s25 = IV[6]^flag; %s26 = t.", rn, rn, rn, rn, rn))
	} else {
		Comment("h stays in memory; rotating by 63 borrows c0's register (spilled).")
	}

	local := AllocLocal(16*vecBytes + 64)
	msgArea := local
	tSlot := local.Offset(16 * vecBytes)
	flagSlot := tSlot.Offset(8)
	spillSlot := tSlot.Offset(32)

	hp := Load(Param("h"), GP64())
	pp := Load(Param("ptr"), GP64())
	n := Load(Param("blocks"), GP64())
	t := Load(Param("t"), GP64())
	flag := Load(Param("flag"), GP64())
	off := GP64()
	XORQ(off, off)
	TESTQ(n, n)
	JZ(LabelRef(name + "_done"))

	hRow := func(k int) Mem { return Mem{Base: hp, Disp: laneRowBytes * k} }
	xor := func(a, b, dst Op) {
		if avx512 {
			VPXORQ(a, b, dst)
		} else {
			VPXOR(a, b, dst)
		}
	}
	if avx512 {
		for k := range 8 {
			VMOVDQU64(hRow(k), hreg[k])
		}
		VPBROADCASTQ(flag, ivF6)
		VPXORQ_BCST(ivMem.Offset(48), ivF6, ivF6)
		VPBROADCASTQ(ivMem.Offset(32), ivT4)
	} else {
		MOVQ(flag, flagSlot)
	}

	Label(name + "_loop")
	Comment("Transpose this block of every lane into msg.")
	p0, p1 := GP64(), GP64()
	laneAddr := func(j, disp int) Mem {
		p := p0
		if j%2 == 1 {
			p = p1
		}
		MOVQ(Mem{Base: pp, Disp: 8 * j}, p)
		return Mem{Base: p, Index: off, Scale: 1, Disp: disp}
	}
	if width == 8 {
		for q := range 2 { // words 8q..8q+7
			for j := range 8 {
				VMOVDQU64(laneAddr(j, 64*q), v[j])
			}
			transpose8(v[0:8], v[8:16])
			for k := range 8 {
				VMOVDQU64(v[8+k], msgArea.Offset(vecBytes*(8*q+k)))
			}
		}
	} else {
		for q := range 4 { // words 4q..4q+3
			for j := range 4 {
				VMOVDQU(laneAddr(j, 32*q), v[j])
			}
			transpose4(v[0:4], v[4:8])
			for k := range 4 {
				VMOVDQU(v[k], msgArea.Offset(vecBytes*(4*q+k)))
			}
		}
	}

	Comment("v[0..7] = h; v[8..15] = IV ^ (0, 0, 0, 0, t, 0, flag, 0)")
	if avx512 {
		VPBROADCASTQ(t, tvec)
		VPXORQ(tvec, ivT4, v[12])
		VMOVDQA64(ivF6, v[14])
		for k := range 8 {
			VMOVDQA64(hreg[k], v[k])
		}
	} else {
		MOVQ(t, tSlot)
		VPBROADCASTQ(tSlot, v[13])
		VPBROADCASTQ(ivMem.Offset(32), v[12])
		VPXOR(v[13], v[12], v[12])
		VPBROADCASTQ(flagSlot, v[15])
		VPBROADCASTQ(ivMem.Offset(48), v[14])
		VPXOR(v[15], v[14], v[14])
		for k := range 8 {
			VMOVDQU(hRow(k), v[k])
		}
	}
	for _, k := range []int{8, 9, 10, 11, 13, 15} {
		VPBROADCASTQ(ivMem.Offset(8*(k-8)), v[k])
	}

	sched := &schedule{rolled: rolled, ptr: GP64()}
	if rolled {
		sched.tmp = []Register{GP64(), GP64(), GP64(), GP64()}
	}
	msgOp := func(i int) Mem {
		if !rolled {
			return msgArea.Offset(vecBytes * sigma[sched.round][i])
		}
		r := sched.gpr()
		MOVBQZX(Mem{Base: sched.ptr, Disp: i}, r)
		return msgArea.Idx(r, uint8(width))
	}
	// step does the x or y half of 4 independent G's, interleaved.
	step := func(gs [4][4]int, first int, r1, r2 int) {
		for i, g := range gs {
			VPADDQ(msgOp(first+2*i), v[g[0]], v[g[0]])
		}
		for _, g := range gs {
			VPADDQ(v[g[1]], v[g[0]], v[g[0]])
		}
		for _, g := range gs {
			xor(v[g[0]], v[g[3]], v[g[3]])
		}
		for _, g := range gs {
			rotate(v[g[3]], r1, avx512, nil)
		}
		for _, g := range gs {
			VPADDQ(v[g[3]], v[g[2]], v[g[2]])
		}
		for _, g := range gs {
			xor(v[g[2]], v[g[1]], v[g[1]])
		}
		if avx512 || r2 != 63 {
			for _, g := range gs {
				rotate(v[g[1]], r2, avx512, nil)
			}
			return
		}
		tmp := v[gs[0][2]]
		VMOVDQU(tmp, spillSlot)
		for _, g := range gs {
			rotate(v[g[1]], 63, false, tmp)
		}
		VMOVDQU(spillSlot, tmp)
	}
	columns := [4][4]int{{0, 4, 8, 12}, {1, 5, 9, 13}, {2, 6, 10, 14}, {3, 7, 11, 15}}
	diagonals := [4][4]int{{0, 5, 10, 15}, {1, 6, 11, 12}, {2, 7, 8, 13}, {3, 4, 9, 14}}
	rounds(sched, laneSched, 16, func() {
		step(columns, 0, 32, 24)
		step(columns, 1, 16, 63)
		step(diagonals, 8, 32, 24)
		step(diagonals, 9, 16, 63)
	})

	Comment("h ^= v[0..7] ^ v[8..15]")
	for k := range 8 {
		if avx512 {
			VPTERNLOGQ(U8(0x96), v[k+8], v[k], hreg[k])
		} else {
			VPXOR(v[k+8], v[k], v[k])
			VPXOR(hRow(k), v[k], v[k])
			VMOVDQU(v[k], hRow(k))
		}
	}
	ADDQ(U32(128), t)
	ADDQ(U32(128), off)
	DECQ(n)
	JNZ(LabelRef(name + "_loop"))

	if avx512 {
		for k := range 8 {
			VMOVDQU64(hreg[k], hRow(k))
		}
	}
	VZEROUPPER()
	Label(name + "_done")
	RET()
}

// lanes16 emits hashLanes16AVX512 (same signature as lanes): 16 messages as
// two independent groups of 8 zmm lanes, interleaved instruction by
// instruction. On Zen 5 a vector add, xor or rotate takes 2 cycles, and one
// 8-lane group has only 4 independent G chains per step: it is bound by
// latency, with issue slots to spare. A second group fills them. Its 16
// state registers take the other half of the register file, so everything
// else lives in memory: the message words are memory operands (the
// transposed block of both groups sits on the stack, 64-byte aligned so no
// operand splits a cache line), h is read from and written back to the
// caller's rows once per block, and rotations are VPRORQ in place.
func lanes16(name string, rolled bool) {
	const groupMsg = 16 * 64 // bytes of one group's transposed block
	TEXT(name, 0, lanesSignature)
	Comment(name+" hashes blocks blocks of 16 messages at once. Block b of lane j",
		"is the 128 bytes at ptr[j]+128*b; its counter is t+128*b and its f0 is flag",
		"(callers pass a non-zero flag only with one block). h[k][j] is word k of lane",
		"j's chaining value.",
		"Dispatch requires AVX, AVX2, AVX512F, AVX512VL (the Requires line lists what this code uses).")
	Comment(
		"Registers: group 0 (lanes 0..7) has v0..v15 in Z0..Z15, group 1 (lanes 8..15)",
		"in Z16..Z31, register k of a group holding word k of its 8 lanes. No vector",
		"register is left: h, IV and the message are memory operands.",
		"Per iteration: transpose one block of each lane onto the stack (word m of group",
		"g at msg+1024*g+64*m), set up v, 12 rounds of 8 G's per group, each step",
		"doing 4 G's of both groups interleaved, then h ^= v[0..7] ^ v[8..15] in memory.",
	)
	var v [2][16]VecPhysical
	for g := range 2 {
		for k := range 16 {
			v[g][k] = zs[16*g+k]
		}
	}

	local := AllocLocal(2*groupMsg + 64)
	hp := Load(Param("h"), GP64())
	pp := Load(Param("ptr"), GP64())
	n := Load(Param("blocks"), GP64())
	t := Load(Param("t"), GP64())
	flag := Load(Param("flag"), GP64())
	TESTQ(n, n)
	JZ(LabelRef(name + "_done"))
	msg := GP64()
	LEAQ(local.Offset(63), msg)
	ANDQ(I32(-64), msg)
	off := GP64()
	XORQ(off, off)

	hRow := func(g, k int) Mem { return Mem{Base: hp, Disp: laneRowBytes*k + 64*g} }

	Label(name + "_loop")
	Comment("Transpose this block of every lane into msg.")
	p0, p1 := GP64(), GP64()
	for g := range 2 {
		for q := range 2 { // words 8q..8q+7
			rows, cols := zs[16*g:16*g+8], zs[16*g+8:16*g+16]
			for j := range 8 {
				p := p0
				if j%2 == 1 {
					p = p1
				}
				MOVQ(Mem{Base: pp, Disp: 8 * (8*g + j)}, p)
				VMOVDQU64(Mem{Base: p, Index: off, Scale: 1, Disp: 64 * q}, rows[j])
			}
			transpose8(rows, cols)
			for k := range 8 {
				VMOVDQU64(cols[k], Mem{Base: msg, Disp: groupMsg*g + 64*(8*q+k)})
			}
		}
	}

	Comment("v[0..7] = h; v[8..15] = IV ^ (0, 0, 0, 0, t, 0, flag, 0)")
	for g := range 2 {
		VPBROADCASTQ(t, v[g][12])
		VPXORQ_BCST(ivMem.Offset(32), v[g][12], v[g][12])
		VPBROADCASTQ(flag, v[g][14])
		VPXORQ_BCST(ivMem.Offset(48), v[g][14], v[g][14])
		for _, k := range []int{8, 9, 10, 11, 13, 15} {
			VPBROADCASTQ(ivMem.Offset(8*(k-8)), v[g][k])
		}
		for k := range 8 {
			VMOVDQU64(hRow(g, k), v[g][k])
		}
	}

	sched := &schedule{rolled: rolled, ptr: GP64()}
	if rolled {
		sched.tmp = []Register{GP64(), GP64(), GP64(), GP64()}
	}
	// msgOps returns message word sigma[round][i] of each group.
	msgOps := func(i int) [2]Mem {
		if !rolled {
			m := sigma[sched.round][i]
			return [2]Mem{{Base: msg, Disp: 64 * m}, {Base: msg, Disp: groupMsg + 64*m}}
		}
		r := sched.gpr()
		MOVBQZX(Mem{Base: sched.ptr, Disp: i}, r) // laneSched holds 8*m
		return [2]Mem{{Base: msg, Index: r, Scale: 8}, {Base: msg, Index: r, Scale: 8, Disp: groupMsg}}
	}
	// step does the x or y half of 4 independent G's in each group; each
	// op is issued for all 8 G's before the next, which depends on it.
	step := func(gs [4][4]int, first int, r1, r2 int) {
		each := func(op func(v *[16]VecPhysical, g [4]int)) {
			for grp := range 2 {
				for _, g := range gs {
					op(&v[grp], g)
				}
			}
		}
		for i, g := range gs {
			m := msgOps(first + 2*i)
			for grp := range 2 {
				VPADDQ(m[grp], v[grp][g[0]], v[grp][g[0]])
			}
		}
		each(func(v *[16]VecPhysical, g [4]int) { VPADDQ(v[g[1]], v[g[0]], v[g[0]]) })
		each(func(v *[16]VecPhysical, g [4]int) { VPXORQ(v[g[0]], v[g[3]], v[g[3]]) })
		each(func(v *[16]VecPhysical, g [4]int) { VPRORQ(U8(r1), v[g[3]], v[g[3]]) })
		each(func(v *[16]VecPhysical, g [4]int) { VPADDQ(v[g[3]], v[g[2]], v[g[2]]) })
		each(func(v *[16]VecPhysical, g [4]int) { VPXORQ(v[g[2]], v[g[1]], v[g[1]]) })
		each(func(v *[16]VecPhysical, g [4]int) { VPRORQ(U8(r2), v[g[1]], v[g[1]]) })
	}
	columns := [4][4]int{{0, 4, 8, 12}, {1, 5, 9, 13}, {2, 6, 10, 14}, {3, 7, 11, 15}}
	diagonals := [4][4]int{{0, 5, 10, 15}, {1, 6, 11, 12}, {2, 7, 8, 13}, {3, 4, 9, 14}}
	rounds(sched, laneSched, 16, func() {
		step(columns, 0, 32, 24)
		step(columns, 1, 16, 63)
		step(diagonals, 8, 32, 24)
		step(diagonals, 9, 16, 63)
	})

	Comment("h ^= v[0..7] ^ v[8..15]")
	for g := range 2 {
		for k := range 8 {
			VPTERNLOGQ(U8(0x96), hRow(g, k), v[g][k+8], v[g][k])
			VMOVDQU64(v[g][k], hRow(g, k))
		}
	}
	ADDQ(U32(128), t)
	ADDQ(U32(128), off)
	DECQ(n)
	JNZ(LabelRef(name + "_loop"))

	VZEROUPPER()
	Label(name + "_done")
	RET()
}

// transpose8 transposes the 8x8 qword matrix in rows (row j = the 8 words
// of lane j) into cols (register k = word k of every lane); rows is
// clobbered.
func transpose8(rows, cols []VecPhysical) {
	// Lane pairs (2i, 2i+1), within each 128-bit chunk: cols[2i] holds
	// their even words (w0 w0 | w2 w2 | w4 w4 | w6 w6), cols[2i+1] the odd.
	for i := range 4 {
		VPUNPCKLQDQ(rows[2*i+1], rows[2*i], cols[2*i])
		VPUNPCKHQDQ(rows[2*i+1], rows[2*i], cols[2*i+1])
	}
	// Lanes 0..3 (half 0) and 4..7 (half 4): chunks 0,2 of two pairs give
	// words (w, w+4), chunks 1,3 give (w+2, w+6).
	for _, half := range []int{0, 4} {
		for w := range 2 {
			x, y := cols[half+w], cols[half+2+w]
			VSHUFI64X2(U8(0x88), y, x, rows[half+w])
			VSHUFI64X2(U8(0xdd), y, x, rows[half+2+w])
		}
	}
	// rows[k] (lanes 0..3) and rows[4+k] (lanes 4..7) hold words k and k+4.
	for k := range 4 {
		VSHUFI64X2(U8(0x88), rows[4+k], rows[k], cols[k])
		VSHUFI64X2(U8(0xdd), rows[4+k], rows[k], cols[k+4])
	}
}

// transpose4 transposes the 4x4 qword matrix in rows (row j = 4 words of
// lane j) in place, using tmp.
func transpose4(rows, tmp []VecPhysical) {
	VPUNPCKLQDQ(rows[1], rows[0], tmp[0])         // a0 b0 a2 b2
	VPUNPCKHQDQ(rows[1], rows[0], tmp[1])         // a1 b1 a3 b3
	VPUNPCKLQDQ(rows[3], rows[2], tmp[2])         // c0 d0 c2 d2
	VPUNPCKHQDQ(rows[3], rows[2], tmp[3])         // c1 d1 c3 d3
	VPERM2I128(U8(0x20), tmp[2], tmp[0], rows[0]) // a0 b0 c0 d0
	VPERM2I128(U8(0x20), tmp[3], tmp[1], rows[1]) // a1 b1 c1 d1
	VPERM2I128(U8(0x31), tmp[2], tmp[0], rows[2]) // a2 b2 c2 d2
	VPERM2I128(U8(0x31), tmp[3], tmp[1], rows[3]) // a3 b3 c3 d3
}

// compressScalar emits func(h *[8]uint64, c *[2]uint64, flag uint64, blocks []byte)
// in general-purpose registers: the scalar G of compressGeneric, four
// independent G's per step for the out-of-order core to overlap. Vector
// integer ops take 2 cycles on Zen 5 against 1 for scalar ones, and the
// compression function is one long dependency chain, so this beats the
// row-parallel vector code there (numbers in BENCHMARKS.md).
//
// 16 state words need 16 registers and 14 are free, so two words of the c
// row wait on the stack. c words have the most slack in G: final 2 ops
// before the step ends, first needed 3 ops into the next step. Parking them
// between those points hides the store-to-load forwarding; parking an a or b
// word instead put it on the critical path and cost a quarter of the speed.
func compressScalar() {
	TEXT("compressScalar", NOSPLIT, "func(h *[8]uint64, c *[2]uint64, flag uint64, blocks []byte)")
	Comment("compressScalar hashes len(blocks)/128 whole blocks into h, adding 128 to the",
		"128-bit counter c before each and using flag as f0. Requires only amd64 (SSE2).")
	Comment(
		"Registers: v0..v7 in AX, BX, CX, DX, SI, DI, R8, R9; v12..v15 in R12..R15;",
		"two of v8..v11 in R10, R11, the other two parked on the stack. Columns run",
		"G0, G1, swap (park v8, v9; fetch v10, v11), G2, G3; diagonals G4, G5, swap",
		"back, G6, G7: each parked word is used last in the next step.",
		"The block is copied to the stack so message words are SP-relative operands;",
		"the copy is cleared before returning.",
		"Per iteration: one block, 12 rounds of 8 G's, feed-forward into h.",
	)
	msg := AllocLocal(128)
	park := AllocLocal(4 * 8)
	hSlot, cSlot, flagSlot := AllocLocal(8), AllocLocal(8), AllocLocal(8)
	baseSlot, nSlot := AllocLocal(8), AllocLocal(8)
	parked := map[int]Mem{8: park, 9: park.Offset(8), 10: park.Offset(16), 11: park.Offset(24)}

	Load(Param("h"), RAX)
	MOVQ(RAX, hSlot)
	Load(Param("c"), RAX)
	MOVQ(RAX, cSlot)
	Load(Param("flag"), RAX)
	MOVQ(RAX, flagSlot)
	Load(Param("blocks").Base(), RAX)
	MOVQ(RAX, baseSlot)
	Load(Param("blocks").Len(), RAX)
	SHRQ(U8(7), RAX)
	JZ(LabelRef("compressScalar_done"))
	MOVQ(RAX, nSlot)

	Label("compressScalar_loop")
	Comment("Copy the block to msg; add 128 to the counter c.")
	MOVQ(baseSlot, RAX)
	for i := 0; i < 128; i += 16 {
		MOVOU(Mem{Base: RAX, Disp: i}, X0)
		MOVOU(X0, msg.Offset(i))
	}
	MOVQ(cSlot, RBX)
	MOVQ(Mem{Base: RBX}, RCX)
	MOVQ(Mem{Base: RBX, Disp: 8}, RDX)
	ADDQ(U32(128), RCX)
	ADCQ(U32(0), RDX)
	MOVQ(RCX, Mem{Base: RBX})
	MOVQ(RDX, Mem{Base: RBX, Disp: 8})

	Comment("v8..v15 = IV ^ (0, 0, 0, 0, t0, t1, f0, 0); v0..v7 = h; v10, v11 parked.")
	v := map[int]Register{0: RAX, 1: RBX, 2: RCX, 3: RDX, 4: RSI, 5: RDI, 6: R8, 7: R9,
		8: R10, 9: R11, 12: R12, 13: R13, 14: R14, 15: R15}
	MOVQ(U64(iv[4]), v[12])
	XORQ(RCX, v[12])
	MOVQ(U64(iv[5]), v[13])
	XORQ(RDX, v[13])
	MOVQ(U64(iv[6]), v[14])
	XORQ(flagSlot, v[14])
	MOVQ(U64(iv[7]), v[15])
	for _, k := range []int{10, 11} {
		MOVQ(U64(iv[k-8]), v[8])
		MOVQ(v[8], parked[k])
	}
	MOVQ(U64(iv[0]), v[8])
	MOVQ(U64(iv[1]), v[9])
	MOVQ(hSlot, RAX)
	for k := 7; k >= 0; k-- {
		MOVQ(Mem{Base: RAX, Disp: 8 * k}, v[k])
	}

	half := func(a, b, c, d Register, m, r1, r2 int) {
		ADDQ(msg.Offset(8*m), a)
		ADDQ(b, a)
		XORQ(a, d)
		RORQ(U8(r1), d)
		ADDQ(d, c)
		XORQ(c, b)
		RORQ(U8(r2), b)
	}
	g := func(s [16]int, i int, a, b, c, d int) {
		half(v[a], v[b], v[c], v[d], s[2*i], 32, 24)
		half(v[a], v[b], v[c], v[d], s[2*i+1], 16, 63)
	}
	// swap parks words out (which hold their final value for this step) and
	// fetches words in into their registers.
	swap := func(out, in [2]int) {
		Commentf("Park v%d, v%d; fetch v%d, v%d.", out[0], out[1], in[0], in[1])
		for i := range 2 {
			MOVQ(v[out[i]], parked[out[i]])
			v[in[i]] = v[out[i]]
			delete(v, out[i])
			MOVQ(parked[in[i]], v[in[i]])
		}
	}
	for r, s := range sigma {
		Commentf("Round %d", r)
		g(s, 0, 0, 4, 8, 12)
		g(s, 1, 1, 5, 9, 13)
		swap([2]int{8, 9}, [2]int{10, 11})
		g(s, 2, 2, 6, 10, 14)
		g(s, 3, 3, 7, 11, 15)

		g(s, 4, 0, 5, 10, 15)
		g(s, 5, 1, 6, 11, 12)
		swap([2]int{10, 11}, [2]int{8, 9})
		g(s, 6, 2, 7, 8, 13)
		g(s, 7, 3, 4, 9, 14)
	}

	Comment("h ^= v[0..7] ^ v[8..15]")
	XORQ(v[8], v[0])
	XORQ(v[9], v[1])
	MOVQ(parked[10], v[8])
	XORQ(v[8], v[2])
	MOVQ(parked[11], v[9])
	XORQ(v[9], v[3])
	for k := 4; k < 8; k++ {
		XORQ(v[k+8], v[k])
	}
	hp := v[8]
	MOVQ(hSlot, hp)
	for k := range 8 {
		XORQ(v[k], Mem{Base: hp, Disp: 8 * k})
	}

	ADDQ(U32(128), baseSlot)
	DECQ(nSlot)
	JNZ(LabelRef("compressScalar_loop"))
	Label("compressScalar_done")
	Comment("Clear the stack copy of the last block (a keyed hash's first block is the",
		"key) and the parked words, which Go would otherwise leave on the stack.")
	PXOR(X0, X0)
	for i := 0; i < 128; i += 16 {
		MOVOU(X0, msg.Offset(i))
	}
	MOVOU(X0, park)
	MOVOU(X0, park.Offset(16))
	RET()
}

// compressScalarRolled is compressScalar with the rounds in a loop: the
// message index comes from laneSched through a register, so one more
// register is needed. It keeps all four c words on the stack, loading each
// into R10 for its G (c has the slack to hide the round trip, see
// compressScalar), and finds the schedule pointer on the stack per word.
func compressScalarRolled() {
	TEXT("compressScalarRolled", NOSPLIT, "func(h *[8]uint64, c *[2]uint64, flag uint64, blocks []byte)")
	Comment("compressScalarRolled is compressScalar with the rounds rolled into a loop.",
		"Requires only amd64 (SSE2).")
	Comment(
		"Registers: v0..v3 in AX, BX, CX, DX; v4..v7 in SI, DI, R8, R9; v12..v15 in",
		"R12..R15; v8..v11 on the stack, the current G's one in R10; R11 = message",
		"offset. Per iteration: one block; the inner loop does one round.",
	)
	msg := AllocLocal(128)
	cw := AllocLocal(4 * 8)
	hSlot, cSlot, flagSlot := AllocLocal(8), AllocLocal(8), AllocLocal(8)
	baseSlot, nSlot := AllocLocal(8), AllocLocal(8)
	schedSlot, roundSlot := AllocLocal(8), AllocLocal(8)

	Load(Param("h"), RAX)
	MOVQ(RAX, hSlot)
	Load(Param("c"), RAX)
	MOVQ(RAX, cSlot)
	Load(Param("flag"), RAX)
	MOVQ(RAX, flagSlot)
	Load(Param("blocks").Base(), RAX)
	MOVQ(RAX, baseSlot)
	Load(Param("blocks").Len(), RAX)
	SHRQ(U8(7), RAX)
	JZ(LabelRef("compressScalarRolled_done"))
	MOVQ(RAX, nSlot)

	Label("compressScalarRolled_loop")
	MOVQ(baseSlot, RAX)
	for i := 0; i < 128; i += 16 {
		MOVOU(Mem{Base: RAX, Disp: i}, X0)
		MOVOU(X0, msg.Offset(i))
	}
	MOVQ(cSlot, RBX)
	MOVQ(Mem{Base: RBX}, RCX)
	MOVQ(Mem{Base: RBX, Disp: 8}, RDX)
	ADDQ(U32(128), RCX)
	ADCQ(U32(0), RDX)
	MOVQ(RCX, Mem{Base: RBX})
	MOVQ(RDX, Mem{Base: RBX, Disp: 8})

	v := map[int]Register{0: RAX, 1: RBX, 2: RCX, 3: RDX, 4: RSI, 5: RDI, 6: R8, 7: R9,
		12: R12, 13: R13, 14: R14, 15: R15}
	cur, off := R10, R11
	MOVQ(U64(iv[4]), v[12])
	XORQ(RCX, v[12])
	MOVQ(U64(iv[5]), v[13])
	XORQ(RDX, v[13])
	MOVQ(U64(iv[6]), v[14])
	XORQ(flagSlot, v[14])
	MOVQ(U64(iv[7]), v[15])
	for k := range 4 {
		MOVQ(U64(iv[k]), cur)
		MOVQ(cur, cw.Offset(8*k))
	}
	MOVQ(hSlot, RAX)
	for k := 7; k >= 0; k-- {
		MOVQ(Mem{Base: RAX, Disp: 8 * k}, v[k])
	}
	LEAQ(laneSched, cur)
	MOVQ(cur, schedSlot)
	MOVQ(U32(len(sigma)), roundSlot)

	Label("compressScalarRolled_round")
	half := func(a, b, d Register, i, r1, r2 int) {
		MOVQ(schedSlot, off)
		MOVBQZX(Mem{Base: off, Disp: i}, off)
		ADDQ(msg.Idx(off, 1), a)
		ADDQ(b, a)
		XORQ(a, d)
		RORQ(U8(r1), d)
		ADDQ(d, cur)
		XORQ(cur, b)
		RORQ(U8(r2), b)
	}
	gs := [8][4]int{{0, 4, 8, 12}, {1, 5, 9, 13}, {2, 6, 10, 14}, {3, 7, 11, 15},
		{0, 5, 10, 15}, {1, 6, 11, 12}, {2, 7, 8, 13}, {3, 4, 9, 14}}
	for i, g := range gs {
		slot := cw.Offset(8 * (g[2] - 8))
		MOVQ(slot, cur)
		half(v[g[0]], v[g[1]], v[g[3]], 2*i, 32, 24)
		half(v[g[0]], v[g[1]], v[g[3]], 2*i+1, 16, 63)
		MOVQ(cur, slot)
	}
	ADDQ(U32(16), schedSlot)
	DECQ(roundSlot)
	JNZ(LabelRef("compressScalarRolled_round"))

	Comment("h ^= v[0..7] ^ v[8..15]")
	for k := range 4 {
		XORQ(cw.Offset(8*k), v[k])
	}
	for k := 4; k < 8; k++ {
		XORQ(v[k+8], v[k])
	}
	MOVQ(hSlot, cur)
	for k := range 8 {
		XORQ(v[k], Mem{Base: cur, Disp: 8 * k})
	}
	ADDQ(U32(128), baseSlot)
	DECQ(nSlot)
	JNZ(LabelRef("compressScalarRolled_loop"))
	Label("compressScalarRolled_done")
	Comment("Clear the block copy and the c words, as compressScalar does.")
	PXOR(X0, X0)
	for i := 0; i < 128; i += 16 {
		MOVOU(X0, msg.Offset(i))
	}
	MOVOU(X0, cw)
	MOVOU(X0, cw.Offset(16))
	RET()
}
