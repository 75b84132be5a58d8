package luks

import (
	"fmt"
	"runtime"
	"time"

	"github.com/xtsctl/xtsctl/internal/sysmem"
	"golang.org/x/crypto/argon2"
)

// Argon2Params are the costs of a new Argon2id keyslot.
type Argon2Params struct {
	Time      uint32 // passes, at least 4 for cryptsetup (it refuses fewer when forced)
	MemoryKiB uint32 // at least 32, at most 4 GiB
	Threads   uint32 // 1..4
}

// Bounds cryptsetup puts on Argon2 parameters it writes
// (crypt_pbkdf_get_limits); a header we write stays within them.
const (
	minArgon2Time   = 4
	minArgon2Memory = 32
	maxArgon2Memory = 4 << 20
	maxArgon2Thread = 4
)

// Check reports costs that cryptsetup would not write: fewer than 4
// passes, more than 4 threads, less than 32 KiB (8 per thread) or more
// than 4 GiB of memory.
func (p Argon2Params) Check() error {
	switch {
	case p.Time < minArgon2Time:
		return fmt.Errorf("argon2id: %d passes, cryptsetup wants at least %d", p.Time, minArgon2Time)
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
// machine, as cryptsetup's benchmark does: memory as given (0: 1 GiB, but
// at most half the available memory), threads up to 4, passes to fill the
// target with at least 4; if 4 passes at that memory already take longer,
// the memory is lowered instead.
func CalibrateArgon2id(target time.Duration, memoryKiB uint32) Argon2Params {
	if memoryKiB == 0 {
		memoryKiB = DefaultArgon2Memory
		if avail := sysmem.AvailableKiB(); avail > 0 && avail/2 < uint64(memoryKiB) {
			memoryKiB = uint32(max(avail/2, 64<<10))
		}
	}
	p := Argon2Params{Time: minArgon2Time, Threads: uint32(min(maxArgon2Thread, max(1, runtime.NumCPU())))}
	p.MemoryKiB = min(max(memoryKiB, 8*p.Threads, minArgon2Memory), maxArgon2Memory)
	// Time one pass over an eighth of the memory (the cost is linear in
	// passes × memory) so that calibrating costs well under the target.
	probe := max(p.MemoryKiB/8, 8*p.Threads)
	salt := make([]byte, keyslotSaltLen)
	start := time.Now()
	argon2.IDKey([]byte("xtsctl calibration"), salt, 1, probe, uint8(p.Threads), 32)
	perPass := max(time.Since(start)*time.Duration(p.MemoryKiB)/time.Duration(probe), time.Microsecond)
	if passes := target / perPass; passes >= minArgon2Time {
		p.Time = uint32(min(passes, DefaultMaxTime))
		return p
	}
	mem := uint64(float64(p.MemoryKiB) * float64(target) / float64(perPass*minArgon2Time))
	p.MemoryKiB = uint32(max(mem, uint64(8*p.Threads), minArgon2Memory))
	return p
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
