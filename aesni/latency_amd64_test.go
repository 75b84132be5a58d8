//go:build amd64 && gc && !purego

package aesni

import (
	"runtime"
	"testing"

	"golang.org/x/sys/cpu"

	"github.com/xtsctl/xtsctl/internal/testutil"
)

// TestAESChainRounds checks the latency loop does real rounds, as many as
// asked (so the benchmark below times what it claims).
func TestAESChainRounds(t *testing.T) {
	if !cpu.X86.HasAES {
		t.Skip("no AES-NI")
	}
	for _, c := range []struct{ rounds, iters int }{{1, 1}, {14, 1}, {3, 5}} {
		var got [16]byte
		rawAESChainXMM(&got, c.rounds, c.iters)
		if want := refRounds(c.rounds * c.iters); got != want {
			t.Errorf("rawAESChainXMM(%d, %d) = %x, want %x", c.rounds, c.iters, got, want)
		}
	}
	if got := addChain(5); got != 40 {
		t.Errorf("addChain(5) = %d, want 40", got)
	}
}

// BenchmarkAESLatency measures AESENC's latency, the bound of one data
// unit's dependent AES chains (the tweak, then each block): ns per round
// of a single dependent chain, and in core cycles against a chain of
// one-cycle ADDs timed in the same benchmark ("GHz" is that clock):
//
//	go test -run '^$' -bench AESLatency ./aesni
func BenchmarkAESLatency(b *testing.B) {
	if !cpu.X86.HasAES {
		b.Skip("no AES-NI")
	}
	const rounds, iters = 14, 1000
	var out [16]byte
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	// The ADD chain runs first, then the AES chain, each b.N times; the
	// clock is the ADD chain's cycles over its time.
	addNs := timeNs(b, func() { addChain(iters) })
	aesNs := timeNs(b, func() { rawAESChainXMM(&out, rounds, iters) })
	cycleNs := addNs / (8 * iters)
	roundNs := aesNs / (rounds * iters)
	b.ReportMetric(roundNs, "ns/round")
	b.ReportMetric(roundNs/cycleNs, "cycles/round")
	b.ReportMetric(1/cycleNs, "GHz")
	b.ReportMetric(0, "ns/op")
}

// timeNs runs f b.N times and returns the mean nanoseconds per run, in
// thread CPU time.
func timeNs(b *testing.B, f func()) float64 {
	b.Helper()
	best := 0.0
	for r := 0; r < 3; r++ {
		stop := testutil.ThreadCPUNanos(b)
		for i := 0; i < b.N; i++ {
			f()
		}
		ns := float64(testutil.ThreadCPUNanos(b)-stop) / float64(b.N)
		if r == 0 || ns < best {
			best = ns
		}
	}
	return best
}
