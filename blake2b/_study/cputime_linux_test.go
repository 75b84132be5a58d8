package study

import (
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// threadCPU returns the CPU time consumed by the calling OS thread.
func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

// measureCPU runs f b.N times (via b.Loop) and reports, besides the usual
// wall-clock figures, "cpuMB/s": throughput over the CPU time this thread
// actually ran. The machine is shared, and wall time counts the slices
// other processes take; thread CPU time does not, so it is the steadier
// figure for ratios.
func measureCPU(b *testing.B, bytesPerOp int, f func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.SetBytes(int64(bytesPerOp))
	b.ReportAllocs()
	start := threadCPU()
	n := 0
	for b.Loop() {
		f()
		n++
	}
	if cpu := threadCPU() - start; cpu > 0 {
		b.ReportMetric(float64(bytesPerOp)*float64(n)/cpu.Seconds()/1e6, "cpuMB/s")
	}
}
