package luks

import (
	"fmt"
	"runtime"
	"time"

	"github.com/xtsctl/xtsctl/internal/kdfcal"
	"github.com/xtsctl/xtsctl/internal/sysmem"
)

// Argon2Params are the costs of a new Argon2id keyslot.
type Argon2Params struct {
	Time      uint32 // passes, at least 4 for cryptsetup (it refuses fewer when forced)
	MemoryKiB uint32 // at least 32, at most 4 GiB
	Threads   uint32 // 1..4
}

// MinArgon2Passes is the fewest Argon2 passes cryptsetup writes
// (crypt_pbkdf_get_limits): calibration lowers the memory rather than go
// below it.
const MinArgon2Passes = 4

// Other bounds cryptsetup puts on Argon2 parameters it writes; a header we
// write stays within them.
const (
	minArgon2Memory = 32
	maxArgon2Memory = 4 << 20
	maxArgon2Thread = 4
)

// Check reports costs that cryptsetup would not write: fewer than 4
// passes, more than 4 threads, less than 32 KiB (8 per thread) or more
// than 4 GiB of memory.
func (p Argon2Params) Check() error {
	switch {
	case p.Time < MinArgon2Passes:
		return fmt.Errorf("argon2id: %d passes, cryptsetup wants at least %d", p.Time, MinArgon2Passes)
	case p.Threads < 1 || p.Threads > maxArgon2Thread:
		return fmt.Errorf("argon2id: %d threads, cryptsetup wants 1..%d", p.Threads, maxArgon2Thread)
	case p.MemoryKiB < max(minArgon2Memory, 8*p.Threads) || p.MemoryKiB > maxArgon2Memory:
		return fmt.Errorf("argon2id: %d KiB, cryptsetup wants %d KiB..4 GiB", p.MemoryKiB, max(minArgon2Memory, 8*p.Threads))
	}
	return nil
}

// DefaultArgon2Memory is cryptsetup's default memory cost (1 GiB).
const DefaultArgon2Memory = 1 << 20

// CalibrateArgon2id picks Argon2id costs that take about target on this
// machine, as cryptsetup's benchmark does (internal/kdfcal): threads up to
// 4 (no more than the CPUs), memory up to 1 GiB (at most half the
// available memory), then more passes; the memory is lowered only when
// 4 passes at its most would take longer than target. A memoryKiB other
// than 0 is what the user chose: it stays, and only the passes are
// calibrated, at least 4 even where they take longer than target (the
// caller checks it against Check's bounds first). It returns the costs and
// what a run of them takes here.
func CalibrateArgon2id(target time.Duration, memoryKiB uint32) (Argon2Params, time.Duration) {
	threads := uint32(min(maxArgon2Thread, max(1, runtime.NumCPU())))
	b := kdfcal.Bounds{MinPasses: MinArgon2Passes, MaxPasses: DefaultMaxTime, MinMemoryKiB: minArgon2Memory, MaxMemoryKiB: DefaultArgon2Memory}
	if avail := sysmem.AvailableKiB(); avail > 0 && avail/2 < uint64(b.MaxMemoryKiB) {
		b.MaxMemoryKiB = uint32(max(avail/2, 64<<10))
	}
	if memoryKiB != 0 {
		b.MinMemoryKiB, b.MaxMemoryKiB = memoryKiB, memoryKiB
		threads = max(1, min(threads, memoryKiB/8)) // 8 KiB per lane
	}
	b.Threads = uint8(threads)
	r := kdfcal.Calibrate(target, b, kdfcal.Argon2id(b.Threads))
	return Argon2Params{Time: r.Passes, MemoryKiB: r.MemoryKiB, Threads: uint32(r.Threads)}, r.Took
}

// digestIterations picks the PBKDF2 iterations of a new volume key digest
// as cryptsetup does: what takes about 125 ms here, at least 1000.
func digestIterations(hashName string) uint32 {
	const probe = 20000
	h := hashByName(hashName)
	start := time.Now()
	if _, err := pbkdf2Key(h, []byte("xtsctl calibration"), make([]byte, 32), probe, 32); err != nil {
		return 1000
	}
	el := max(time.Since(start), time.Microsecond)
	it := uint64(probe) * uint64(125*time.Millisecond) / uint64(el)
	return uint32(min(max(it, 1000), DefaultMaxIterations/8))
}
