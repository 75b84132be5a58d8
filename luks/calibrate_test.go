package luks

import (
	"runtime"
	"testing"
	"time"
)

// TestCalibrateArgon2idKeepsMemory: a memory given stays, with the passes
// calibrated and at least cryptsetup's 4, even where 4 passes take far
// longer than the target (the search itself is tested against modelled
// machines in internal/kdfcal); the threads are cryptsetup's, up to 4 and
// no more than the CPUs.
func TestCalibrateArgon2idKeepsMemory(t *testing.T) {
	threads := uint32(min(4, runtime.NumCPU()))
	for _, c := range []struct {
		target      time.Duration
		memKiB      uint32
		threads     uint32
		exactPasses uint32 // 0: any, at least 4
	}{
		// 4 passes over 64 MiB take far more than a microsecond.
		{time.Microsecond, 64 << 10, threads, MinArgon2Passes},
		{50 * time.Millisecond, 8 << 10, threads, 0},
	} {
		p, took := CalibrateArgon2id(c.target, c.memKiB)
		if err := p.Check(); err != nil || p.MemoryKiB != c.memKiB || p.Threads != c.threads || p.Time < MinArgon2Passes || (c.exactPasses != 0 && p.Time != c.exactPasses) || took <= 0 {
			t.Errorf("CalibrateArgon2id(%v, %d KiB) = %+v, %v (%v): want the memory kept, %d threads, passes %d (0: at least 4)",
				c.target, c.memKiB, p, took, err, c.threads, c.exactPasses)
		}
	}
}
