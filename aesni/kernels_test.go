package aesni

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
)

// These tests compare every path this machine can run (the portable path
// over crypto/aes and the assembly kernels) with the pure-Go reference
// xtsGeneric, which is never compared with itself.

func asmImpls(t testing.TB) []Impl {
	t.Helper()
	var asm []Impl
	for _, i := range impls() {
		if i != Generic && isAvailable(i) {
			asm = append(asm, i)
		}
	}
	if len(asm) == 0 {
		t.Skip("no implementation but the reference on this platform")
	}
	return asm
}

// use forces impl for the rest of the test.
func use(t testing.TB, impl Impl) {
	t.Helper()
	if err := selectImpl(impl); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(resetImpl)
}

func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func newTestCipher(t testing.TB, r *rand.Rand, keyLen int) *Cipher {
	t.Helper()
	c := new(Cipher)
	if err := c.Init(randBytes(r, keyLen)); err != nil {
		t.Fatal(err)
	}
	if c.blocks == nil {
		// Where the portable path is not the automatic choice, Init makes
		// no crypto/aes ciphers; give it some so forcing it does not
		// allocate them per call.
		c.blocks = newBlocks(c)
	}
	return c
}

// reference returns generic encryption of pt (and checks that generic
// decryption inverts it).
func reference(t testing.TB, c *Cipher, pt []byte, tw *[16]byte) []byte {
	t.Helper()
	ct := make([]byte, len(pt))
	xtsGeneric(c, ct, pt, tw, false)
	back := make([]byte, len(pt))
	xtsGeneric(c, back, ct, tw, true)
	if !bytes.Equal(back, pt) {
		t.Fatalf("reference does not round-trip at length %d", len(pt))
	}
	return ct
}

// checkPlacement runs impl (already selected) on pt/ct with the given
// source and destination buffers (dst == src for in place) and compares.
func checkPlacement(t testing.TB, what string, c *Cipher, dst, src, pt, ct []byte, tw *[16]byte) {
	t.Helper()
	copy(src, pt)
	c.Encrypt(dst, src, tw)
	if !bytes.Equal(dst, ct) {
		t.Fatalf("%s: encrypt of %d bytes differs from the reference", what, len(pt))
	}
	copy(src, ct)
	c.Decrypt(dst, src, tw)
	if !bytes.Equal(dst, pt) {
		t.Fatalf("%s: decrypt of %d bytes differs from the reference", what, len(pt))
	}
}

// nextLength steps through the lengths of the every-length tests: every
// one, or with -short (the arm64 run under qemu-user in scripts/test.bash,
// where the byte-wise reference is slow) every one up to 1100 (stealing at
// every tail, every main-loop and vector boundary) and a stride of 61 from
// there, so that tails still vary.
func nextLength(n int) int {
	if testing.Short() && n >= 1100 {
		return n + 61
	}
	return n + 1
}

// TestKernelsEveryLength: every length 16..4100, both key sizes, random
// tweaks, out of place at source/destination offsets that run through all
// 256 pairs as the length grows, and in place.
func TestKernelsEveryLength(t *testing.T) {
	impls := asmImpls(t)
	r := rand.New(rand.NewPCG(11, 12))
	src := make([]byte, 4100+16)
	dst := make([]byte, 4100+16)
	for _, keyLen := range []int{32, 64} {
		c := newTestCipher(t, r, keyLen)
		for n := 16; n <= 4100; n = nextLength(n) {
			pt := randBytes(r, n)
			var tw [16]byte
			copy(tw[:], randBytes(r, 16))
			ct := reference(t, c, pt, &tw)
			so, do := n%16, (n/16)%16
			for _, impl := range impls {
				use(t, impl)
				what := fmt.Sprintf("%v, %d-byte key, offsets %d/%d", impl, keyLen, so, do)
				checkPlacement(t, what, c, dst[do:do+n], src[so:so+n], pt, ct, &tw)
				checkPlacement(t, what+", in place", c, src[so:so+n], src[so:so+n], pt, ct, &tw)
			}
		}
	}
}

// TestKernelsRandomLengths covers lengths up to 12 KiB.
func TestKernelsRandomLengths(t *testing.T) {
	impls := asmImpls(t)
	r := rand.New(rand.NewPCG(13, 14))
	const max = 12 << 10
	src := make([]byte, max+16)
	dst := make([]byte, max+16)
	for i := 0; i < 200; i++ {
		n := 16 + r.IntN(max-15)
		c := newTestCipher(t, r, 32*(1+r.IntN(2)))
		pt := randBytes(r, n)
		var tw [16]byte
		copy(tw[:], randBytes(r, 16))
		ct := reference(t, c, pt, &tw)
		so, do := r.IntN(16), r.IntN(16)
		for _, impl := range impls {
			use(t, impl)
			what := fmt.Sprintf("%v, %d-byte key, offsets %d/%d", impl, 4*c.rounds-24, so, do)
			checkPlacement(t, what, c, dst[do:do+n], src[so:so+n], pt, ct, &tw)
			checkPlacement(t, what+", in place", c, src[so:so+n], src[so:so+n], pt, ct, &tw)
		}
	}
}

// TestKernelsMisalignment runs every source/destination offset pair 0..15
// over lengths around each kernel's vector and loop boundaries.
func TestKernelsMisalignment(t *testing.T) {
	impls := asmImpls(t)
	r := rand.New(rand.NewPCG(15, 16))
	lengths := []int{16, 17, 31, 32, 47, 48, 63, 64, 65, 127, 128, 129, 255, 256, 257, 271, 511, 512, 1420, 4096, 4111}
	src := make([]byte, 4111+16)
	dst := make([]byte, 4111+16)
	for _, keyLen := range []int{32, 64} {
		c := newTestCipher(t, r, keyLen)
		for _, n := range lengths {
			pt := randBytes(r, n)
			var tw [16]byte
			copy(tw[:], randBytes(r, 16))
			ct := reference(t, c, pt, &tw)
			for _, impl := range impls {
				use(t, impl)
				for so := 0; so < 16; so++ {
					for do := 0; do < 16; do++ {
						what := fmt.Sprintf("%v, %d-byte key, offsets %d/%d", impl, keyLen, so, do)
						checkPlacement(t, what, c, dst[do:do+n], src[so:so+n], pt, ct, &tw)
					}
					checkPlacement(t, fmt.Sprintf("%v, in place at offset %d", impl, so), c, src[so:so+n], src[so:so+n], pt, ct, &tw)
				}
			}
		}
	}
}

// TestKernelsTweakEdges uses tweaks whose multiplications by x carry out
// of bit 63 and bit 127 at once, and the all-zero and all-one tweaks.
func TestKernelsTweakEdges(t *testing.T) {
	impls := asmImpls(t)
	r := rand.New(rand.NewPCG(17, 18))
	c := newTestCipher(t, r, 64)
	var ones, zero, carries [16]byte
	for i := range ones {
		ones[i] = 0xff
	}
	carries[7], carries[15] = 0x80, 0x80
	for _, tw := range []*[16]byte{&zero, &ones, &carries} {
		for _, n := range []int{16, 100, 1024 + 15, 4096} {
			pt := randBytes(r, n)
			ct := reference(t, c, pt, tw)
			for _, impl := range impls {
				use(t, impl)
				checkPlacement(t, impl.String(), c, make([]byte, n), make([]byte, n), pt, ct, tw)
			}
		}
	}
}

// TestSectorsSplitEqualsBatch: one EncryptSectors call over many units
// equals one call per unit (reference sectorsGeneric), for unit counts
// that cross the multi-sector kernels' groups of 2 and 4, tweak counters
// that wrap, in place and out of place, for units with and without a tail.
func TestSectorsSplitEqualsBatch(t *testing.T) {
	impls := asmImpls(t)
	r := rand.New(rand.NewPCG(19, 20))
	for _, keyLen := range []int{32, 64} {
		c := newTestCipher(t, r, keyLen)
		for _, unit := range []int{16, 32, 48, 64, 80, 112, 256, 512, 768, 4096, 4096 + 16, 520} {
			for _, count := range []int{1, 2, 3, 4, 5, 7, 8, 9, 17} {
				if unit*count > 40000 && count > 9 {
					continue
				}
				pt := randBytes(r, unit*count)
				first := r.Uint64()
				if count > 4 {
					first = ^uint64(0) - 3 // the sector counter wraps inside the batch
				}
				for _, step := range []uint64{1, 8} {
					want := make([]byte, len(pt))
					sectorsGeneric(c, want, pt, unit, first, step, false)
					for _, impl := range impls {
						use(t, impl)
						what := fmt.Sprintf("%v, %d-byte key, %d x %d bytes, step %d", impl, keyLen, count, unit, step)
						got := make([]byte, len(pt))
						c.EncryptSectors(got, pt, unit, first, step)
						if !bytes.Equal(got, want) {
							t.Fatalf("%s: batch encrypt differs from one call per unit", what)
						}
						// Sector by sector through the same kernel.
						split := make([]byte, len(pt))
						for i := 0; i < count; i++ {
							c.EncryptSectors(split[i*unit:(i+1)*unit], pt[i*unit:(i+1)*unit], unit, first+uint64(i)*step, step)
						}
						if !bytes.Equal(split, want) {
							t.Fatalf("%s: unit-by-unit calls differ", what)
						}
						c.DecryptSectors(got, got, unit, first, step)
						if !bytes.Equal(got, pt) {
							t.Fatalf("%s: in-place batch decrypt failed", what)
						}
					}
				}
			}
		}
	}
}

// TestZeroAllocs: no call allocates, with every kernel.
func TestZeroAllocs(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	c := newTestCipher(t, r, 64)
	buf := make([]byte, 8192)
	var tw [16]byte
	for _, impl := range impls() {
		if !isAvailable(impl) {
			continue
		}
		use(t, impl)
		for _, n := range []int{16, 31, 512, 1420, 4096} {
			if a := testing.AllocsPerRun(10, func() {
				c.Encrypt(buf[:n], buf[:n], &tw)
				c.Decrypt(buf[:n], buf[:n], &tw)
			}); a != 0 {
				t.Errorf("%v, %d bytes: %v allocations per call", impl, n, a)
			}
		}
		for _, unit := range []int{512, 520, 4096} {
			if a := testing.AllocsPerRun(10, func() {
				c.EncryptSectors(buf[:2*unit], buf[:2*unit], unit, 7, 1)
				c.DecryptSectors(buf[:2*unit], buf[:2*unit], unit, 7, 1)
			}); a != 0 {
				t.Errorf("%v, sectors of %d bytes: %v allocations per call", impl, unit, a)
			}
		}
	}
}

// TestPickMatchesDispatchTable: the table reported for tools agrees with
// the switch the calls use, at every length up to 16 KiB.
func TestPickMatchesDispatchTable(t *testing.T) {
	resetImpl()
	table := DispatchTable()
	if len(table) == 0 || table[0].MinLen > 16 {
		t.Fatalf("dispatch table %v does not start at 16 bytes", table)
	}
	for n := 16; n <= 16<<10; n++ {
		want := table[0].Impl
		for _, e := range table {
			if n >= e.MinLen {
				want = e.Impl
			}
		}
		if got := Pick(n); got != want {
			t.Fatalf("Pick(%d) = %v, dispatch table says %v", n, got, want)
		}
		if !isAvailable(want) {
			t.Fatalf("Pick(%d) = %v, which is not available", n, want)
		}
	}
}

// TestReferenceNeverDispatched: the byte-wise reference is the oracle, not
// a production path; where no kernel runs the portable path is chosen.
func TestReferenceNeverDispatched(t *testing.T) {
	resetImpl()
	for _, n := range []int{16, 17, 512, 4096, 65536} {
		if got := Pick(n); got == Generic || !isAvailable(got) {
			t.Errorf("Pick(%d) = %v", n, got)
		}
	}
	for _, r := range DispatchTable() {
		if r.Impl == Generic {
			t.Errorf("dispatch table %v names the reference", DispatchTable())
		}
	}
}
