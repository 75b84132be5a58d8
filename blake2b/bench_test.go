package blake2b

import (
	"encoding/binary"
	"fmt"
	"testing"

	xblake2b "golang.org/x/crypto/blake2b"
)

// Benchmarks put ours and x/crypto side by side in one run, so ratios are
// measured under the same machine load:
//
//	go test -run='^$' -bench='^(BenchmarkSum512|BenchmarkKeyed|BenchmarkSectorTags)$' -count=10 ./blake2b

var benchSizes = []int{64, 512, 4096, 64 << 10}

func BenchmarkSum512(b *testing.B) {
	for _, n := range benchSizes {
		data := make([]byte, n)
		for i := range numImpls {
			if !compressAvailable[i] {
				continue
			}
			b.Run(fmt.Sprintf("impl=%v/size=%d", i, n), func(b *testing.B) {
				defer useImpls(i, lanesWith)()
				measureCPU(b, n, func() { Sum512(data) })
			})
		}
		b.Run(fmt.Sprintf("impl=xcrypto/size=%d", n), func(b *testing.B) {
			measureCPU(b, n, func() { xblake2b.Sum512(data) })
		})
	}
}

// BenchmarkSectorTags tags 4096-byte sectors, 1, 8 or 64 per call: ours
// through SumSectors, x/crypto with one keyed BLAKE2b per sector (New,
// Write, Write, Sum), the way a caller without a batch API would.
func BenchmarkSectorTags(b *testing.B) {
	const sectorSize = 4096
	key := make([]byte, 32)
	for _, count := range []int{1, 8, 64} {
		data := make([]byte, sectorSize*count)
		for _, tagSize := range []int{16, 32} {
			tags := make([]byte, count*tagSize)
			name := fmt.Sprintf("tag=%d/sectors=%d", tagSize, count)
			for i := range numImpls {
				if !lanesAvailable[i] {
					continue
				}
				b.Run(fmt.Sprintf("impl=%v/%s", i, name), func(b *testing.B) {
					defer useImpls(compressWith, i)()
					measureCPU(b, len(data), func() { SumSectors(tags, tagSize, key, 1000, data, sectorSize) })
				})
			}
			b.Run("impl=xcrypto/"+name, func(b *testing.B) {
				var num [8]byte
				measureCPU(b, len(data), func() {
					for s := range count {
						h, _ := xblake2b.New(tagSize, key)
						binary.LittleEndian.PutUint64(num[:], 1000+uint64(s))
						h.Write(num[:])
						h.Write(data[s*sectorSize : (s+1)*sectorSize])
						h.Sum(tags[:0])
					}
				})
			})
		}
	}
}

// BenchmarkKeyed is one keyed message, the shape of a key derivation (29
// bytes: a label) or of a header MAC: New, Write, Sum against x/crypto's,
// and SumKeyed.
func BenchmarkKeyed(b *testing.B) {
	key := make([]byte, 64)
	for _, n := range []int{29, 512, 4096} {
		data := make([]byte, n)
		out := make([]byte, Size)
		b.Run(fmt.Sprintf("impl=ours/size=%d", n), func(b *testing.B) {
			measureCPU(b, n, func() {
				h, _ := New(Size, key)
				h.Write(data)
				h.Sum(out[:0])
			})
		})
		b.Run(fmt.Sprintf("impl=SumKeyed/size=%d", n), func(b *testing.B) {
			measureCPU(b, n, func() { SumKeyed(out, key, data) })
		})
		b.Run(fmt.Sprintf("impl=xcrypto/size=%d", n), func(b *testing.B) {
			measureCPU(b, n, func() {
				h, _ := xblake2b.New(Size, key)
				h.Write(data)
				h.Sum(out[:0])
			})
		})
	}
}
