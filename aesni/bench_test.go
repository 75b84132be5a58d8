package aesni

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"testing"

	"github.com/xtsctl/xtsctl/internal/testutil"
)

// Sizes of the targets (16-byte messages, 512 and 4096-byte sectors,
// 1408 against 1420 for ciphertext stealing on a packet-sized unit, a large
// unit), plus the dispatch thresholds: one ymm vector (32), one zmm vector
// (64), and 48 between them.
var benchSizes = []int{16, 32, 48, 64, 127, 128, 512, 1408, 1420, 4096, 16384}

// benchImpls is "auto" (the dispatched choice) followed by every kernel
// available here, forced.
func benchImpls() []string {
	names := []string{"auto"}
	for _, i := range impls() {
		if isAvailable(i) {
			names = append(names, i.String())
		}
	}
	return names
}

func benchSelect(b *testing.B, name string) {
	b.Helper()
	resetImpl()
	if name == "auto" {
		return
	}
	i, ok := parseImpl(name)
	if !ok {
		b.Fatalf("unknown implementation %q", name)
	}
	if err := selectImpl(i); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(resetImpl)
}

func benchCipher(b *testing.B, keyLen int) *Cipher {
	b.Helper()
	key := make([]byte, keyLen)
	for i := range key {
		key[i] = byte(i * 7)
	}
	c := new(Cipher)
	if err := c.Init(key); err != nil {
		b.Fatal(err)
	}
	return c
}

// BenchmarkEncrypt/impl=<name>/size=<n>/key=<bits>: one call per data unit
// (XTS-AES-256 is key=512, two AES-256 keys; XTS-AES-128 key=256).
func BenchmarkEncrypt(b *testing.B) { benchUnits(b, false) }

func BenchmarkDecrypt(b *testing.B) { benchUnits(b, true) }

func benchUnits(b *testing.B, decrypt bool) {
	for _, name := range benchImpls() {
		b.Run("impl="+name, func(b *testing.B) {
			for _, size := range benchSizes {
				b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
					for _, keyLen := range []int{64, 32} {
						b.Run(fmt.Sprintf("key=%d", 8*keyLen), func(b *testing.B) {
							benchSelect(b, name)
							c := benchCipher(b, keyLen)
							buf := make([]byte, size)
							var tw [16]byte
							roof := rooflineMBps(b, c.rounds)
							b.SetBytes(int64(size))
							b.ReportAllocs()
							stop := testutil.CPUClock(b, size)
							start := testutil.ThreadCPUNanos(b)
							for i := 0; b.Loop(); i++ {
								// A new sector each call, stored as package xts does.
								binary.LittleEndian.PutUint64(tw[:8], uint64(i))
								if decrypt {
									c.Decrypt(buf, buf, &tw)
								} else {
									c.Encrypt(buf, buf, &tw)
								}
							}
							reportRoofline(b, size, start, roof)
							stop()
						})
					}
				})
			}
		})
	}
}

// BenchmarkEncryptSectors/impl=<name>/unit=<n>/key=<bits>: 64 KiB batches of
// consecutive data units in one call, the sector layer's path. Like
// BenchmarkEncrypt it reports cpu-MB/s and of-roofline, the fraction of the
// raw AES rate of the widest unit here (rooflineMBps).
func BenchmarkEncryptSectors(b *testing.B) { benchSectors(b, false) }

func BenchmarkDecryptSectors(b *testing.B) { benchSectors(b, true) }

func benchSectors(b *testing.B, decrypt bool) {
	const batch = 64 << 10
	for _, name := range benchImpls() {
		b.Run("impl="+name, func(b *testing.B) {
			for _, unit := range []int{512, 4096} {
				b.Run(fmt.Sprintf("unit=%d", unit), func(b *testing.B) {
					for _, keyLen := range []int{64, 32} {
						b.Run(fmt.Sprintf("key=%d", 8*keyLen), func(b *testing.B) {
							benchSelect(b, name)
							c := benchCipher(b, keyLen)
							buf := make([]byte, batch)
							roof := rooflineMBps(b, c.rounds)
							b.SetBytes(batch)
							b.ReportAllocs()
							stop := testutil.CPUClock(b, batch)
							start := testutil.ThreadCPUNanos(b)
							for i := uint64(0); b.Loop(); i++ {
								if decrypt {
									c.DecryptSectors(buf, buf, unit, i*batch/512, uint64(unit/512))
								} else {
									c.EncryptSectors(buf, buf, unit, i*batch/512, uint64(unit/512))
								}
							}
							reportRoofline(b, batch, start, roof)
							stop()
						})
					}
				})
			}
		})
	}
}

// BenchmarkEncryptLatency/impl=<name>/size=<n>: each call's tweak is taken
// from the previous call's output, so no two calls overlap in the core:
// this is the latency of one call, set-up included, where BenchmarkEncrypt
// measures throughput. Sizes straddle the dispatch thresholds.
func BenchmarkEncryptLatency(b *testing.B) {
	for _, name := range benchImpls() {
		if name == "generic" {
			continue
		}
		b.Run("impl="+name, func(b *testing.B) {
			for _, size := range []int{16, 17, 32, 48, 63, 64, 80, 128, 256} {
				b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
					benchSelect(b, name)
					c := benchCipher(b, 64)
					buf := make([]byte, size)
					var tw [16]byte
					b.SetBytes(int64(size))
					b.ReportAllocs()
					stop := testutil.CPUClock(b, size)
					for b.Loop() {
						binary.LittleEndian.PutUint64(tw[:8], binary.LittleEndian.Uint64(buf[size-8:]))
						c.Encrypt(buf, buf, &tw)
					}
					stop()
				})
			}
		})
	}
}

// rooflineMBps is the machine's raw AES rate for blocks of the given number
// of rounds, in MB/s of thread CPU time: the widest unit RawAESRounds runs
// here, the best of five runs of about 20 ms, measured once per process.
// Benchmarks report their rate as a fraction of it ("of-roofline"), as
// `xtsctl bench --roofline` does.
func rooflineMBps(b *testing.B, rounds int) float64 {
	b.Helper()
	if r, ok := roofline[rounds]; ok {
		return r
	}
	units := RooflineUnits()
	u := units[len(units)-1]
	bytes := RooflineBlocks(u) * BlockSize
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	best := 0.0
	for range 5 {
		start := testutil.ThreadCPUNanos(b)
		iters := 0
		for testutil.ThreadCPUNanos(b)-start < 20e6 {
			RawAESRounds(u, rounds, 1000)
			iters += 1000
		}
		best = max(best, float64(iters*bytes)*1e3/float64(testutil.ThreadCPUNanos(b)-start))
	}
	roofline[rounds] = best
	return best
}

var roofline = map[int]float64{}

// reportRoofline reports the loop's rate since start (thread CPU time) as a
// fraction of the roofline roof.
func reportRoofline(b *testing.B, bytesPerOp int, start int64, roof float64) {
	elapsed := testutil.ThreadCPUNanos(b) - start
	if elapsed > 0 && b.N > 0 && roof > 0 {
		b.ReportMetric(float64(bytesPerOp)*float64(b.N)*1e3/float64(elapsed)/roof, "of-roofline")
	}
}
