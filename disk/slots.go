package disk

import (
	"context"
	"fmt"
	"time"

	"github.com/xtsctl/xtsctl/internal/bytesize"
)

// A KeySlots is a Header whose key slots can be added, changed and
// removed (our volume, LUKS2), crash-safely. The image was opened with
// WriteHeader access.
type KeySlots interface {
	ChangeSlots(ctx context.Context, c SlotChange) (*SlotResult, error)
}

// SlotOp is what a SlotChange does.
type SlotOp int

const (
	AddSlot SlotOp = iota
	ChangeSlot
	RemoveSlot
)

// A SlotChange is one change of key slots.
type SlotChange struct {
	Op SlotOp
	// Slot is cryptsetup's --key-slot, or -1. Add: the slot to add, which
	// must be free. Change: the slot to change, which the secret must
	// open. Remove: the slot to remove, which any secret of the image
	// authorises (luksKillSlot). -1: add to the first free slot; change or
	// remove the slot the secret opens.
	Slot int
	// AllowLast allows removing the last slot, after which the image
	// cannot be opened (short of a header backup).
	AllowLast         bool
	AllowExpensiveKDF bool
	// Secret returns a secret of the image that unlocks it (the one to
	// change or remove, or, removing a given Slot, any). It is called
	// only once every check that needs no secret has passed; the format
	// wipes what it returns.
	Secret func() (*Secret, error)
	// New returns the new secret (Add, Change), after the unlock.
	New func() (*Secret, error)
	// KDF are the costs asked for the new slot.
	KDF NewKDF
	// Progress, if set, is told about slow steps, one line each.
	Progress func(format string, args ...any)
}

// NewKDF are the costs asked for a new key slot (cryptsetup's
// --iter-time, --pbkdf-memory, --pbkdf-force-iterations); each format
// calibrates and bounds its own from them.
type NewKDF struct {
	Time       time.Duration // the unlock time to calibrate for
	MemoryKiB  uint32        // 0: the format's default memory
	Iterations uint32        // 0: calibrate the passes for Time
	// Fixed replaces the calibration with exactly these costs (tests).
	Fixed *Argon2
	// Info and Warn receive what the user should know of the choice:
	// the calibration, costs below what keeps guessing costly.
	Info, Warn func(format string, args ...any)
}

// Argon2 are Argon2id costs.
type Argon2 struct {
	Time, MemoryKiB, Threads uint32
}

// A SlotResult says what a SlotChange did.
type SlotResult struct {
	Slot int
	// Detail, for people, about the new slot: "argon2id, 4 passes, 1 GiB,
	// 4 threads".
	Detail string
}

// MinKDFMemoryKiB is the Argon2id memory below which a new slot's
// passphrase is cheap to guess: calibration never goes below it, and a
// memory chosen below it gets a warning.
const MinKDFMemoryKiB = 32 << 10

// KDFCostError words a refused cost of a new slot in the command line's
// terms: more work than unlocking runs unasked (maxWork KiB×passes), or
// else a memory that calibration lowered below the floor.
func KDFCostError(k NewKDF, memKiB, passes uint32, tooCostly bool, maxWork uint64) error {
	if tooCostly {
		return WithKind(KindUsage, fmt.Errorf("Argon2id with %s × %d passes is more than xtsctl unlocks without --allow-expensive-kdf (%d GiB×passes)",
			humanKiB(memKiB), passes, maxWork>>20), "use a shorter --kdf-time, or fewer --kdf-iterations")
	}
	return WithKind(KindUsage, fmt.Errorf("calibration lowered Argon2id's memory to %s to fit --kdf-time %v, below the %d MiB floor that keeps passphrase guessing costly",
		humanKiB(memKiB), k.Time, MinKDFMemoryKiB>>10), "give a longer --kdf-time, or choose the memory with --kdf-memory")
}

// WarnWeak warns of a memory below the floor, which only a chosen
// memory gives (calibration below it is refused); what is "volume" or
// "image".
func (k NewKDF) WarnWeak(memKiB uint32, what string) {
	if memKiB < MinKDFMemoryKiB && k.Warn != nil {
		k.Warn("Argon2id memory %s is below %d MiB: passphrase guesses are cheap (fine for a test %s, not for data)", humanKiB(memKiB), MinKDFMemoryKiB>>10, what)
	}
}

// SayCalibrating says that calibration starts: its target, and the
// memory when the user chose it (which calibration keeps).
func (k NewKDF) SayCalibrating() {
	if k.MemoryKiB != 0 {
		k.Say("calibrating the passphrase hashing (Argon2id over --kdf-memory %s) to take %v", humanKiB(k.MemoryKiB), k.Time)
		return
	}
	k.Say("calibrating the passphrase hashing (Argon2id) to take %v", k.Time)
}

// SayChosen says what calibration chose and what unlocking takes with it
// here; and, when the memory the user chose takes longer than --kdf-time
// even at the fewest passes the format allows (minPasses), that the
// memory was honoured and the time was not.
func (k NewKDF) SayChosen(passes, minPasses, memKiB, threads uint32, took time.Duration) {
	k.Say("passphrase hashing: Argon2id, %d %s, %s, %d %s: unlocking takes about %s on this machine",
		passes, map[bool]string{true: "pass", false: "passes"}[passes == 1], humanKiB(memKiB),
		threads, map[bool]string{true: "thread", false: "threads"}[threads == 1], humanDuration(took))
	if k.MemoryKiB != 0 && passes <= minPasses && took > k.Time+k.Time/10 && k.Warn != nil {
		k.Warn("--kdf-memory %s takes longer than --kdf-time %v here even at the fewest passes (%d): the memory was honoured, not the time, so unlocking takes about %s (leave --kdf-memory out to lower the memory instead)",
			humanKiB(k.MemoryKiB), k.Time, passes, humanDuration(took))
	}
}

// humanDuration writes a KDF's time for people: "45 ms", "2.1 s".
func humanDuration(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%d ms", d.Round(time.Millisecond).Milliseconds())
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}

// Say passes a message to Info, if set.
func (k NewKDF) Say(format string, args ...any) {
	if k.Info != nil {
		k.Info(format, args...)
	}
}

func humanKiB(kib uint32) string { return bytesize.Human(int64(kib) << 10) }
