package testutil

import (
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// CPUClock measures a benchmark loop in thread CPU time as well as wall
// time. On a shared machine the scheduler preempts benchmarks for other
// work, which inflates wall time but not CPU time; `openssl speed` also
// reports CPU (user) time by default, so cpu-MB/s is the figure to set
// beside it. Call the returned function after the loop.
func CPUClock(b *testing.B, bytesPerOp int) func() {
	b.Helper()
	runtime.LockOSThread()
	start := ThreadCPUNanos(b)
	return func() {
		elapsed := ThreadCPUNanos(b) - start
		runtime.UnlockOSThread()
		if elapsed > 0 && b.N > 0 {
			b.ReportMetric(float64(elapsed)/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(bytesPerOp)*float64(b.N)*1e3/float64(elapsed), "cpu-MB/s")
		}
	}
}

// ThreadCPUNanos is the CPU time the calling OS thread has used.
func ThreadCPUNanos(tb testing.TB) int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		tb.Fatal(err)
	}
	return ts.Nano()
}
