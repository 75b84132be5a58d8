package blake2b

import (
	"bytes"
	"testing"

	"github.com/xtsctl/xtsctl/internal/testutil"
)

// TestGuardPages hashes inputs that end exactly at, or start exactly after,
// a PROT_NONE page: a kernel reading one byte past either end of its input
// (or writing past its output) crashes the test.
func TestGuardPages(t *testing.T) {
	key := pattern(64, 51)
	forEachImpl(t, func(t *testing.T) {
		for _, n := range []int{0, 1, 8, 127, 128, 129, 255, 256, 1000, 4096, 4104, 3 * 4096} {
			src := pattern(n, uint64(n))
			end, start := testutil.GuardedBuffers(t, n)
			for _, buf := range [][]byte{end, start} {
				copy(buf, src)
				want := reference(Size, nil, src)
				if got := Sum512(buf); !bytes.Equal(got[:], want) {
					t.Fatalf("Sum512(%d bytes) = %x, want %x", n, got, want)
				}
				h, _ := New256(key[:32])
				h.Write(buf)
				if got, want := h.Sum(nil), reference(Size256, key[:32], src); !bytes.Equal(got, want) {
					t.Fatalf("keyed (%d bytes) = %x, want %x", n, got, want)
				}
			}
		}

		// Batches of sectors and messages, with the tags guarded too.
		for _, sectorSize := range []int{8, 120, 128, 512, 4096} {
			for _, count := range []int{1, 3, 4, 5, 8, 9, 16} {
				for _, tagSize := range []int{16, 32} {
					n := sectorSize * count
					src := pattern(n, uint64(n+tagSize))
					dEnd, dStart := testutil.GuardedBuffers(t, n)
					tEnd, tStart := testutil.GuardedBuffers(t, count*tagSize)
					want := make([]byte, count*tagSize)
					func() {
						defer useImpls(implGeneric, implGeneric)()
						SumSectors(want, tagSize, key[:32], 77, src, sectorSize)
					}()
					wantMany := make([]byte, count*tagSize)
					func() {
						defer useImpls(implGeneric, implGeneric)()
						SumMany(wantMany, tagSize, key[:32], src, sectorSize)
					}()
					for _, d := range [][]byte{dEnd, dStart} {
						copy(d, src)
						for _, tg := range [][]byte{tEnd, tStart} {
							clear(tg)
							SumSectors(tg, tagSize, key[:32], 77, d, sectorSize)
							if !bytes.Equal(tg, want) {
								t.Fatalf("SumSectors sector %d, count %d, tag %d: %x, want %x", sectorSize, count, tagSize, tg, want)
							}
							clear(tg)
							SumMany(tg, tagSize, key[:32], d, sectorSize)
							if !bytes.Equal(tg, wantMany) {
								t.Fatalf("SumMany len %d, count %d, size %d: %x, want %x", sectorSize, count, tagSize, tg, wantMany)
							}
						}
					}
				}
			}
		}
	})
}
