package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// flavor is a VAES register width: ymm (2 blocks a register, VEX only, 16
// registers, for CPUs without AVX-512) or zmm (4 blocks, EVEX, 32
// registers, round keys held in registers).
type flavor struct {
	name  string
	lanes int
	zmm   bool
	clmul bool // zmm: the main loops advance tweaks by carry-less multiplication (see mulXBytes)
}

var (
	ymm  = flavor{name: "VAES256", lanes: 2}
	zmm  = flavor{name: "VAES512", lanes: 4, zmm: true}
	zmmC = flavor{name: "VAES512C", lanes: 4, zmm: true, clmul: true}
)

var (
	xregs = []VecPhysical{X0, X1, X2, X3, X4, X5, X6, X7, X8, X9, X10, X11, X12, X13, X14, X15,
		X16, X17, X18, X19, X20, X21, X22, X23, X24, X25, X26, X27, X28, X29, X30, X31}
	yregs = []VecPhysical{Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7, Y8, Y9, Y10, Y11, Y12, Y13, Y14, Y15}
	zregs = []VecPhysical{Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7, Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15,
		Z16, Z17, Z18, Z19, Z20, Z21, Z22, Z23, Z24, Z25, Z26, Z27, Z28, Z29, Z30, Z31}
)

// vk holds one VAES kernel's register roles.
type vk struct {
	f   flavor
	dec bool

	ks, tk, rounds, dst, src, blocks, kend, kend2, tail GPPhysical

	V, T []VecPhysical  // four data vectors and their tweak vectors
	tw   VecPhysical    // lane 0: the data unit's encrypted tweak
	tmp  []VecPhysical  // scratch (three or four)
	upd  [2]VecPhysical // zmm: scratch of the main loop's tweak update

	twWide bool        // bulk: every lane of tw holds T (else lane 0 only)
	paired bool        // bulk: the zmm main loop of mainPaired
	early  bool        // bulk: encryption with stealing, block m in the peel (peelSteal)
	kt     VecPhysical // ymm: the broadcast round key of the current round
	poly   VecPhysical // 0x87 in the low qword of every lane
}

func newVK(f flavor, dec bool) *vk {
	c := &vk{f: f, dec: dec,
		ks: RAX, tk: RBX, rounds: R12, dst: RDI, src: RSI, blocks: RDX,
		kend: R9, kend2: R10, tail: R11}
	if f.zmm {
		c.V, c.T = zregs[0:4], zregs[4:8]
		c.tmp = zregs[8:12]
		c.tw = Z12
		c.poly = Z31
		c.upd = [2]VecPhysical{Z13, Z14}
	} else {
		c.V, c.T = yregs[0:4], yregs[4:8]
		c.kt = Y8
		c.poly = Y9
		c.tw = Y10
		c.tmp = []VecPhysical{Y13, Y14, Y15}
	}
	return c
}

// ISA lists for the raw instructions, for the "Requires:" line.
func (c *vk) vecAES() []string {
	if c.f.zmm {
		return []string{"AVX512F", "VAES"}
	}
	return []string{"AVX", "VAES"}
}

func (c *vk) xmmAES() []string {
	if c.f.zmm {
		return []string{"AVX512VL", "VAES"} // EVEX: the round keys are in X16-X30
	}
	return []string{"AES", "AVX"}
}

func (c *vk) vecCLMUL() []string {
	if c.f.zmm {
		return []string{"AVX512F", "VPCLMULQDQ"}
	}
	return []string{"AVX", "VPCLMULQDQ"}
}

func (c *vk) xmmCLMUL() []string {
	if c.f.zmm {
		return []string{"AVX512VL", "VPCLMULQDQ"} // EVEX: the constant is in X31
	}
	return []string{"AVX", "PCLMULQDQ"}
}

func (c *vk) op(last bool) string {
	switch {
	case c.dec && last:
		return "VAESDECLAST"
	case c.dec:
		return "VAESDEC"
	case last:
		return "VAESENCLAST"
	}
	return "VAESENC"
}

func (c *vk) polyX() VecPhysical { return xregs[c.poly.PhysicalIndex()] }

func asX(v VecPhysical) VecPhysical { return xregs[v.PhysicalIndex()] }

// middleHook is middle with hook emitted after round after (5..13).
func (c *vk) middleHook(vs []VecPhysical, op string, key func(int) Op, isa []string, after int, hook func()) {
	c.middleRounds(vs, op, key, isa, func(j int) {
		if j == after {
			hook()
		}
	})
}

// middle emits AES rounds 1..13 of the virtual layout (1..4 skipped for
// AES-128) on vs; key(j) yields round key j's operand, emitting any load.
func (c *vk) middle(vs []VecPhysical, op string, key func(int) Op, isa []string) {
	c.middleRounds(vs, op, key, isa, func(int) {})
}

// middleRounds is middle, calling after(j) once round j is emitted.
func (c *vk) middleRounds(vs []VecPhysical, op string, key func(int) Op, isa []string, after func(int)) {
	skip := newLabel("aes128_")
	CMPQ(c.rounds, Imm(10))
	JE(LabelRef(skip))
	for j := 1; j <= 4; j++ {
		k := key(j)
		for _, v := range vs {
			raw(isa, op, k, v, v)
		}
	}
	Label(skip)
	for j := 5; j <= 13; j++ {
		k := key(j)
		for _, v := range vs {
			raw(isa, op, k, v, v)
		}
		after(j)
	}
}

// vkey returns key1's round key j broadcast to every lane.
func (c *vk) vkey(j int) Op {
	if c.f.zmm {
		return zregs[16+j]
	}
	VBROADCASTI128(keyMem(c.ks, c.kend, j), c.kt)
	return c.kt
}

// xkey returns key1's round key j as an xmm operand.
func (c *vk) xkey(j int) Op {
	if c.f.zmm {
		return xregs[16+j]
	}
	return keyMem(c.ks, c.kend, j)
}

func (c *vk) xor(a, b Op, dst VecPhysical) {
	if c.f.zmm {
		VPXORD(a, b, dst)
	} else {
		VPXOR(a, b, dst)
	}
}

// xor3 sets dst ^= b ^ cc.
func (c *vk) xor3(dst, b, cc VecPhysical) {
	if c.f.zmm {
		VPTERNLOGD(Imm(0x96), cc, b, dst)
	} else {
		VPXOR(b, dst, dst)
		VPXOR(cc, dst, dst)
	}
}

func (c *vk) mov(src, dst VecPhysical) {
	if c.f.zmm {
		VMOVDQA64(src, dst)
	} else {
		VMOVDQA(src, dst)
	}
}

// xexVec runs XEX on the data vectors vs with tweak vectors ts: whitening
// with the tweak and round key 0 together, the rounds, and a last round
// whose key has the tweak folded in (AESENCLAST's final XOR then applies
// both), so the tweak costs nothing after the last round.
func (c *vk) xexVec(vs, ts []VecPhysical) {
	k0 := c.vkey(0)
	for i, v := range vs {
		if c.f.zmm {
			VPTERNLOGD(Imm(0x96), k0, ts[i], v)
		} else {
			VPXOR(ts[i], v, v)
			VPXOR(k0, v, v)
		}
	}
	c.middle(vs, c.op(false), c.vkey, c.vecAES())
	kl := c.vkey(14)
	for i, v := range vs {
		s := c.tmp[i%len(c.tmp)]
		c.xor(kl, ts[i], s)
		raw(c.vecAES(), c.op(true), s, v, v)
	}
}

// xexVecEarly is xexVec over the four zmm data vectors of the main loop,
// with the tweak vectors advanced by x^16 inside it: the last round's keys
// (key^tweak) go to Z8-Z11 after the whitening, and the update sits after
// round 7, so the next iteration's whitening does not wait for this one's
// last round and out-of-order execution overlaps the two iterations.
// Measured (XTS-AES-256, Zen 4, 16 KiB units): the update after the last
// round ran at 15.75 GB/s, after round 7 at 15.95, before the rounds at
// 15.9, after round 10 at 15.3; before the rounds also lost 5% at 512
// bytes, whose two iterations are still filling the pipeline.
func (c *vk) xexVecEarly() {
	for i, v := range c.V {
		VPTERNLOGD(Imm(0x96), zregs[16], c.T[i], v)
	}
	for i, t := range c.T {
		VPXORD(zregs[30], t, c.tmp[i])
	}
	c.middleHook(c.V, c.op(false), c.vkey, c.vecAES(), 7, func() {
		for _, t := range c.T {
			c.mulXBytes(t, 2, c.upd[0], c.upd[1])
		}
	})
	for i, v := range c.V {
		raw(c.vecAES(), c.op(true), c.tmp[i], v, v)
	}
}

// xex1 runs XEX on one block x (xmm) with tweak tw, key1's schedule. The
// round keys come from Z16-Z30 (zmm flavor, once loaded) or, with memKeys
// or in the ymm flavor, straight from the schedule as memory operands.
func (c *vk) xex1(x, tw, scratch VecPhysical, memKeys bool) {
	mem := memKeys || !c.f.zmm
	isa := c.xmmAES()
	key := c.xkey
	if mem {
		isa = []string{"AES", "AVX"}
		key = func(j int) Op { return keyMem(c.ks, c.kend, j) }
	}
	if mem {
		// Key 0 and the tweak first, off the data's dependency chain (a
		// unit encrypted in place depends on the previous call's output).
		VPXOR(keyMem(c.ks, c.kend, 0), tw, scratch)
		VPXOR(scratch, x, x)
	} else {
		VPTERNLOGD(Imm(0x96), X16, tw, x)
	}
	c.middle([]VecPhysical{x}, c.op(false), key, isa)
	if mem {
		VPXOR(keyMem(c.ks, c.kend, 14), tw, scratch)
	} else {
		VPXORD(X30, tw, scratch)
	}
	raw(isa, c.op(true), scratch, x, x)
}

// vexMulX sets t = t*x (xmm), as sseMulX does, without PCLMULQDQ.
func vexMulX(t, tmp VecPhysical) {
	VPSHUFD(Imm(0x5f), t, tmp)
	VPSRAD(Imm(31), tmp, tmp)
	VPAND(gfMulX, tmp, tmp)
	VPADDQ(t, t, t)
	VPXOR(tmp, t, t)
}

// xexY runs XEX on two blocks in ymm register y with tweaks ty (zmm
// flavor only: EVEX ymm forms with the round keys in Y16-Y30).
func (c *vk) xexY(y, ty VecPhysical) {
	isa := []string{"AVX512VL", "VAES"}
	VPTERNLOGD(Imm(0x96), Y16, ty, y)
	c.middle([]VecPhysical{y}, c.op(false), func(j int) Op { return yregs32(16 + j) }, isa)
	VPXORD(Y30, ty, Y8)
	raw(isa, c.op(true), Y8, y, y)
}

func yregs32(i int) VecPhysical {
	return []VecPhysical{Y16, Y17, Y18, Y19, Y20, Y21, Y22, Y23, Y24, Y25, Y26, Y27, Y28, Y29, Y30}[i-16]
}

// encryptTweak sets x = E_K2(*p), one xmm AES chain with key2's round keys
// as memory operands.
func (c *vk) encryptTweak(x VecPhysical, p GPPhysical) {
	isa := []string{"AES", "AVX"}
	// Two qword loads: callers build the tweak with 8-byte stores, which
	// a 16-byte load could not forward from; both load at once.
	hi := asX(c.tmp[0])
	VMOVQ(Mem{Base: p}, x)
	VMOVQ(Mem{Base: p, Disp: 8}, hi)
	VPUNPCKLQDQ(hi, x, x)
	VPXOR(keyMem(c.tk, c.kend2, 0), x, x)
	c.middle([]VecPhysical{x}, "VAESENC", func(j int) Op { return keyMem(c.tk, c.kend2, j) }, isa)
	raw(isa, "VAESENCLAST", keyMem(c.tk, c.kend2, 14), x, x)
}

// encryptTweakWide sets every lane of c.tw (zmm) to E_K2(*p): the tweak
// is broadcast before it is encrypted, with key2's round keys broadcast
// into Z8-Z11 in turn, so that no cross-lane shuffle (4 cycles) sits
// between the tweak's AES chain and the tweak vectors. That chain's
// latency is exposed in every call: leaving it out (for timing only)
// made 4096-byte units 6% and 512-byte units 35% faster, as the next
// call's chain cannot start early enough to hide under this one's work.
func (c *vk) encryptTweakWide(p GPPhysical) {
	// Each qword broadcast straight from memory (8-byte loads, which the
	// caller's 8-byte stores forward to) and interleaved within the
	// lanes: no lane-crossing shuffle before the chain either.
	VPBROADCASTQ(Mem{Base: p}, c.tw)
	VPBROADCASTQ(Mem{Base: p, Disp: 8}, zregs[8])
	VPUNPCKLQDQ(zregs[8], c.tw, c.tw)
	key := func(j int) Op {
		k := zregs[8+j%4]
		VBROADCASTI32X4(keyMem(c.tk, c.kend2, j), k)
		return k
	}
	VPXORD(key(0), c.tw, c.tw)
	c.middle([]VecPhysical{c.tw}, "VAESENC", key, c.vecAES())
	raw(c.vecAES(), "VAESENCLAST", key(14), c.tw, c.tw)
}

// mulXBits sets dst = src * x^k in every 128-bit lane (0 < k < 64): both
// halves shift left by k, the k bits leaving the low half enter the high
// half, and the k bits leaving the top are reduced by a carry-less
// multiplication with 0x87.
func (c *vk) mulXBits(dst, src VecPhysical, k int, b, cc VecPhysical, clmulISA []string, poly VecPhysical) {
	VPSRLQ(Imm(uint64(64-k)), src, b)
	VPSLLQ(Imm(uint64(k)), src, dst)
	raw(clmulISA, "VPCLMULQDQ", Imm(0x01), poly, b, cc)
	VPSLLDQ(Imm(8), b, b)
	c.xor3(dst, b, cc)
}

// mulXBytes sets t = t * x^(8*kb) in every lane (kb <= 2): a byte shift,
// with the 8*kb bits h that leave the top reduced as h*x^128 = h*(x^7 +
// x^2 + x + 1).
//
// zmm: by shifts and XORs (h*x as h+h; the product fits in the low
// qword). On Zen 4 VPCLMULQDQ issues to the AES units' pipes and cost
// the main loop one AES round per vector (66 cycles per 16-block
// iteration of XTS-AES-256 against 58 this way, in a loop of the same
// shape), while shifts and XORs find idle pipes beside 512-bit AES.
//
// ymm: one carry-less multiplication with 0x87. The VEX encoding has no
// three-way XOR, and 256-bit AES at two per cycle leaves fewer idle
// slots: the shift form made the ymm kernel slower (16 KiB: 10.3 GB/s
// against 11.7, Zen 4). Scratch: h, a.
func (c *vk) mulXBytes(t VecPhysical, kb int, h, a VecPhysical) {
	VPSRLDQ(Imm(uint64(16-kb)), t, h)
	VPSLLDQ(Imm(uint64(kb)), t, t)
	if !c.f.zmm || c.f.clmul {
		raw(c.vecCLMUL(), "VPCLMULQDQ", Imm(0x00), c.poly, h, h)
		c.xor(h, t, t)
		return
	}
	VPADDQ(h, h, a) // h*x
	c.xor3(t, h, a)
	VPADDQ(a, a, a)      // h*x^2
	VPSLLQ(Imm(7), h, h) // h*x^7
	c.xor3(t, a, h)
}

// mulXLanes sets dst = src * x^j in lane l of every 128-bit lane, j =
// L*k + l (src holds the same value in every lane): per-lane shifts from
// the laneShift tables, the carried-out bits of the high qword reduced by
// one carry-less multiplication with 0x87; with key non-nil, dst is
// further XORed with key. Scratch: b, cc.
func (c *vk) mulXLanes(dst, src VecPhysical, k int, b, cc, key VecPhysical) {
	c.mulXLanesAt(dst, src, c.f.lanes*k, b, cc, key)
}

// mulXLanesAt is mulXLanes with lane l of dst holding src * x^(j0+l).
func (c *vk) mulXLanesAt(dst, src VecPhysical, j0 int, b, cc, key VecPhysical) {
	off := 16 * j0
	VPSRLVQ(laneShiftR.Offset(off), src, b)
	VPSLLVQ(laneShiftL.Offset(off), src, dst)
	if key != nil {
		VPXORD(key, dst, dst) // while the multiplication runs
	}
	raw(c.vecCLMUL(), "VPCLMULQDQ", Imm(0x01), c.poly, b, cc)
	VPSLLDQ(Imm(8), b, b)
	c.xor3(dst, b, cc)
}

// loadKeys broadcasts key1's round keys into Z16-Z30 (zmm) and the
// reduction constant into every lane of poly.
func (c *vk) loadKeys() {
	if c.f.zmm {
		for j := 0; j <= 14; j++ {
			VBROADCASTI32X4(keyMem(c.ks, c.kend, j), zregs[16+j])
		}
		VBROADCASTI32X4(gfPoly, c.poly)
	} else {
		VBROADCASTI128(gfPoly, c.poly)
	}
}

// bulk encrypts or decrypts DX whole blocks from SI to DI, advancing SI and
// DI past them, with block i's tweak T*x^i where T is lane 0 of c.tw. With
// lastCC (decryption with stealing) the register lastCC is block DX, the
// last, decrypted in the final vector with the blocks left over (see
// finalGroup).
func (c *vk) bulk(lastCC VecPhysical) {
	L := c.f.lanes
	a, b, cc := c.tmp[0], c.tmp[1], c.tmp[2]
	Comment(fmt.Sprintf("Tweak vectors: lane l of Tk is T*x^(%d*k+l), each built from T directly,", L),
		"so that the first AES round waits for one multiplication only.")
	switch {
	case c.twWide:
		a = c.tw
	case c.f.zmm:
		VSHUFI64X2(Imm(0), c.tw, c.tw, a)
	default:
		VPERMQ(Imm(0x44), c.tw, a)
	}
	main, vec, part, done := newLabel("main"), newLabel("vec"), newLabel("partial"), newLabel("bulkDone")
	switch {
	case c.early:
		Comment("Encryption with stealing (from 17 blocks, DX = m): blocks 0-2 and m",
			"in one vector, the stealing block's chain in the main loop (see",
			"peelSteal), the main loop from block 3.")
		c.peelSteal(a, b, cc)
		c.mainPaired()
	case c.paired:
		// From 16 blocks on, the main loop of mainPaired, which starts
		// from U = T ^ key14: that XOR is done while the multiplication
		// runs.
		few, plain, loop := newLabel("fewBlocks"), newLabel("noPeel"), newLabel("loop")
		Comment("From 48 blocks: the first four alone (peel), then the main loop from",
			"block 4, so that a unit of a multiple of 256 bytes ends in three",
			"vectors. From 16: the main loop. Fewer: the whole vectors and the rest.")
		CMPQ(c.blocks, Imm(16))
		JB(LabelRef(few))
		CMPQ(c.blocks, Imm(48))
		JB(LabelRef(plain))
		c.peel(a, b, cc)
		JMP(LabelRef(loop))
		Label(plain)
		for k := 0; k < 4; k++ {
			c.mulXLanes(c.T[k], a, k, b, cc, zregs[30])
		}
		Label(loop)
		c.mainPaired()
		JMP(LabelRef(vec))
		Label(few)
		fallthrough
	default:
		for k := 0; k < 4; k++ {
			c.mulXLanes(c.T[k], a, k, b, cc, nil)
		}
	}
	if c.paired {
		// Fewer than 16 blocks: no main loop.
	} else if c.f.zmm {
		Comment("Main loop, per iteration: 16 blocks in four vectors; whitening with",
			"tweak and key 0 in one XOR; the last round's keys key^tweak; rounds",
			"1-7; every tweak vector times x^16 (byte shifts, the reduction by",
			"shifts and XORs); rounds 8-13; the last round.")
	} else {
		Comment("Main loop, per iteration: 8 blocks in four vectors; whitening with",
			"tweak and key 0, the rounds over all four, the last round with",
			"key^tweak; then every tweak vector times x^8 (a byte shift and one",
			"carry-less multiplication).")
	}
	if !c.paired {
		Label(main)
		CMPQ(c.blocks, imm(4*L))
		JB(LabelRef(vec))
		for i, v := range c.V {
			c.load(Mem{Base: c.src, Disp: 16 * L * i}, v)
		}
		if c.f.zmm {
			c.xexVecEarly()
		} else {
			c.xexVec(c.V, c.T)
		}
		for i, v := range c.V {
			c.store(v, Mem{Base: c.dst, Disp: 16 * L * i})
		}
		if !c.f.zmm {
			for _, t := range c.T {
				c.mulXBytes(t, 4*L/8, a, b)
			}
		}
		ADDQ(imm(64*L), c.src)
		ADDQ(imm(64*L), c.dst)
		SUBQ(imm(4*L), c.blocks)
		JMP(LabelRef(main))
	}

	Comment("Whole vectors left (at most three): T0, then the next tweak vector.")
	Label(vec)
	CMPQ(c.blocks, Imm(uint64(L)))
	JB(LabelRef(part))
	c.load(Mem{Base: c.src}, c.V[0])
	c.xexVec(c.V[:1], c.T[:1])
	c.store(c.V[0], Mem{Base: c.dst})
	c.mov(c.T[1], c.T[0])
	c.mov(c.T[2], c.T[1])
	c.mov(c.T[3], c.T[2])
	ADDQ(imm(16*L), c.src)
	ADDQ(imm(16*L), c.dst)
	SUBQ(Imm(uint64(L)), c.blocks)
	JMP(LabelRef(vec))

	Label(part)
	if lastCC != nil {
		c.finalGroup(lastCC)
		Label(done)
		return
	}
	TESTQ(c.blocks, c.blocks)
	JZ(LabelRef(done))
	one := newLabel("one")
	if c.f.zmm {
		Comment("1-3 blocks: two in a ymm register (T0's low lanes), then one in",
			"xmm. Plain loads and stores of exactly the data, not masked ones: on",
			"AMD a masked store cannot forward to a later load of the same bytes,",
			"which costs the next in-place call on the buffer dearly.")
		CMPQ(c.blocks, Imm(2))
		JB(LabelRef(one))
		VMOVDQU(Mem{Base: c.src}, Y0)
		c.xexY(Y0, Y4)
		VMOVDQU(Y0, Mem{Base: c.dst})
		VEXTRACTI32X4(Imm(2), Z4, X4)
		ADDQ(Imm(32), c.src)
		ADDQ(Imm(32), c.dst)
		SUBQ(Imm(2), c.blocks)
		JZ(LabelRef(done))
	} else {
		Comment("One block left: xmm, with T0's low lane.")
	}
	Label(one)
	VMOVDQU(Mem{Base: c.src}, X0)
	c.xex1(X0, X4, asX(c.tmp[0]), false)
	VMOVDQU(X0, Mem{Base: c.dst})
	ADDQ(Imm(16), c.src)
	ADDQ(Imm(16), c.dst)
	Label(done)
}

func (c *vk) load(m Mem, v VecPhysical) {
	if c.f.zmm {
		VMOVDQU64(m, v)
	} else {
		VMOVDQU(m, v)
	}
}

func (c *vk) store(v VecPhysical, m Mem) {
	if c.f.zmm {
		VMOVDQU64(v, m)
	} else {
		VMOVDQU(v, m)
	}
}

// vaesKernel emits xts{Enc,Dec}VAES{256,512}: one data unit.
func vaesKernel(f flavor, dec bool) {
	c := newVK(f, dec)
	c.twWide = f.zmm
	c.paired = f.zmm
	TEXT(fmt.Sprintf("xts%s%s", dirName(dec), f.name), NOSPLIT, unitSig)
	regs := []string{"Y0-Y3 data, Y4-Y7 tweak vectors, Y8 the broadcast round key, Y9 the",
		"0x87 constant, Y10 T, Y13-Y15 scratch."}
	if f.zmm && f.clmul {
		regs = []string{"Z0-Z3 data, Z4-Z7 tweak vectors, Z8-Z11 scratch, Z12 T, Z16-Z30 key1's",
			"round keys (keys 1-4 unused for AES-128), Z31 the 0x87 constant. In",
			"the main loop (mainPaired): Z4-Z7 and Z8-Z11 in turn U = tweak ^ key14,",
			"Z12-Z13 scratch, Z14 the 0x87 constant, Z16 key0^key14, Z31 C =",
			"key14*x^16 ^ key14."}
	} else if f.zmm {
		regs = []string{"Z0-Z3 data, Z4-Z7 tweak vectors, Z8-Z11 scratch, Z12 T, Z16-Z30 key1's",
			"round keys (keys 1-4 unused for AES-128), Z31 the 0x87 constant. In",
			"the main loop (mainPaired): Z4-Z7 and Z8-Z11 in turn U = tweak ^ key14,",
			"Z12-Z14 scratch, Z16 key0^key14, Z31 C = key14*x^16 ^ key14, K1 and K2",
			"dword masks."}
	}
	Comment(fmt.Sprintf("XTS-AES %s of one data unit with VAES on %d-bit vectors.", map[bool]string{false: "encryption", true: "decryption"}[dec], 128*f.lanes),
		"GPRs: AX key1 schedule, BX key2 schedule, R12 rounds, R9/R10 the address",
		"of their last round keys, DI dst, SI src, DX whole blocks left, R11 n%16.")
	Comment(regs...)
	Comment("Order: T = E_K2(tweak). Units shorter than one vector of blocks (in",
		"vaes512c's encryption also four blocks and a tail) take the short path",
		"(round keys as memory operands, no tweak vectors).",
		"Otherwise: round keys and tweak vectors, then the bulk (zmm from 48",
		"blocks: four blocks alone, the main loop, a last group of three",
		"vectors; see peel). Ciphertext stealing (n%16 != 0): decryption first;",
		"encryption below one main-loop iteration (vaes512c: 8 blocks) first,",
		"else after the bulk,",
		"except zmm from 17 whole blocks: block m in the first vector, the",
		"stealing block (address in R14, pending while R11 != 0, T_m+1 in X15)",
		"XEXed inside the main loop (see peelSteal).")
	Load(Param("ks"), c.ks)
	Load(Param("tk"), c.tk)
	Load(Param("rounds"), c.rounds)
	Load(Param("dst"), c.dst)
	Load(Param("src"), c.src)
	Load(Param("n"), c.blocks)
	Load(Param("tweak"), R8)
	MOVQ(c.rounds, c.kend)
	SHLQ(Imm(4), c.kend)
	MOVQ(c.kend, c.kend2)
	ADDQ(c.ks, c.kend)
	ADDQ(c.tk, c.kend2)

	MOVQ(c.blocks, c.tail)
	ANDQ(Imm(15), c.tail)
	SHRQ(Imm(4), c.blocks)
	// The short-unit threshold, one vector of blocks, was measured (see
	// the comment above autoPick in dispatch_amd64.go): below it the xmm
	// path is faster in throughput and latency, from it the wide path.
	wide, shortUnit := newLabel("wide"), newLabel("short")
	CMPQ(c.blocks, Imm(uint64(c.f.lanes)))
	if f.clmul && !dec {
		// vaes512c encryption: four whole blocks and a tail also go
		// the short way (three blocks, then the stealing over the
		// fourth), without the wide set-up. Measured on Intel (family 6
		// model 167), interleaved, 65-79 bytes: encryption 1.13-1.21x
		// with each call on the previous one's output, 1.33-1.36x with
		// calls that do not wait for one another; decryption there
		// 1.02-1.08x and 0.91-0.92x, so it keeps the wide path.
		Comment("Fewer whole blocks than one vector, or four and a tail: the short",
			"path, no wide set-up.")
		JB(LabelRef(shortUnit))
		JNE(LabelRef(wide))
		TESTQ(c.tail, c.tail)
		JZ(LabelRef(wide))
	} else {
		Comment("Fewer whole blocks than one vector: the short path, no wide set-up.")
		JAE(LabelRef(wide))
	}
	Label(shortUnit)
	c.encryptTweak(asX(c.tw), R8)
	c.short()

	pcalign(32)
	Label(wide)
	if f.zmm {
		// The tweak's AES chain is exposed in every call (see
		// encryptTweakWide): from one main-loop iteration on, it runs on
		// the tweak broadcast to every lane, which takes the broadcast
		// off its end. Below that the 512-bit rounds cost more than the
		// shuffle (64 bytes: 12% slower).
		narrow, tweaked := newLabel("narrowTweak"), newLabel("tweaked")
		CMPQ(c.blocks, Imm(16))
		JB(LabelRef(narrow))
		c.encryptTweakWide(R8)
		JMP(LabelRef(tweaked))
		Label(narrow)
		c.encryptTweak(asX(c.tw), R8)
		VSHUFI64X2(Imm(0), c.tw, c.tw, c.tw)
		Label(tweaked)
	} else {
		c.encryptTweak(asX(c.tw), R8)
	}
	c.loadKeys()
	bulk := newLabel("bulk")
	TESTQ(c.tail, c.tail)
	JZ(LabelRef(bulk))
	if dec {
		// Decryption: PP = D(C_m, T_m+1) first; its CC then joins the
		// bulk's final vector at block m, with T_m.
		DECQ(c.blocks)
		c.stealDecFirst(c.tm1())
		c.bulk(c.tm1())
		end := newLabel("end")
		JMP(LabelRef(end))
		Label(bulk)
		c.bulk(nil)
		Label(end)
	} else {
		// Encryption. The stealing block PP = P_tail || C_m[tail:] needs
		// C_m, the ciphertext of block m (the last whole one), and its
		// own AES chain. zmm from 17 whole blocks: block m runs early, in
		// the first vector beside blocks 0-2, and PP's chain in the main
		// loop (peelSteal, stealPending), both under the bulk's work.
		// Run after the bulk (stealLast, as for 16 blocks and the ymm
		// kernel), PP's chain was exposed in full: timing without it,
		// 1420-byte units ran 13% faster. Measured against stealLast
		// (interleaved A/B, XTS-AES-256 / -128, new/old medians): 17-27
		// blocks 1.02-1.20 / 1.10-1.17, 28-32 blocks 0.97-1.04 /
		// 1.00-1.07, 33-50 blocks 1.05-1.16 / 1.06-1.18, 1420 bytes
		// 1.085 / 1.07, 2060 bytes 1.065 / 1.06, 4100 bytes 1.03 /
		// 1.02; 1408, 4096 and 16384 bytes 1.00. Below 17 blocks it
		// lost (0.87-0.97). PP's chain placed right after the first
		// vector, in program order, gained only 2.6% at 1420 bytes:
		// nothing after it retires until it finishes, and the main loop
		// fills the window behind it; one main-loop pass later its
		// inputs are ready and it runs beside the loop. Stealing first
		// (steal, two xmm chains before the bulk) ran at 0.95x.
		//
		// Shorter units: block m in the bulk with its own tweak, and only
		// the final stealing block costs an xmm AES chain (stealLast);
		// below one main-loop iteration, stealing first (steal), whose
		// two chains then overlap the bulk. Measured crossover (zmm,
		// before the paired main loop; interleaved rounds, throughput):
		// 255 bytes 0.93x for stealing last, 271 bytes 1.27x; 79-191
		// bytes 0.83-0.91x.
		first, end := newLabel("stealFirst"), newLabel("end")
		if f.zmm {
			late := newLabel("stealLate")
			CMPQ(c.blocks, Imm(17))
			JB(LabelRef(late))
			DECQ(c.blocks)
			c.tweakPow(X1, asX(c.tw))
			c.mulXBits(c.tm1(), X1, 1, X13, X14, c.xmmCLMUL(), c.polyX())
			c.early = true
			c.bulk(nil)
			c.early = false
			JMP(LabelRef(end))
			Label(late)
		}
		lastFrom := 4 * c.f.lanes
		if f.clmul {
			// vaes512c (Intel): stealing last from 8 whole blocks.
			// Measured on family 6 model 167, interleaved, calls on
			// 16 buffers in turn (as the sector layer and xtsctl
			// bench call), new/old, XTS-AES-256 / -128: 129-143 bytes
			// 1.25 / 1.15, 193-207 1.33 / 1.30, 175 and 239-255
			// 1.05-1.18, 145-159, 191 and 223 0.94-0.98; every one
			// 1.03-1.19 of vaes256. With each call on the previous
			// one's output (one buffer) 129-175 bytes ran 0.88-0.92,
			// 193-255 1.02-1.12.
			lastFrom = 8
		}
		CMPQ(c.blocks, Imm(uint64(lastFrom)))
		JB(LabelRef(first))
		if f.clmul {
			// ... except 9, 11 and 13 whole blocks, where it ran at
			// 0.95-0.97 of stealing first (vaes512's code). Stealing
			// first there, new/old: 16 buffers 1.02-1.07; one buffer
			// in place 1.07-1.10 at 9 blocks, 0.98-0.99 at 11 and 13.
			MOVL(U32(1<<9|1<<11|1<<13), R13L)
			BTQ(c.blocks, R13)
			JCS(LabelRef(first))
		}
		c.tweakPow(c.tm1(), asX(c.tw))
		Label(bulk)
		c.bulk(nil)
		c.stealLast()
		JMP(LabelRef(end))
		Label(first)
		DECQ(c.blocks)
		c.steal(asX(c.tw))
		c.bulk(nil)
		Label(end)
	}
	VZEROUPPER()
	RET()
}

// steal does the ciphertext stealing over whole block m = DX (the last) and
// the R11 tail bytes after it, before the bulk touches blocks 0..m-1.
func (c *vk) steal(base VecPhysical) {
	poly := c.polyX()
	Comment("Ciphertext stealing. X1 = T_m = T*x^m (m = DX, T = lane 0 of X"+fmt.Sprint(base.PhysicalIndex())+"):",
		"x^64 steps, each a qword move plus one carry-less multiplication,",
		"then one step of x^(m%64); X3 = T_m+1. X0 = XEX of block m (CC; PP",
		"when decrypting), X2 = the last 16 bytes of src shifted so the tail",
		"starts at byte 0 (VPSHUFB with a ctsShuffle window X11), X14 = X0",
		"shifted so its first tail bytes end the buffer, stored at dst+n-16",
		"before block m's final store overwrites the rest; X0 = blend(X2, X0)",
		"is XEXed again. Scratch: X8, X13-X15 (X4-X7, the tweak vectors, are",
		"left alone).")
	c.tweakPow(X1, base) // X1 = T_m; X3 = 64 - m%64, as mulXBits expects
	c.mulXBits(X3, X1, 1, X13, X14, c.xmmCLMUL(), poly)
	c.stealAt(X1, X3, false)
}

// tm1 is the register that carries T_m+1 across the bulk when encrypting
// (one the bulk does not touch).
func (c *vk) tm1() VecPhysical {
	if c.f.zmm {
		return X15
	}
	return X11
}

// tweakPow sets dst = tw * x^DX (xmm): x^64 steps, each a qword move and
// one carry-less multiplication, then one step of x^(DX%64). Scratch: X2,
// X3, X13, X14, R13, R14.
func (c *vk) tweakPow(dst, tw VecPhysical) {
	poly := c.polyX()
	VMOVDQA(tw, dst)
	MOVQ(c.blocks, R13)
	l64, rest := newLabel("x64_"), newLabel("xrest")
	Label(l64)
	CMPQ(R13, Imm(64))
	JB(LabelRef(rest))
	raw(c.xmmCLMUL(), "VPCLMULQDQ", Imm(0x01), poly, dst, X2)
	VPSLLDQ(Imm(8), dst, dst)
	VPXOR(X2, dst, dst)
	SUBQ(Imm(64), R13)
	JMP(LabelRef(l64))
	Label(rest)
	VMOVQ(R13, X2)
	MOVQ(U32(64), R14)
	SUBQ(R13, R14)
	VMOVQ(R14, X3)
	VPSRLQ(X3, dst, X13)
	VPSLLQ(X2, dst, dst)
	raw(c.xmmCLMUL(), "VPCLMULQDQ", Imm(0x01), poly, X13, X14)
	VPSLLDQ(Imm(8), X13, X13)
	c.xor3(dst, X13, X14)
}

// stealLast finishes an encryption whose bulk included block m: SI and DI
// point just past it, R11 tail bytes follow, c.tm1() holds T_m+1.
func (c *vk) stealLast() {
	done := newLabel("stolen")
	Comment("Ciphertext stealing after the bulk (encryption): X0 = CC, block m's",
		"ciphertext, read back; X1 = the tail of src moved to byte 0; the first",
		"tail bytes of CC go to the end of dst, and blend(X1, CC) is XEXed",
		"with T_m+1 into block m.")
	TESTQ(c.tail, c.tail)
	JZ(LabelRef(done))
	VMOVDQU(Mem{Base: c.dst, Disp: -16}, X0)
	VMOVDQU(Mem{Base: c.src, Index: c.tail, Scale: 1, Disp: -16}, X1)
	LEAQ(ctsShuffle, R8)
	MOVQ(U32(32), R10)
	SUBQ(c.tail, R10)
	VMOVDQU(Mem{Base: R8, Index: R10, Scale: 1}, X2)
	VPSHUFB(X2, X1, X1)
	VMOVDQU(Mem{Base: R8, Index: c.tail, Scale: 1}, X3)
	VPSHUFB(X3, X0, X5)
	VMOVDQU(X5, Mem{Base: c.dst, Index: c.tail, Scale: 1, Disp: -16})
	VPBLENDVB(X2, X0, X1, X0)
	c.xex1(X0, c.tm1(), X8, false)
	VMOVDQU(X0, Mem{Base: c.dst, Disp: -16})
	Label(done)
}

// stealDecFirst starts the stealing of a decryption (DX = m, the last
// whole block): X1 = T_m, X3 = T_m+1 as in steal, PP = XEX^-1(C_m, T_m+1),
// the tail of the plaintext (PP's first tail bytes) stored at dst+n-16,
// and cc = C_m+1 || PP[tail:], which the bulk decrypts as block m.
func (c *vk) stealDecFirst(cc VecPhysical) {
	poly := c.polyX()
	Comment("Ciphertext stealing (decryption), first: X1 = T_m, X3 = T_m+1;",
		"X0 = PP = XEX^-1(C_m, T_m+1); X2 = the tail of src moved to byte 0",
		"(ctsShuffle window X5); PP's first tail bytes, moved to the end (X7),",
		"stored at dst+n-16; CC = blend(X2, PP) waits for the bulk's final",
		"vector, which decrypts it as block m.")
	VMOVDQA(asX(c.tw), X1)
	MOVQ(c.blocks, R13)
	l64, rest := newLabel("x64_"), newLabel("xrest")
	Label(l64)
	CMPQ(R13, Imm(64))
	JB(LabelRef(rest))
	raw(c.xmmCLMUL(), "VPCLMULQDQ", Imm(0x01), poly, X1, X2)
	VPSLLDQ(Imm(8), X1, X1)
	VPXOR(X2, X1, X1)
	SUBQ(Imm(64), R13)
	JMP(LabelRef(l64))
	Label(rest)
	VMOVQ(R13, X2)
	MOVQ(U32(64), R14)
	SUBQ(R13, R14)
	VMOVQ(R14, X3)
	VPSRLQ(X3, X1, X13)
	VPSLLQ(X2, X1, X1)
	raw(c.xmmCLMUL(), "VPCLMULQDQ", Imm(0x01), poly, X13, X14)
	VPSLLDQ(Imm(8), X13, X13)
	c.xor3(X1, X13, X14)
	c.mulXBits(X3, X1, 1, X13, X14, c.xmmCLMUL(), poly)
	MOVQ(c.blocks, R13)
	SHLQ(Imm(4), R13)
	VMOVDQU(Mem{Base: c.src, Index: R13, Scale: 1}, X0)
	c.xex1(X0, X3, X8, false)
	c.ctsSwap(X0, X2, X5, X6, X7, cc)
}

// ctsSwap is ciphertext stealing's exchange at block m, R13 = 16*m bytes
// in: the first R11 bytes of cc (the whole block's output) go to the
// partial block at the end of dst, and pp = the R11 tail bytes of src
// followed by the rest of cc. t, a, b and o are scratch (o may be b);
// R8, R10 and R14 are clobbered.
func (c *vk) ctsSwap(cc, t, a, b, o, pp VecPhysical) {
	LEAQ(Mem{Base: c.src, Index: R13, Scale: 1}, R14)
	VMOVDQU(Mem{Base: R14, Index: c.tail, Scale: 1}, t)
	LEAQ(ctsShuffle, R8)
	MOVQ(U32(32), R10)
	SUBQ(c.tail, R10)
	VMOVDQU(Mem{Base: R8, Index: R10, Scale: 1}, a)
	VPSHUFB(a, t, t)
	VMOVDQU(Mem{Base: R8, Index: c.tail, Scale: 1}, b)
	VPSHUFB(b, cc, o)
	LEAQ(Mem{Base: c.dst, Index: R13, Scale: 1}, R14)
	VMOVDQU(o, Mem{Base: R14, Index: c.tail, Scale: 1})
	VPBLENDVB(a, cc, t, pp)
}

// finalGroup decrypts the r = DX (< L) blocks left after the bulk's whole
// vectors together with cc as block m, whose tweak T_m is lane r of T0, in
// one vector where they fit, and stores the r+1 plaintext blocks.
func (c *vk) finalGroup(cc VecPhysical) {
	done := newLabel("groupDone")
	if c.f.zmm {
		Comment("Final group: r = DX blocks from src and CC (block m). r = 2 or 3:",
			"one zmm vector [b0, b1, b2 or CC, CC or unused]; r = 1: ymm [b0, CC];",
			"r = 0: CC alone in xmm.")
		r1, r0, z, st3 := newLabel("group1_"), newLabel("group0_"), newLabel("groupZ"), newLabel("group3_")
		CMPQ(c.blocks, Imm(2))
		JB(LabelRef(r1))
		VMOVDQU(Mem{Base: c.src}, Y0)
		JE(LabelRef(z))
		VINSERTI32X4(Imm(2), Mem{Base: c.src, Disp: 32}, Z0, Z0)
		VINSERTI32X4(Imm(3), cc, Z0, Z0)
		c.xexVec(c.V[:1], c.T[:1])
		JMP(LabelRef(st3))
		Label(z)
		VINSERTI32X4(Imm(2), cc, Z0, Z0)
		c.xexVec(c.V[:1], c.T[:1])
		VMOVDQU(Y0, Mem{Base: c.dst})
		VEXTRACTI32X4(Imm(2), Z0, X1)
		VMOVDQU(X1, Mem{Base: c.dst, Disp: 32})
		JMP(LabelRef(done))
		Label(st3)
		VMOVDQU64(Z0, Mem{Base: c.dst})
		JMP(LabelRef(done))
		Label(r1)
		TESTQ(c.blocks, c.blocks)
		JZ(LabelRef(r0))
		VMOVDQU(Mem{Base: c.src}, X0)
		VINSERTI128(Imm(1), cc, Y0, Y0)
		c.xexY(Y0, Y4)
		VMOVDQU(Y0, Mem{Base: c.dst})
		JMP(LabelRef(done))
		Label(r0)
	} else {
		Comment("Final group: r = DX (0 or 1) blocks from src and CC (block m):",
			"r = 1: one ymm vector [b0, CC]; r = 0: CC alone in xmm.")
		r0 := newLabel("group0_")
		TESTQ(c.blocks, c.blocks)
		JZ(LabelRef(r0))
		VMOVDQU(Mem{Base: c.src}, X0)
		VINSERTI128(Imm(1), cc, Y0, Y0)
		c.xexVec(c.V[:1], c.T[:1])
		VMOVDQU(Y0, Mem{Base: c.dst})
		JMP(LabelRef(done))
		Label(r0)
	}
	VMOVDQA(cc, X0)
	c.xex1(X0, X4, asX(c.tmp[0]), false)
	VMOVDQU(X0, Mem{Base: c.dst})
	Label(done)
}

// stealAt does the stealing over whole block m = DX and the tail after
// it, one xmm block after the other (tm = T_m, tm1 = T_m+1); decryption
// (see steal) and the short path use it.
func (c *vk) stealAt(tm, tm1 VecPhysical, memKeys bool) {
	first, second := tm, tm1
	if c.dec {
		first, second = tm1, tm
	}
	MOVQ(c.blocks, R13)
	SHLQ(Imm(4), R13)
	VMOVDQU(Mem{Base: c.src, Index: R13, Scale: 1}, X0)
	c.xex1(X0, first, X8, memKeys)
	c.ctsSwap(X0, X2, X11, X13, X14, X0)
	c.xex1(X0, second, X8, memKeys)
	VMOVDQU(X0, Mem{Base: c.dst, Index: R13, Scale: 1})
}

// short handles data units shorter than one vector of blocks (64 bytes for
// zmm, 32 for ymm) in xmm, with the round keys as memory operands: such
// units skip the wide kernel's set-up (broadcasting the round keys,
// building the tweak vectors), which would lengthen their latency chain.
// In vaes512c two or three whole blocks take shortPair instead.
func (c *vk) short() {
	Comment("Short data unit: one block at a time in xmm, X4 the running tweak,",
		"then the stealing (X1 = T_m, X3 = T_m+1) if n%16 != 0. Returns.")
	noTail := newLabel("shortNoTail")
	TESTQ(c.tail, c.tail)
	JZ(LabelRef(noTail))
	DECQ(c.blocks)
	Label(noTail)
	VMOVDQA(asX(c.tw), X4)
	loop, steal, done := newLabel("shortLoop"), newLabel("shortSteal"), newLabel("shortDone")
	pair := newLabel("shortPairs")
	if c.f.clmul {
		// shortPair is placed after the loop, so that one block falls
		// through: taking the branch to the loop cost 16-byte units 5-7%
		// against vaes512 (which has no branch there), calls on 16
		// buffers, Intel family 6 model 167; placed here, new/old 1.04
		// (XTS-AES-128) and 0.98-0.99 of vaes512, 32-48 bytes unchanged.
		CMPQ(c.blocks, Imm(2))
		JAE(LabelRef(pair))
	}
	Label(loop)
	TESTQ(c.blocks, c.blocks)
	JZ(LabelRef(steal))
	VMOVDQU(Mem{Base: c.src}, X0)
	c.xex1(X0, X4, X5, true)
	VMOVDQU(X0, Mem{Base: c.dst})
	vexMulX(X4, X5)
	ADDQ(Imm(16), c.src)
	ADDQ(Imm(16), c.dst)
	DECQ(c.blocks)
	JMP(LabelRef(loop))
	Label(steal)
	TESTQ(c.tail, c.tail)
	JZ(LabelRef(done))
	VMOVDQA(X4, X1)
	VMOVDQA(X4, X3)
	vexMulX(X3, X5)
	c.stealAt(X1, X3, true)
	Label(done)
	RET()
	if c.f.clmul {
		Label(pair) // flags from comparing DX with 2, as shortPair expects
		c.shortPair()
	}
}

// shortPair is vaes512c's short path for two or three whole blocks (DX,
// flags from comparing it with 2; X4 = T0), each with or without the
// stealing after them: they go through AES together,
// blocks 0 and 1 as one ymm vector and block 2 in xmm, each round key
// broadcast once from memory for both (a load, no ALU port). short's loop
// spends an AES instruction per block and round; with calls in flight the
// AES ports bound them, and 48-byte units ran 3-9% behind vaes256 on Intel
// (BENCHMARKS.md, "Dispatch per CPU"). vaes512, tuned on AMD, keeps the
// loop. Returns.
func (c *vk) shortPair() {
	Comment("Two or three whole blocks: X5 = T1, X6 = T2; blocks 0-1 in Y0 with",
		"tweaks [T0, T1] in Y9, block 2 in X2, the round key broadcast into Y3;",
		"two blocks and a tail: the stealing over block 2 (X6 = T2, X7 = T3).")
	two, done := newLabel("shortTwo"), newLabel("shortPairDone")
	VMOVDQA(X4, X5)
	vexMulX(X5, X8)
	VMOVDQA(X5, X6)
	vexMulX(X6, X8)
	VINSERTI128(Imm(1), X5, Y4, Y9)
	VMOVDQU(Mem{Base: c.src}, Y0)
	JE(LabelRef(two))
	Comment("Three whole blocks; with a tail, the stealing over block 3 (X1 = T3,",
		"X3 = T4).")
	VMOVDQU(Mem{Base: c.src, Disp: 32}, X2)
	c.xexPair(true)
	VMOVDQU(Y0, Mem{Base: c.dst})
	VMOVDQU(X2, Mem{Base: c.dst, Disp: 32})
	TESTQ(c.tail, c.tail)
	JZ(LabelRef(done))
	VMOVDQA(X6, X1)
	vexMulX(X1, X8)
	VMOVDQA(X1, X3)
	vexMulX(X3, X8)
	c.stealAt(X1, X3, true)
	JMP(LabelRef(done))
	Label(two)
	c.xexPair(false)
	VMOVDQU(Y0, Mem{Base: c.dst})
	TESTQ(c.tail, c.tail)
	JZ(LabelRef(done))
	VMOVDQA(X6, X7)
	vexMulX(X7, X8)
	c.stealAt(X6, X7, true)
	Label(done)
	VZEROUPPER()
	RET()
}

// xexPair runs XEX on blocks 0-1 in Y0 (tweaks Y9) and, if third, block 2
// in X2 (tweak X6), the round keys broadcast into Y3 from key1's schedule.
func (c *vk) xexPair(third bool) {
	isa := []string{"AVX", "VAES"}
	key := func(j int) {
		VBROADCASTI128(keyMem(c.ks, c.kend, j), Y3)
	}
	round := func(op string, ky, kx VecPhysical) {
		raw(isa, op, ky, Y0, Y0)
		if third {
			raw([]string{"AES", "AVX"}, op, kx, X2, X2)
		}
	}
	key(0)
	VPTERNLOGD(Imm(0x96), Y3, Y9, Y0)
	if third {
		VPTERNLOGD(Imm(0x96), X3, X6, X2)
	}
	skip := newLabel("aes128_")
	CMPQ(c.rounds, Imm(10))
	JE(LabelRef(skip))
	for j := 1; j <= 4; j++ {
		key(j)
		round(c.op(false), Y3, X3)
	}
	Label(skip)
	for j := 5; j <= 13; j++ {
		key(j)
		round(c.op(false), Y3, X3)
	}
	key(14)
	VPXOR(Y3, Y9, Y10)
	if third {
		VPXOR(X3, X6, X11)
	}
	round(c.op(true), Y10, X11)
}

// vaesSectors emits xts{Enc,Dec}Sectors{VAES256,VAES512}: consecutive data
// units of one size (a multiple of 16), plain64 tweaks sector + i*step.
func vaesSectors(f flavor, dec bool) {
	c := newVK(f, dec)
	L := f.lanes
	TEXT(fmt.Sprintf("xts%sSectors%s", dirName(dec), f.name), NOSPLIT, sectorsSig)
	var twNext, ivec, ktw VecPhysical
	if f.zmm {
		twNext, ivec, ktw = Z13, Z14, Z15
	} else {
		twNext, ivec, ktw = Y11, Y12, Y8
	}
	c.kend2 = RCX
	if f.zmm {
		c.upd = [2]VecPhysical{Z14, Z15} // Z13 carries the next group's tweaks
	}
	Comment(fmt.Sprintf("XTS-AES %s of n/unit data units with VAES on %d-bit vectors.", map[bool]string{false: "encryption", true: "decryption"}[dec], 128*f.lanes),
		"GPRs: AX key1 schedule, BX key2 schedule, R12 rounds, R9/CX the address of",
		"their last round keys, DI dst, SI src, R8 blocks left in the batch, R10",
		"blocks per unit, DX blocks left in the unit, R13 the next group's first",
		"sector number, R14 step, R11 units left in the current group.",
		fmt.Sprintf("The tweaks of %d units at a time are encrypted with key2 in one vector", L),
		"chain (lane j: sector number j of the group), one group ahead, so that",
		"chain runs while the previous group's data is being processed.")
	if f.zmm {
		Comment("Z12 the current group's encrypted tweaks (rotated so lane 0 is the",
			"current unit's), Z13 the next group's, Z14 its sector numbers, Z15 a",
			"key2 round key (Z14-Z15 are the main loop's tweak-update scratch); the",
			"rest as in xtsEncVAES512.")
	} else {
		Comment("Y10 the current group's encrypted tweaks (lane 0 the current unit's),",
			"Y11 the next group's, Y12 its sector numbers, Y8 also key2's round keys;",
			"the rest as in xtsEncVAES256.")
	}
	Load(Param("ks"), c.ks)
	Load(Param("tk"), c.tk)
	Load(Param("rounds"), c.rounds)
	Load(Param("dst"), c.dst)
	Load(Param("src"), c.src)
	Load(Param("n"), R8)
	Load(Param("unit"), R10)
	Load(Param("sector"), R13)
	Load(Param("step"), R14)
	MOVQ(c.rounds, c.kend)
	SHLQ(Imm(4), c.kend)
	MOVQ(c.kend, c.kend2)
	ADDQ(c.ks, c.kend)
	ADDQ(c.tk, c.kend2)
	c.loadKeys()
	SHRQ(Imm(4), R8)
	SHRQ(Imm(4), R10)
	groupTweaks := func() {
		Comment("Next group's tweaks: sector numbers into the lanes' low qwords, E_K2.")
		VMOVQ(R13, asX(ivec))
		if f.zmm {
			LEAQ(Mem{Base: R13, Index: R14, Scale: 1}, RDX)
			VMOVQ(RDX, X15)
			VINSERTI32X4(Imm(1), X15, Z14, Z14)
			LEAQ(Mem{Base: R13, Index: R14, Scale: 2}, RDX)
			VMOVQ(RDX, X15)
			VINSERTI32X4(Imm(2), X15, Z14, Z14)
			ADDQ(R14, RDX)
			VMOVQ(RDX, X15)
			VINSERTI32X4(Imm(3), X15, Z14, Z14)
			LEAQ(Mem{Base: R13, Index: R14, Scale: 4}, R13)
		} else {
			LEAQ(Mem{Base: R13, Index: R14, Scale: 1}, RDX)
			VMOVQ(RDX, X8)
			VINSERTI128(Imm(1), X8, Y12, Y12)
			LEAQ(Mem{Base: R13, Index: R14, Scale: 2}, R13)
		}
		key := func(j int) Op {
			if f.zmm {
				VBROADCASTI32X4(keyMem(c.tk, c.kend2, j), ktw)
			} else {
				VBROADCASTI128(keyMem(c.tk, c.kend2, j), ktw)
			}
			return ktw
		}
		c.xor(key(0), ivec, ivec)
		c.middle([]VecPhysical{ivec}, "VAESENC", key, c.vecAES())
		raw(c.vecAES(), "VAESENCLAST", key(14), ivec, twNext)
	}

	groupTweaks()
	group, sector, done := newLabel("group"), newLabel("unit"), newLabel("done")
	if f.zmm {
		general := newLabel("general")
		Comment("Units of a multiple of 16 blocks: the pipelined loop.")
		TESTQ(U32(15), R10)
		JNZ(LabelRef(general))
		c.sectorsPipelined(groupTweaks, twNext, done)
		Label(general)
	}
	Label(group)
	c.mov(twNext, c.tw)
	groupTweaks()
	MOVQ(U32(uint32(L)), R11)
	Label(sector)
	MOVQ(R10, c.blocks)
	c.bulk(nil)
	if f.zmm {
		VALIGNQ(Imm(2), c.tw, c.tw, c.tw)
	} else {
		VPERMQ(Imm(0x4e), c.tw, c.tw)
	}
	SUBQ(R10, R8)
	JZ(LabelRef(done))
	DECQ(R11)
	JNZ(LabelRef(sector))
	JMP(LabelRef(group))
	Label(done)
	VZEROUPPER()
	RET()
}

// sectorsPipelined is the zmm multi-sector loop for units of a multiple of
// 16 blocks (256 bytes: every sector size), so that every main-loop
// iteration lies within one unit. Built like bulk's main loop, except that
// in a unit's last iteration, where the tweak vectors have no next value,
// the hook after round 7 builds the next unit's tweak vectors instead (and
// at a group's end takes the next group's tweaks and starts the chain of
// the group after). That work then sits among this iteration's AES
// instructions: placed before the next unit's loop, as bulk does, its
// carry-less multiplications queued behind the older AES work and the
// next unit's first round waited for them (measured, 512-byte units:
// 81% of the raw AES rate with tweak vectors built between units, 92%
// with none built at all).
func (c *vk) sectorsPipelined(groupTweaks func(), twNext VecPhysical, done string) {
	L := c.f.lanes
	build := func() {
		Comment("Tweak vectors of the unit whose tweak is lane 0 of Z12.")
		VSHUFI64X2(Imm(0), c.tw, c.tw, c.T[3])
		for k := 0; k < 4; k++ {
			c.mulXLanes(c.T[k], c.T[3], k, c.upd[0], c.upd[1], nil)
		}
	}
	c.mov(twNext, c.tw)
	groupTweaks()
	MOVQ(U32(uint32(L)), R11)
	build()
	MOVQ(R10, c.blocks)

	iter := newLabel("pipe")
	Comment("Per iteration: 16 blocks of one unit: loads; whitening with tweak and",
		"key 0 in one XOR; the last round's keys key14^tweak into Z8-Z11; rounds",
		"1-7; then either every tweak vector times x^16 (byte shifts, the top 16",
		"bits reduced by "+map[bool]string{false: "shifts and XORs", true: "one VPCLMULQDQ with 0x87"}[c.f.clmul]+") or, in the unit's",
		"last iteration, the next unit's tweak vectors built; rounds 8-13; the",
		"last round; stores.")
	Label(iter)
	for i, v := range c.V {
		c.load(Mem{Base: c.src, Disp: 16 * L * i}, v)
	}
	for i, v := range c.V {
		VPTERNLOGD(Imm(0x96), zregs[16], c.T[i], v)
	}
	for i, t := range c.T {
		VPXORD(zregs[30], t, c.tmp[i])
	}
	c.middleHook(c.V, c.op(false), c.vkey, c.vecAES(), 7, func() {
		last, newGroup, next, cont := newLabel("unitEnd"), newLabel("newGroup"), newLabel("nextUnit"), newLabel("cont")
		CMPQ(c.blocks, Imm(16))
		JE(LabelRef(last))
		for _, t := range c.T {
			c.mulXBytes(t, 2, c.upd[0], c.upd[1])
		}
		JMP(LabelRef(cont))
		Label(last)
		VALIGNQ(Imm(2), c.tw, c.tw, c.tw)
		DECQ(R11)
		JNZ(LabelRef(next))
		Label(newGroup)
		c.mov(twNext, c.tw)
		groupTweaks()
		MOVQ(U32(uint32(L)), R11)
		Label(next)
		build()
		LEAQ(Mem{Base: R10, Disp: 16}, c.blocks)
		Label(cont)
	})
	for i, v := range c.V {
		raw(c.vecAES(), c.op(true), c.tmp[i], v, v)
	}
	for i, v := range c.V {
		c.store(v, Mem{Base: c.dst, Disp: 16 * L * i})
	}
	ADDQ(imm(64*L), c.src)
	ADDQ(imm(64*L), c.dst)
	SUBQ(Imm(16), c.blocks)
	SUBQ(Imm(16), R8)
	JNZ(LabelRef(iter))
	JMP(LabelRef(done))
}

// peel XEXes the unit's first four blocks as one vector of their own
// (tweaks T*x^0..3 in Z8) before the main loop, and builds that loop's U0-U3
// = T*x^(4..19) ^ key14 from a, T in every lane. Scratch: b, cc, Z9.
//
// Why: a call's tweak chain (encryptTweakWide) waits for the AES units,
// which the previous call's last main-loop iteration keeps busy to its
// end (four vectors of 4-cycle rounds issue one a cycle, oldest first).
// With four blocks peeled, every multiple of 256 bytes ends in 12 blocks,
// which pairedExit runs as three vectors: their rounds leave every fourth
// AES slot free for the next call's chain. The peeled vector's rounds run
// beside the first iteration's. Measured (interleaved A/B against the
// loop without peel, XTS-AES-256, medians of new/old speed, two runs):
// 768 B 1.049-1.056x, 1024 B 1.042-1.053x, 4096 B 1.011-1.016x, 16 KiB
// 1.003-1.006x, about 15 cycles a call. Most of the chain still shows:
// leaving its rounds out (timing only) would gain 1024-byte units
// another 18%. A tail of two vectors (timing only) gained less (1024 B
// 1.02x): half the slots idle is more than the chain fills. Below 48
// blocks the peel does not pay (512 B: 0.95-0.99x), so 16 to 47 blocks
// take the loop alone.
func (c *vk) peel(a, b, cc VecPhysical) {
	p, last := Z8, Z9
	c.mulXLanes(p, a, 0, b, cc, nil)
	for k := 0; k < 4; k++ {
		c.mulXLanes(c.T[k], a, k+1, b, cc, zregs[30])
	}
	c.load(Mem{Base: c.src}, c.V[0])
	VPTERNLOGD(Imm(0x96), zregs[16], p, c.V[0])
	VPXORD(zregs[30], p, last)
	c.middle(c.V[:1], c.op(false), c.vkey, c.vecAES())
	raw(c.vecAES(), c.op(true), last, c.V[0], c.V[0])
	c.store(c.V[0], Mem{Base: c.dst})
	ADDQ(Imm(64), c.src)
	ADDQ(Imm(64), c.dst)
	SUBQ(Imm(4), c.blocks)
}

// peelSteal is peel for an encryption with ciphertext stealing, DX = m
// (the last whole block) >= 16, X1 = T_m, c.tm1() = T_m+1: the peeled
// vector holds blocks 0-2 and block m, so C_m is known early; the
// stealing block PP = P_tail || C_m[tail:] is left at dst+16m (R14, kept
// for stealPending) and C_m's first tail bytes are stored at the end; the
// main loop then starts at block 3 (U0-U3 = T*x^(3..18) ^ key14), with
// SI and DI 48 bytes on, DX = m-3. Blocks 0-2 are loaded as they are
// stored, 32 + 16 bytes, so that on an in-place buffer each load can be
// forwarded from one of the previous call's stores. Scratch: Z9-Z11,
// R8, R10, R13.
func (c *vk) peelSteal(a, b, cc VecPhysical) {
	p, last := Z8, Z9
	c.mulXLanes(p, a, 0, b, cc, nil)
	VINSERTI32X4(Imm(3), X1, p, p)
	for k := 0; k < 4; k++ {
		c.mulXLanesAt(c.T[k], a, 4*k+3, b, cc, zregs[30])
	}
	MOVQ(c.blocks, R13)
	SHLQ(Imm(4), R13)
	VMOVDQU(Mem{Base: c.src}, Y0)
	VINSERTI32X4(Imm(2), Mem{Base: c.src, Disp: 32}, c.V[0], c.V[0])
	VINSERTI32X4(Imm(3), Mem{Base: c.src, Index: R13, Scale: 1}, c.V[0], c.V[0])
	VPTERNLOGD(Imm(0x96), zregs[16], p, c.V[0])
	VPXORD(zregs[30], p, last)
	c.middle(c.V[:1], c.op(false), c.vkey, c.vecAES())
	raw(c.vecAES(), c.op(true), last, c.V[0], c.V[0])
	Comment("Blocks 0-2 stored (not lane 3: in place, block 3 is still to be",
		"read); X8 = CC = C_m, lane 3; X9 = the tail of src moved to byte 0;",
		"CC's first tail bytes go to the end of dst, and PP = blend(X9, CC)",
		"to block m of dst, where the main loop XEXes it with T_m+1.")
	VMOVDQU(Y0, Mem{Base: c.dst})
	VEXTRACTI32X4(Imm(2), c.V[0], X10)
	VMOVDQU(X10, Mem{Base: c.dst, Disp: 32})
	VEXTRACTI32X4(Imm(3), c.V[0], X8)
	c.ctsSwap(X8, X9, X10, X11, X11, X8)
	VMOVDQU(X8, Mem{Base: R14})
	ADDQ(Imm(48), c.src)
	ADDQ(Imm(48), c.dst)
	SUBQ(Imm(3), c.blocks)
}

// pairedExit ends mainPaired with U in u: with 12 blocks or more left (all
// multiples of 256 bytes after peel) three vectors of them run with U, no
// tweak update, and T0 = U3 ^ key14 is the tweak vector of the 0-3 blocks
// left; otherwise T = U ^ key14 into T0-T3.
func (c *vk) pairedExit(u []VecPhysical, kx VecPhysical, exit string) {
	conv := newLabel("convert")
	Comment("12 blocks or more left: three vectors with U (see peel), then T0 =",
		"U3 ^ key14. Fewer: T = U ^ key14.")
	CMPQ(c.blocks, Imm(12))
	JB(LabelRef(conv))
	vs := c.V[:3]
	for i, v := range vs {
		c.load(Mem{Base: c.src, Disp: 64 * i}, v)
	}
	for i, v := range vs {
		VPTERNLOGD(Imm(0x96), kx, u[i], v)
	}
	c.middle(vs, c.op(false), c.vkey, c.vecAES())
	for i, v := range vs {
		raw(c.vecAES(), c.op(true), u[i], v, v)
	}
	for i, v := range vs {
		c.store(v, Mem{Base: c.dst, Disp: 64 * i})
	}
	ADDQ(U32(192), c.src)
	ADDQ(U32(192), c.dst)
	SUBQ(Imm(12), c.blocks)
	VPXORD(zregs[30], u[3], c.T[0])
	JMP(LabelRef(exit))
	Label(conv)
	for i, t := range c.T {
		VPXORD(zregs[30], u[i], t)
	}
	JMP(LabelRef(exit))
}

// mainPaired is the unit kernel's zmm main loop: two iterations of 16
// blocks per pass, then one if 16 blocks are left; it leaves fewer than 16
// blocks and T0-T3 their tweak vectors, as bulk's main loop does.
//
// The loop keeps U = T ^ key14 instead of T: the last round then takes U
// as its key directly, and the whitening is one XOR with U and key0^key14
// (Z16 for the loop's duration). Advancing U by x^16 is U*x^16 ^ C with C
// = key14*x^16 ^ key14 (Z31). The iterations of a pass alternate between
// Z4-Z7 and Z8-Z11: one reads its U in the whitening and the last round
// and writes the next U, after round 7, into the other four.
//
// The reductions of the four vectors are done together: the top 16 bits h
// of each lane of U0-U3 are gathered into the four dwords of one lane
// (VPUNPCKHQDQ, shifts, a masked merge), h*x^128 = h ^ h<<1 ^ h<<2 ^ h<<7
// is computed once for all four (dword shifts; 23 bits fit a dword), and
// each vector takes its dword back with a zero-masked VPSHUFD into the
// final three-way XOR with the byte-shifted U and C.
//
// That is 25 vector instructions beside the 56 AES ones per iteration,
// against 36 in xexVecEarly's loop (7 per vector for the tweak update, 4
// for the last round's keys). On Zen 4 they share the FP pipes with
// 512-bit AES, and fewer of them bring the loop closer to one AES
// instruction per cycle, though not by much. Measured against that loop
// (interleaved A/B in one binary, 301 rounds of 2000 in-place calls,
// XTS-AES-256, medians of new/old speed): 16 KiB units 1.009-1.019x,
// 4096 B 1.003-1.006x, 512 B 0.99-1.00x; the fastest rounds of each
// (10th percentile) within 1%.
func (c *vk) mainPaired() {
	ua := c.T
	ub := []VecPhysical{Z8, Z9, Z10, Z11}
	kx, cst := zregs[16], c.poly
	s := [3]VecPhysical{Z12, Z13, Z14}
	pair, single, exitA, exit := newLabel("pair"), newLabel("single"), newLabel("exitA"), newLabel("pairsDone")
	if c.f.clmul {
		Comment("Main loop (zmm): U = T ^ key14 in Z4-Z7 and Z8-Z11 in turn, Z16 =",
			"key0^key14, Z31 = C = key14*x^16 ^ key14, Z14 the 0x87 constant.")
	} else {
		Comment("Main loop (zmm): U = T ^ key14 in Z4-Z7 and Z8-Z11 in turn, Z16 =",
			"key0^key14, Z31 = C = key14*x^16 ^ key14; K1 = the odd dwords, K2 =",
			"dword 0 of each lane.")
	}
	if c.f.clmul {
		// Z14 keeps the 0x87 constant for the loop's multiplications.
		VMOVDQA64(c.poly, s[2])
		VMOVDQA64(zregs[30], cst)
		VPSRLDQ(Imm(14), cst, s[0])
		VPSLLDQ(Imm(2), cst, cst)
		raw(c.vecCLMUL(), "VPCLMULQDQ", Imm(0x00), s[2], s[0], s[0])
		VPTERNLOGD(Imm(0x96), zregs[30], s[0], cst)
	} else {
		MOVL(U32(0xaaaa), R13L)
		KMOVW(R13L, K1)
		MOVL(U32(0x1111), R13L)
		KMOVW(R13L, K2)
		VMOVDQA64(zregs[30], cst)
		c.mulXBytes(cst, 2, s[0], s[1])
		VPXORD(zregs[30], cst, cst)
	}
	VPXORD(zregs[30], kx, kx)
	if c.f.clmul {
		Comment("Per iteration: 16 blocks in four vectors; whitening with U and",
			"key0^key14 in one XOR; rounds 1-7; the next U = U*x^16 ^ C into the",
			"other four registers (per vector: byte shifts, the top 16 bits of",
			"each lane times 0x87 by one VPCLMULQDQ, one three-way XOR); rounds",
			"8-13; the last round with key U. No vector shift by bits, which",
			"Intel cores issue only to the port that runs 512-bit AES.")
	} else {
		Comment("Per iteration: 16 blocks in four vectors; whitening with U and",
			"key0^key14 in one XOR; rounds 1-7; the next U = U*x^16 ^ C into the",
			"other four registers (byte shifts; the top 16 bits of every lane of",
			"all four gathered into the dwords of one vector, times x^128 by dword",
			"shifts and XORs, handed back by zero-masked VPSHUFDs); rounds 8-13;",
			"the last round with key U.")
	}
	Label(pair)
	CMPQ(c.blocks, Imm(32))
	JB(LabelRef(single))
	c.pairedIter(ua, ub, kx, cst, s, 0)
	c.pairedIter(ub, ua, kx, cst, s, 256)
	c.stealPending()
	ADDQ(U32(512), c.src)
	ADDQ(U32(512), c.dst)
	SUBQ(Imm(32), c.blocks)
	JMP(LabelRef(pair))
	Label(single)
	CMPQ(c.blocks, Imm(16))
	JB(LabelRef(exitA))
	c.pairedIter(ua, ub, kx, cst, s, 0)
	ADDQ(U32(256), c.src)
	ADDQ(U32(256), c.dst)
	SUBQ(Imm(16), c.blocks)
	c.stealPending()
	c.pairedExit(ub, kx, exit)
	Label(exitA)
	c.stealPending()
	c.pairedExit(ua, kx, exit)
	Label(exit)
	Comment("Back to key0 in Z16 for the blocks left.")
	VPXORD(zregs[30], kx, kx)
}

// stealPending XEXes the stealing block that peelSteal left at R14 with
// T_m+1 (c.tm1()), once: R11 (the tail length, no longer needed) is zero
// afterwards. mainPaired emits it after the first pass, after the single
// iteration and before the last group, whichever comes first: placed
// there, the chain's inputs are long ready, and the loop work behind it
// in program order is not held up by its retirement. Scratch: X0, X12
// (free between iterations); Z16 is key0^key14 in the loop.
func (c *vk) stealPending() {
	if !c.early {
		return
	}
	stolen := newLabel("stolen")
	TESTQ(c.tail, c.tail)
	JZ(LabelRef(stolen))
	VMOVDQU(Mem{Base: R14}, X0)
	VPXORD(X30, c.tm1(), X12)
	VPTERNLOGD(Imm(0x96), X16, X12, X0) // X16 = key0^key14 in the loop
	c.middle([]VecPhysical{X0}, c.op(false), c.xkey, c.xmmAES())
	raw(c.xmmAES(), c.op(true), X12, X0, X0)
	VMOVDQU(X0, Mem{Base: R14})
	XORL(c.tail.As32(), c.tail.As32())
	Label(stolen)
}

// pairedIter is one iteration of mainPaired on the 16 blocks at disp: U
// in u, the next U into next.
func (c *vk) pairedIter(u, next []VecPhysical, kx, cst VecPhysical, s [3]VecPhysical, disp int) {
	for i, v := range c.V {
		c.load(Mem{Base: c.src, Disp: disp + 64*i}, v)
	}
	for i, v := range c.V {
		VPTERNLOGD(Imm(0x96), kx, u[i], v)
	}
	c.middleHook(c.V, c.op(false), c.vkey, c.vecAES(), 7, func() {
		if c.f.clmul {
			for k := range u {
				h := s[k%2]
				VPSRLDQ(Imm(14), u[k], h)
				VPSLLDQ(Imm(2), u[k], next[k])
				raw(c.vecCLMUL(), "VPCLMULQDQ", Imm(0x00), s[2], h, h)
				VPTERNLOGD(Imm(0x96), cst, h, next[k])
			}
			return
		}
		h, a, b := s[0], s[1], s[2]
		VPUNPCKHQDQ(u[1], u[0], h) // lane: high qwords of U0, U1
		VPUNPCKHQDQ(u[3], u[2], a) // of U2, U3
		VPSRLQ(Imm(48), h, h)      // dwords h0, 0, h1, 0
		VPSRLD(Imm(16), a, K1, h)  // dwords h0, h2, h1, h3
		VPADDD(h, h, a)            // h<<1
		VPSLLD(Imm(7), h, b)       // h<<7
		VPTERNLOGD(Imm(0x96), b, a, h)
		VPADDD(a, a, a) // h<<2
		VPXORD(a, h, h) // h*x^128, for U0-U3 in dwords 0, 2, 1, 3
		for k, sel := range []uint64{0, 2, 1, 3} {
			VPSLLDQ(Imm(2), u[k], next[k])
			VPSHUFD_Z(Imm(sel), h, K2, a)
			VPTERNLOGD(Imm(0x96), cst, a, next[k])
		}
	})
	for i, v := range c.V {
		raw(c.vecAES(), c.op(true), u[i], v, v)
	}
	for i, v := range c.V {
		c.store(v, Mem{Base: c.dst, Disp: disp + 64*i})
	}
}
