package luks

import (
	"github.com/xtsctl/xtsctl/internal/secret"
	"github.com/xtsctl/xtsctl/internal/sysmem"
	"golang.org/x/crypto/argon2"
)

// Limits bound the key derivation costs that a header may ask for. The
// numbers come from the image, so without limits whoever can write it
// decides how much memory and time unlocking takes. A keyslot above a
// limit is not run: unlocking fails with a *KDFCostError naming the slot
// and the cost, and the caller may retry with higher limits. Start from
// DefaultLimits: a zero field allows nothing.
type Limits struct {
	MaxMemoryKiB uint32 // Argon2 memory, per run
	MaxTime      uint32 // Argon2 passes, per run
	MaxThreads   uint32 // Argon2 lanes, per run
	// MaxWork bounds Argon2 passes × memory in KiB, the work whatever its
	// split, summed over the keyslots one Unlock tries.
	MaxWork uint64
	// MaxIterations bounds PBKDF2 iterations, keyslots and digest checks,
	// summed over the keyslots one Unlock tries.
	MaxIterations uint64
}

// Default limits. cryptsetup itself never writes more than 4 GiB of
// Argon2 memory or 4 threads (crypt_pbkdf_get_limits), and by default
// calibrates its KDFs to 2 s on the machine that made the header; the work
// and iteration bounds leave room for a header made with a much longer
// --iter-time on a much faster machine (docs/LUKS.md says what they take
// here).
const (
	DefaultMaxMemoryKiB  = 4 << 20 // 4 GiB, cryptsetup's maximum
	DefaultMaxTime       = 1000
	DefaultMaxThreads    = 16
	DefaultMaxWork       = 64 << 20 // 64 passes over 1 GiB
	DefaultMaxIterations = 1 << 27
)

// DefaultLimits returns the default limits, with the memory bound lowered
// to half of the memory available now (MemAvailable), as cryptsetup does
// when it picks a memory cost, so that a header cannot make unlocking
// push the machine into swap or the OOM killer.
func DefaultLimits() Limits {
	l := Limits{
		MaxMemoryKiB:  DefaultMaxMemoryKiB,
		MaxTime:       DefaultMaxTime,
		MaxThreads:    DefaultMaxThreads,
		MaxWork:       DefaultMaxWork,
		MaxIterations: DefaultMaxIterations,
	}
	if avail := sysmem.AvailableKiB(); avail > 0 && avail/2 < uint64(l.MaxMemoryKiB) {
		l.MaxMemoryKiB = uint32(max(avail/2, 64<<10))
	}
	return l
}

// spent is what an Unlock has run so far, counted against its limits.
type spent struct {
	work uint64 // Argon2 passes × KiB
	iter uint64 // PBKDF2 iterations, keyslots and digests
}

func (s spent) add(k KDF) spent {
	if k.Type == "pbkdf2" {
		s.iter += uint64(k.Iterations)
	} else {
		s.work += uint64(k.Time) * uint64(k.MemoryKiB)
	}
	return s
}

// checkKDF reports whether running k, after what sp says was spent, stays
// within l. slotProblem has refused the parameters no KDF takes.
func (l Limits) checkKDF(slot int, k KDF, sp spent) error {
	cost := func(what string, v, lim, spent uint64, unit string) error {
		return &KDFCostError{Keyslot: slot, KDF: k.name(), Cost: what, Value: v, Limit: lim, Spent: spent, Unit: unit}
	}
	switch k.Type {
	case "pbkdf2":
		if sp.iter+uint64(k.Iterations) > l.MaxIterations {
			return cost("iterations", uint64(k.Iterations), l.MaxIterations, sp.iter, "")
		}
	case "argon2i", "argon2id":
		switch {
		case k.Threads > l.MaxThreads || k.Threads > 255:
			return cost("threads", uint64(k.Threads), uint64(min(l.MaxThreads, 255)), 0, "")
		case k.MemoryKiB > l.MaxMemoryKiB:
			return cost("memory", uint64(k.MemoryKiB), uint64(l.MaxMemoryKiB), 0, "KiB")
		case k.Time > l.MaxTime:
			return cost("time", uint64(k.Time), uint64(l.MaxTime), 0, "passes")
		case sp.work+uint64(k.Time)*uint64(k.MemoryKiB) > l.MaxWork:
			return cost("work (passes × memory)", uint64(k.Time)*uint64(k.MemoryKiB), l.MaxWork, sp.work, "KiB")
		}
	default:
		return unsupportedSlot(slot, FeatureKDF, k.Type, "pbkdf2, argon2i or argon2id")
	}
	return nil
}

func (k KDF) name() string {
	if k.Type == "pbkdf2" {
		return "pbkdf2-" + k.Hash
	}
	return k.Type
}

// derive runs the keyslot's KDF on the passphrase. The caller has checked
// the costs with Limits.checkKDF, and wipes the key. x/crypto's Argon2
// leaves copies of the key in its stack frames: the stack is kept from
// moving under it and overwritten after it (SECURITY.md, "Keys in memory").
func (k KDF) derive(passphrase []byte, keyLen int) ([]byte, error) {
	var stack secret.Stack
	stack.Reserve()
	defer stack.Burn()
	switch k.Type {
	case "pbkdf2":
		h := hashByName(k.Hash)
		if h == nil {
			return nil, unsupported(FeatureHash, k.Hash, supportedHashes)
		}
		return pbkdf2Key(h, passphrase, k.Salt, int(k.Iterations), keyLen)
	case "argon2i":
		return argon2.Key(passphrase, k.Salt, k.Time, k.MemoryKiB, uint8(k.Threads), uint32(keyLen)), nil
	case "argon2id":
		return argon2.IDKey(passphrase, k.Salt, k.Time, k.MemoryKiB, uint8(k.Threads), uint32(keyLen)), nil
	}
	return nil, unsupported(FeatureKDF, k.Type, "")
}
