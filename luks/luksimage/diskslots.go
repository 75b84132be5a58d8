package luksimage

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/xtsctl/xtsctl/disk"
	"github.com/xtsctl/xtsctl/internal/bytesize"
	"github.com/xtsctl/xtsctl/luks"
	"github.com/xtsctl/xtsctl/volume"
)

// NewKeyslotKDF returns the Argon2id costs of a new LUKS2 keyslot from
// what the user asked: calibrated as cryptsetup does (at least 4 passes;
// less memory rather than fewer passes), a memory the user chose kept
// (only the passes calibrated), held to the bounds of new volume key slots
// (no more work than xtsctl unlocks unasked, and not below 32 MiB unless
// the memory was chosen), and what it chose said through k.
func NewKeyslotKDF(k disk.NewKDF) (*luks.Argon2Params, error) {
	if k.Time <= 0 {
		return nil, disk.WithKind(disk.KindUsage, fmt.Errorf("--kdf-time must be positive, not %v", k.Time))
	}
	var p luks.Argon2Params
	switch {
	case k.Iterations > 0:
		if k.Iterations < 4 {
			return nil, disk.WithKind(disk.KindUsage, fmt.Errorf("--kdf-iterations %d: LUKS2 Argon2 keyslots take at least 4 passes (cryptsetup refuses fewer)", k.Iterations))
		}
		p = luks.Argon2Params{Time: k.Iterations, MemoryKiB: k.MemoryKiB, Threads: uint32(min(4, max(1, runtime.NumCPU())))}
		if p.MemoryKiB == 0 {
			p.MemoryKiB = volume.DefaultKDFMemory()
		}
	case k.Fixed != nil:
		return &luks.Argon2Params{Time: k.Fixed.Time, MemoryKiB: k.Fixed.MemoryKiB, Threads: k.Fixed.Threads}, nil
	default:
		if k.MemoryKiB != 0 {
			// A chosen memory is kept: refuse it before seconds of
			// calibration if even 4 passes over it are too much.
			if err := checkKeyslotKDF(k, luks.Argon2Params{Time: luks.MinArgon2Passes, MemoryKiB: k.MemoryKiB, Threads: 1}); err != nil {
				return nil, err
			}
		}
		k.SayCalibrating()
		var took time.Duration
		p, took = luks.CalibrateArgon2id(k.Time, k.MemoryKiB)
		if err := checkKeyslotKDF(k, p); err != nil {
			return nil, err
		}
		k.SayChosen(p.Time, luks.MinArgon2Passes, p.MemoryKiB, p.Threads, took)
		k.WarnWeak(p.MemoryKiB, "image")
		return &p, nil
	}
	if err := checkKeyslotKDF(k, p); err != nil {
		return nil, err
	}
	k.WarnWeak(p.MemoryKiB, "image")
	return &p, nil
}

// checkKeyslotKDF holds the costs of a new keyslot to what cryptsetup
// writes and xtsctl unlocks unasked, and to the memory floor unless the
// memory was chosen.
func checkKeyslotKDF(k disk.NewKDF, p luks.Argon2Params) error {
	if err := p.Check(); err != nil {
		return disk.WithKind(disk.KindUsage, err)
	}
	switch {
	case p.MemoryKiB > luks.DefaultMaxMemoryKiB || p.Time > luks.DefaultMaxTime:
		return disk.WithKind(disk.KindUsage, fmt.Errorf("Argon2id with %s × %d passes: LUKS2 allows at most 4 GiB and xtsctl runs at most %d passes", bytesize.Human(int64(p.MemoryKiB)<<10), p.Time, luks.DefaultMaxTime))
	case uint64(p.Time)*uint64(p.MemoryKiB) > luks.DefaultMaxWork:
		return disk.KDFCostError(k, p.MemoryKiB, p.Time, true, luks.DefaultMaxWork)
	case p.MemoryKiB < disk.MinKDFMemoryKiB && k.MemoryKiB == 0:
		return disk.KDFCostError(k, p.MemoryKiB, p.Time, false, 0)
	}
	return nil
}

// ChangeSlots adds, changes or removes a LUKS2 keyslot, crash-safely (the
// image was opened with disk.WriteHeader).
func (h *luksHeader) ChangeSlots(ctx context.Context, c disk.SlotChange) (*disk.SlotResult, error) {
	path := headerPath(h.img)
	// Refusals before any prompt: nothing this package cannot decrypt,
	// and LUKS1 is not written.
	if err := h.h.Supported(); err != nil {
		return nil, DiskError(path, err)
	}
	if h.h.Version != 2 {
		return nil, DiskError(path, &luks.UnsupportedError{Feature: luks.FeatureVersion, Value: "1 (writing)", Keyslot: -1,
			Hint: "xtsctl writes LUKS2 headers only"})
	}
	if c.Slot > 31 {
		return nil, disk.WithKind(disk.KindUsage, fmt.Errorf("--key-slot %d: LUKS keyslots are 0..31 (LUKS1: 0..7)", c.Slot))
	}
	img := h.image()
	kc := KeyslotChange{AllowLast: c.AllowLast, Limits: Limits(&disk.Request{AllowExpensiveKDF: c.AllowExpensiveKDF})}
	if c.Slot >= 0 {
		n := c.Slot
		kc.Keyslot = &n
	}
	kc.Op = map[disk.SlotOp]KeyslotOp{disk.AddSlot: AddKeyslot, disk.ChangeSlot: ChangeKeyslot, disk.RemoveSlot: RemoveKeyslot}[c.Op]
	kc.Passphrase = func() ([]byte, error) { return passphraseOf(c.Secret) }
	var kp *luks.Argon2Params
	kc.New = func() ([]byte, *luks.Argon2Params, error) {
		pass, err := passphraseOf(c.New)
		if err != nil {
			return nil, nil, err
		}
		if kp, err = NewKeyslotKDF(c.KDF); err != nil {
			clear(pass)
			return nil, nil, err
		}
		return pass, kp, nil
	}
	slot, err := img.ChangeKeyslots(ctx, kc)
	switch {
	case errors.Is(err, luks.ErrLastKeyslot):
		return &disk.SlotResult{Slot: slot}, disk.WithKind(disk.KindUsage, fmt.Errorf("keyslot %d holds the last passphrase of %s: without it the image cannot be opened", slot, h.img.Path),
			"add another passphrase first (xtsctl passphrase add), or use --force")
	case err != nil:
		return nil, h.unlockError(err)
	}
	res := &disk.SlotResult{Slot: slot}
	switch c.Op {
	case disk.RemoveSlot:
		res.Detail = "its key material overwritten"
	case disk.AddSlot:
		res.Detail = luks.KDF{Type: "argon2id", Time: kp.Time, MemoryKiB: kp.MemoryKiB, Threads: kp.Threads}.String()
	}
	return res, nil
}

// image is the Image of this package's keyslot transaction, over the
// files the layer opened.
func (h *luksHeader) image() *Image {
	img := &Image{Header: h.h, HeaderFile: h.img.File, HeaderSize: h.img.Size}
	if h.img.HeaderFile != nil {
		img.HeaderFile, img.HeaderSize = h.img.HeaderFile, h.img.HeaderSize
	}
	return img
}

// passphraseOf is the passphrase of a secret: the whole of a key file, as
// cryptsetup takes it, or the passphrase.
func passphraseOf(get func() (*disk.Secret, error)) ([]byte, error) {
	s, err := get()
	if err != nil {
		return nil, err
	}
	switch len(s.KeyFiles) {
	case 0:
		return s.Passphrase, nil
	case 1:
		clear(s.Passphrase)
		return s.KeyFiles[0], nil
	}
	s.Wipe()
	return nil, disk.WithKind(disk.KindUsage, errors.New("a LUKS image takes one --key-file"))
}
