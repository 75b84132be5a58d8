package aesni

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/xtsctl/xtsctl/internal/testutil"
)

// TestKernelsGuardPages places source and destination flush against
// PROT_NONE pages, at the end and at the start, for every length 16..4100
// (with -short, as under emulation, see nextLength):
// a kernel that reads or writes one byte outside the data unit crashes.
func TestKernelsGuardPages(t *testing.T) {
	impls := asmImpls(t)
	r := rand.New(rand.NewPCG(23, 24))
	const max = 4100
	end, start := testutil.GuardedBuffers(t, max)
	for _, keyLen := range []int{32, 64} {
		c := newTestCipher(t, r, keyLen)
		for n := 16; n <= max; n = nextLength(n) {
			pt := randBytes(r, n)
			var tw [16]byte
			copy(tw[:], randBytes(r, 16))
			ct := reference(t, c, pt, &tw)
			atEnd, atStart := end[max-n:], start[:n]
			for _, impl := range impls {
				use(t, impl)
				what := fmt.Sprintf("%v, %d-byte key", impl, keyLen)
				checkPlacement(t, what+", src at the end guard", c, atStart, atEnd, pt, ct, &tw)
				checkPlacement(t, what+", src at the start guard", c, atEnd, atStart, pt, ct, &tw)
				checkPlacement(t, what+", in place at the end guard", c, atEnd, atEnd, pt, ct, &tw)
				checkPlacement(t, what+", in place at the start guard", c, atStart, atStart, pt, ct, &tw)
			}
		}
	}
}

// TestSectorsGuardPages does the same for the multi-sector kernels.
func TestSectorsGuardPages(t *testing.T) {
	impls := asmImpls(t)
	r := rand.New(rand.NewPCG(25, 26))
	const max = 3 * 4096
	end, start := testutil.GuardedBuffers(t, max)
	c := newTestCipher(t, r, 64)
	for _, unit := range []int{16, 48, 64, 256, 496, 512, 768, 4096} {
		for count := 1; count*unit <= max && count <= 9; count++ {
			n := count * unit
			pt := randBytes(r, n)
			want := make([]byte, n)
			sectorsGeneric(c, want, pt, unit, 5, 1, false)
			for _, impl := range impls {
				use(t, impl)
				for _, p := range [][2][]byte{{end[max-n:], start[:n]}, {start[:n], end[max-n:]}} {
					src, dst := p[0], p[1]
					copy(src, pt)
					c.EncryptSectors(dst, src, unit, 5, 1)
					if string(dst) != string(want) {
						t.Fatalf("%v, %d x %d bytes: batch encrypt differs", impl, count, unit)
					}
					c.DecryptSectors(src, dst, unit, 5, 1)
					if string(src) != string(pt) {
						t.Fatalf("%v, %d x %d bytes: batch decrypt differs", impl, count, unit)
					}
				}
			}
		}
	}
}
