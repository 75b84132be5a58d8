package sector

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/xtsctl/xtsctl/aesni"
	"github.com/xtsctl/xtsctl/internal/testutil"
	"github.com/xtsctl/xtsctl/xts"
)

// BenchmarkCodec/key=<bits>/size=<sector>/op=<op>: the sector layer on one
// core (SetWorkers(1)), 64 KiB per call, in place, dm-crypt's plain64
// tweaks. Besides cpu-MB/s (thread CPU time) it reports of-roofline: that
// rate over the raw AES rate of the widest unit this CPU runs, measured in
// the same process (aesni.RawAESRounds, as `xtsctl bench --roofline`).
//
//	go test -run '^$' -bench Codec ./sector
func BenchmarkCodec(b *testing.B) {
	const batch = 64 << 10
	for _, keyBits := range []int{512, 256} {
		for _, size := range []int{512, 4096} {
			for _, op := range []string{"encrypt", "decrypt"} {
				b.Run(fmt.Sprintf("key=%d/size=%d/op=%s", keyBits, size, op), func(b *testing.B) {
					key := make([]byte, keyBits/8)
					for i := range key {
						key[i] = byte(5*i + 1)
					}
					c, err := xts.NewCipher(key)
					if err != nil {
						b.Fatal(err)
					}
					codec, err := NewCodec(c, Params{Size: size})
					if err != nil {
						b.Fatal(err)
					}
					codec.SetWorkers(1)
					buf := make([]byte, batch)
					roof := rooflineMBps(b, 6+keyBits/64)
					sectors := uint64(batch / size)
					b.SetBytes(batch)
					b.ReportAllocs()
					stop := testutil.CPUClock(b, batch)
					start := testutil.ThreadCPUNanos(b)
					for i := uint64(0); b.Loop(); i++ {
						if op == "decrypt" {
							codec.Decrypt(buf, buf, i*sectors)
						} else {
							codec.Encrypt(buf, buf, i*sectors)
						}
					}
					if elapsed := testutil.ThreadCPUNanos(b) - start; elapsed > 0 && roof > 0 {
						b.ReportMetric(float64(batch)*float64(b.N)*1e3/float64(elapsed)/roof, "of-roofline")
					}
					stop()
				})
			}
		}
	}
}

var roofline = map[int]float64{}

// rooflineMBps is the raw AES rate (MB/s of thread CPU time) of the widest
// unit aesni.RawAESRounds runs here, for blocks of the given number of
// rounds: the best of five runs of about 20 ms, measured once per process.
func rooflineMBps(b *testing.B, rounds int) float64 {
	b.Helper()
	if r, ok := roofline[rounds]; ok {
		return r
	}
	units := aesni.RooflineUnits()
	u := units[len(units)-1]
	bytes := aesni.RooflineBlocks(u) * aesni.BlockSize
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	best := 0.0
	for range 5 {
		start := testutil.ThreadCPUNanos(b)
		iters := 0
		for testutil.ThreadCPUNanos(b)-start < 20e6 {
			aesni.RawAESRounds(u, rounds, 1000)
			iters += 1000
		}
		best = max(best, float64(iters*bytes)*1e3/float64(testutil.ThreadCPUNanos(b)-start))
	}
	roofline[rounds] = best
	return best
}
