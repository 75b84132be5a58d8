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

// BenchmarkCodecWorkers/op=<op>/size=<call>/workers=<n>: XTS-AES-256 over
// 4096-byte sectors, one call of size bytes at a time, in place, with n workers; wall
// clock (the work is spread over threads). Besides MB/s it reports the
// process's context switches per call (switches/op), which counts the
// hand-offs that put a thread to sleep or woke one: a call that starts a
// goroutine and waits for it costs about one; helpers that find the next
// call while they spin cost none.
//
//	go test -run '^$' -bench CodecWorkers ./sector
//
// Scaling is the ratio of the workers=N and workers=1 rates of the same
// size; on a shared machine the other jobs decide it (scripts/bench-cores.bash
// runs it at real-time priority).
func BenchmarkCodecWorkers(b *testing.B) {
	for _, op := range []string{"encrypt", "decrypt"} {
		for _, size := range []int{128 << 10, 1 << 20, 8 << 20} {
			for _, w := range []int{1, runtime.GOMAXPROCS(0)} {
				b.Run(fmt.Sprintf("op=%s/size=%d/workers=%d", op, size, w), func(b *testing.B) {
					key := make([]byte, 64)
					for i := range key {
						key[i] = byte(3*i + 1)
					}
					codec, err := NewCodecKey(key, Params{Size: 4096})
					if err != nil {
						b.Fatal(err)
					}
					codec.SetWorkers(w)
					buf := make([]byte, size)
					codec.Encrypt(buf, buf, 0)
					b.SetBytes(int64(size))
					before := contextSwitches(b)
					for i := uint64(0); b.Loop(); i++ {
						if op == "decrypt" {
							codec.Decrypt(buf, buf, i*uint64(size/4096))
						} else {
							codec.Encrypt(buf, buf, i*uint64(size/4096))
						}
					}
					b.ReportMetric(float64(contextSwitches(b)-before)/float64(b.N), "switches/op")
				})
			}
		}
	}
}
