package volume

// The xtsctl volume as a format of the format layer (package disk): the
// verbs detect, report, check, unlock and serve it through the same
// interface as every other format.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/xtsctl/xtsctl/disk"
	"github.com/xtsctl/xtsctl/internal/bytesize"
	"github.com/xtsctl/xtsctl/internal/words"
)

func init() { disk.Register(Format) }

// FormatName is the volume's --type name.
const FormatName = "volume"

// Format is the xtsctl volume format.
var Format disk.Format = volumeFormat{}

type volumeFormat struct{}

func (volumeFormat) Info() disk.FormatInfo {
	return disk.FormatInfo{Name: FormatName, Title: "an xtsctl volume", Signature: true, SlotNoun: "key slot", KeyNoun: "master key", Passphrases: "key slots",
		Refer: "volumes", Takes: []string{"digest", "recover"},
		CreateTakes: []string{"sector-size", "key-size", "integrity", "tag-size", "label", "digest", "passphrase-file", "kdf-time", "kdf-memory", "kdf-iterations"}}
}

// Probe recognises a volume by its magic in either header copy (one may
// be damaged), as ReadHeaders finds them.
func (volumeFormat) Probe(r io.ReaderAt, size int64) bool {
	_, err := ReadHeaders(r, size)
	return !errors.Is(err, ErrNotVolume)
}

func (f volumeFormat) Open(img *disk.Image, opt disk.Options) (disk.Header, error) {
	hs, err := ReadHeaders(img.File, img.Size)
	var te *TruncatedError
	switch {
	case errors.As(err, &te) && hs != nil:
		// Reported, but the header is shown all the same (info); unlocking
		// refuses a truncated volume below.
	case err != nil:
		return nil, DiskError(img.Path, err)
	}
	return &volumeHeader{img: img, hs: hs, truncated: te}, nil
}

type volumeHeader struct {
	img       *disk.Image
	hs        *Headers
	truncated *TruncatedError
}

func (h *volumeHeader) Format() disk.Format { return Format }

// Headers returns what ReadHeaders found.
func (h *volumeHeader) Headers() *Headers { return h.hs }

// Warnings are what reading the headers found wrong, for the user.
func (h *volumeHeader) Warnings() []string {
	w := h.hs.Warnings
	if h.truncated != nil {
		w = append([]string{h.truncated.Error()}, w...)
	}
	return w
}

// Check refuses, before any passphrase is asked for, what no passphrase
// can open: a truncated volume, a key slot asked for that is empty or
// damaged, and slots whose KDF costs are beyond the limits.
func (h *volumeHeader) Check(req *disk.Request) (*disk.Need, error) {
	if h.truncated != nil {
		return nil, DiskError(h.img.Path, h.truncated)
	}
	hd := h.hs.Header
	limits := DefaultKDFLimits()
	if req.AllowExpensiveKDF {
		limits = UnlimitedKDF
	}
	var costly []*KDFCostError
	usable := 0
	var slots []int
	for i := range hd.Slots {
		s := &hd.Slots[i]
		if !s.Active || req.Slot >= 0 && i != req.Slot {
			continue
		}
		slots = append(slots, i)
		if err := limits.Check(s.KDF); err != nil {
			ce := err.(*KDFCostError)
			ce.Slot = i
			costly = append(costly, ce)
			continue
		}
		usable++
	}
	switch {
	case req.Slot >= MaxSlots:
		return nil, disk.WithKind(disk.KindUsage, fmt.Errorf("--key-slot %d: xtsctl volumes have key slots 0..%d (LUKS2 images have 0..31)", req.Slot, MaxSlots-1))
	case usable > 0:
	case len(costly) > 0:
		return nil, DiskError(h.img.Path, &SlotsTooCostlyError{Slots: costly})
	case req.Slot >= 0 && containsInt(h.hs.Damaged, req.Slot):
		return nil, DiskError(h.img.Path, &SlotsDamagedError{Slots: []int{req.Slot}})
	case req.Slot >= 0:
		return nil, disk.WithKind(disk.KindUsage, fmt.Errorf("%s: key slot %d: %w", h.img.Path, req.Slot, ErrNoSuchSlot), "xtsctl info "+h.img.Path+" lists the slots in use")
	case len(h.hs.Damaged) > 0:
		return nil, DiskError(h.img.Path, &SlotsDamagedError{Slots: append([]int(nil), h.hs.Damaged...)})
	default:
		return nil, DiskError(h.img.Path, ErrNoKeySlots)
	}
	return &disk.Need{Passphrase: disk.WantRequired, Prompt: "the passphrase for " + h.img.Path, Tries: "key slots " + intsString(slots)}, nil
}

// largeKDFWork is the memory × passes (KiB) from which unlocking says it
// is running a slot's KDF: several times a default slot's.
const largeKDFWork = 16 << 20

// UnlockOptionsFor are the options of an unlock of image's header that
// req asks for: its slot and KDF bounds, slow slots said as they are
// tried.
func UnlockOptionsFor(ctx context.Context, req *disk.Request, image string) UnlockOptions {
	opts := UnlockOptions{Slot: req.Slot, Limits: DefaultKDFLimits(), Context: ctx}
	if req.AllowExpensiveKDF {
		opts.Limits = UnlimitedKDF
	}
	opts.Trying = func(slot int, p KDFParams) {
		if uint64(p.MemoryKiB)*uint64(p.Time) >= largeKDFWork {
			req.Say("%s: key slot %d: Argon2id with %s × %s × %d threads; this takes a while", image, slot, bytesize.Human(int64(p.MemoryKiB)<<10), words.Plural(int64(p.Time), "pass"), p.Threads)
		} else {
			req.Detail("%s: trying key slot %d (%s)", image, slot, p)
		}
	}
	return opts
}

// Unlock tries the key slots with the passphrase and returns the data
// area to serve, with its tags.
func (h *volumeHeader) Unlock(ctx context.Context, req *disk.Request, sec *disk.Secret) (*disk.Unlocked, error) {
	if _, err := h.Check(req); err != nil {
		return nil, err
	}
	if len(sec.KeyFiles) > 0 {
		return nil, disk.WithKind(disk.KindUsage, errors.New("--key-file does not apply to --type volume"),
			"a volume is unlocked with a passphrase: --passphrase-file FILE, or the terminal (a plain image's key file is its key)")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	key, slot, err := h.hs.UnlockWith(sec.Passphrase, UnlockOptionsFor(ctx, req, h.img.Path))
	if err != nil {
		return nil, DiskError(h.img.Path, err)
	}
	u := &disk.Unlocked{
		Format: FormatName, Layout: h.hs.Header.DiskLayout(), Key: key,
		Slot: slot, SlotName: fmt.Sprintf("key slot %d", slot), Warnings: append([]string(nil), h.hs.Warnings...),
	}
	return u, nil
}

// DiskLayout is the data area as the format layer describes it: one
// extent, dm-crypt's aes-xts-plain64 from tweak 0, with the tags.
func (h *Header) DiskLayout() disk.Layout {
	l := disk.SingleExtent(h.DataOffset, h.DataLength, h.sectorParams(), CipherName, 8*h.KeySize)
	if h.Integrity != IntegrityNone {
		l.Integrity, l.TagSize = h.Integrity.String(), h.TagSize
	}
	return l
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func intsString(s []int) string {
	var b strings.Builder
	for i, v := range s {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprint(&b, v)
	}
	return b.String()
}

// Layout is the data area, known from the header alone.
func (h *volumeHeader) Layout() (disk.Layout, error) { return h.hs.Header.DiskLayout(), nil }
