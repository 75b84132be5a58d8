package volume

import "fmt"

// The costs of a key slot about to be written: what xtsctl writes is
// bounded tighter than what the format allows.

// FixedKDF returns the costs of a new slot with passes given (no
// calibration): memoryKiB, or DefaultKDFMemory if 0, and one thread per
// 8 KiB of memory up to 4, as CalibrateKDF picks them.
func FixedKDF(passes, memoryKiB uint32) KDFParams {
	if memoryKiB == 0 {
		memoryKiB = DefaultKDFMemory()
	}
	return KDFParams{Time: passes, MemoryKiB: memoryKiB, Threads: uint8(min(4, max(1, memoryKiB/8)))}
}

// Weak reports whether p uses less memory than MinKDFMemoryKiB, which
// makes guessing the passphrase cheap on GPUs.
func (p KDFParams) Weak() bool { return p.MemoryKiB < MinKDFMemoryKiB }

// NewKDFError: CheckNewKDF refuses the costs of a new slot: more work
// than unlocking runs unasked (TooCostly), or, when nobody chose the
// memory, less memory than MinKDFMemoryKiB.
type NewKDFError struct {
	KDF       KDFParams
	TooCostly bool // else: too little memory
}

func (e *NewKDFError) Error() string {
	if e.TooCostly {
		return fmt.Sprintf("Argon2id with %d KiB × %d passes is more than unlocking runs unasked (%d KiB×passes)", e.KDF.MemoryKiB, e.KDF.Time, MaxKDFWork)
	}
	return fmt.Sprintf("Argon2id with %d KiB is below the %d KiB floor that keeps passphrase guessing costly", e.KDF.MemoryKiB, MinKDFMemoryKiB)
}

// CheckNewKDF checks the costs of a new key slot: within the format
// (KDFParams.Check's error), no more work than DefaultKDFLimits let
// unlocking run (a slot its maker's xtsctl would refuse to try is of no
// use), and, unless memoryChosen (the user chose the memory: tests, tiny
// machines), not below the memory floor; a *NewKDFError says which. A
// caller that gets nil for Weak costs tells the user they are.
func CheckNewKDF(p KDFParams, memoryChosen bool) error {
	if err := p.Check(); err != nil {
		return err
	}
	if p.Work() > MaxKDFWork {
		return &NewKDFError{KDF: p, TooCostly: true}
	}
	if p.Weak() && !memoryChosen {
		return &NewKDFError{KDF: p}
	}
	return nil
}
