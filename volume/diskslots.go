package volume

import (
	"context"
	"errors"
	"fmt"

	"github.com/xtsctl/xtsctl/disk"
	"github.com/xtsctl/xtsctl/internal/bytesize"
	"github.com/xtsctl/xtsctl/internal/words"
)

// NewSlotKDF returns the Argon2id costs of a new key slot from what the
// user asked (disk.NewKDF: fixed passes, or calibrated to a time, at a
// memory or the default), bounded as CheckNewKDF bounds them, saying what
// it chose.
func NewSlotKDF(k disk.NewKDF) (KDFParams, error) {
	if k.Time <= 0 {
		return KDFParams{}, disk.WithKind(disk.KindUsage, fmt.Errorf("--kdf-time must be positive, not %v", k.Time))
	}
	if k.Iterations > 0 {
		p := FixedKDF(k.Iterations, k.MemoryKiB)
		return p, checkNewSlot(k, p)
	}
	if f := k.Fixed; f != nil {
		return KDFParams{Time: f.Time, MemoryKiB: f.MemoryKiB, Threads: uint8(f.Threads)}, nil
	}
	if k.MemoryKiB != 0 {
		// A chosen memory is kept: refuse it before seconds of
		// calibration if even the fewest passes over it are too much.
		if err := checkNewSlot(disk.NewKDF{MemoryKiB: k.MemoryKiB}, KDFParams{Time: MinKDFPasses, MemoryKiB: k.MemoryKiB, Threads: 1}); err != nil {
			return KDFParams{}, err
		}
	}
	k.SayCalibrating()
	p, took := CalibrateKDF(k.Time, k.MemoryKiB)
	if err := checkNewSlot(k, p); err != nil {
		return p, err
	}
	k.SayChosen(p.Time, MinKDFPasses, p.MemoryKiB, uint32(p.Threads), took)
	return p, nil
}

// checkNewSlot puts CheckNewKDF's refusals in the flags' terms, and warns
// of weak costs the user chose.
func checkNewSlot(k disk.NewKDF, p KDFParams) error {
	err := CheckNewKDF(p, k.MemoryKiB != 0)
	var ke *NewKDFError
	switch {
	case errors.As(err, &ke):
		return disk.KDFCostError(k, p.MemoryKiB, p.Time, ke.TooCostly, MaxKDFWork)
	case err != nil:
		return disk.WithKind(disk.KindUsage, err)
	}
	k.WarnWeak(p.MemoryKiB, "volume")
	return nil
}

// ChangeSlots adds, changes or removes a key slot (volume.ChangeSlots),
// the secrets asked for through c once every check that needs none has
// passed.
func (h *volumeHeader) ChangeSlots(ctx context.Context, c disk.SlotChange) (*disk.SlotResult, error) {
	image := h.img.Path
	if h.truncated != nil {
		return nil, DiskError(image, h.truncated)
	}
	if c.Slot >= MaxSlots {
		return nil, disk.WithKind(disk.KindUsage, fmt.Errorf("--key-slot %d: xtsctl volumes have key slots 0..%d (LUKS2 images have 0..31)", c.Slot, MaxSlots-1))
	}
	sc := SlotChange{
		Op:        map[disk.SlotOp]SlotOp{disk.AddSlot: OpAddSlot, disk.ChangeSlot: OpChangeSlot, disk.RemoveSlot: OpRemoveSlot}[c.Op],
		Slot:      c.Slot,
		AllowLast: c.AllowLast,
		Unlock:    UnlockOptions{Slot: -1, Limits: DefaultKDFLimits(), Context: ctx},
	}
	if c.AllowExpensiveKDF {
		sc.Unlock.Limits = UnlimitedKDF
	}
	if c.Progress != nil {
		sc.Unlock.Trying = func(slot int, p KDFParams) {
			if p.Work() >= largeKDFWork {
				c.Progress("%s: key slot %d: Argon2id with %s × %s × %d threads; this takes a while", image, slot, bytesize.Human(int64(p.MemoryKiB)<<10), words.Plural(int64(p.Time), "pass"), p.Threads)
			}
		}
	}
	sc.Passphrase = func() ([]byte, error) { return passphraseOf(c.Secret) }
	sc.New = func() ([]byte, KDFParams, error) {
		pass, err := passphraseOf(c.New)
		if err != nil {
			return nil, KDFParams{}, err
		}
		p, err := NewSlotKDF(c.KDF)
		return pass, p, err
	}
	slot, err := ChangeSlots(h.img.File, h.hs, sc)
	if errors.Is(err, ErrLastSlot) {
		return &disk.SlotResult{Slot: slot}, disk.WithKind(disk.KindUsage, fmt.Errorf("key slot %d holds the last passphrase of %s: without it the volume cannot be opened", slot, image),
			"add another passphrase first (xtsctl passphrase add), or use --force")
	}
	if err != nil {
		return nil, DiskError(image, err)
	}
	return &disk.SlotResult{Slot: slot}, nil
}

// passphraseOf takes the passphrase out of a secret: volumes have no key
// files.
func passphraseOf(get func() (*disk.Secret, error)) ([]byte, error) {
	s, err := get()
	if err != nil {
		return nil, err
	}
	if len(s.KeyFiles) > 0 {
		s.Wipe()
		return nil, disk.WithKind(disk.KindUsage, errors.New("--key-file does not apply to --type volume"),
			"a volume is unlocked with a passphrase: --passphrase-file FILE, or the terminal (a plain image's key file is its key)")
	}
	return s.Passphrase, nil
}
