package luksimage

// LUKS1 and LUKS2 as a format of the format layer (package disk).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/xtsctl/xtsctl/disk"
	"github.com/xtsctl/xtsctl/internal/dmtable"
	"github.com/xtsctl/xtsctl/internal/words"
	"github.com/xtsctl/xtsctl/luks"
)

func init() { disk.Register(Format) }

// FormatName is LUKS's --type name; "luks1" and "luks2" name it too.
const FormatName = "luks"

// Format is LUKS1 and LUKS2, as cryptsetup writes them.
var Format disk.Format = luksFormat{}

type luksFormat struct{}

func (luksFormat) Info() disk.FormatInfo {
	return disk.FormatInfo{
		Name: FormatName, Aliases: []string{"luks1", "luks2"}, Title: "a LUKS image", Signature: true, SlotNoun: "keyslot",
		InPlaceElsewhere: "cryptsetup reencrypt converts LUKS devices in place",
		Refer:            "LUKS images", WriteName: "luks2", Takes: []string{"header", "new-key-file", "uuid"},
		CreateTakes: []string{"sector-size", "key-size", "label", "uuid", "passphrase-file", "key-file", "kdf-time", "kdf-memory", "kdf-iterations"},
		KeyFile:     "the passphrase is the whole of the file (cryptsetup --key-file: no newline removed, at most 8 MiB)",
		Passphrases: "LUKS2 keyslots",
	}
}

// Probe recognises the LUKS magic at the start, or a LUKS2 secondary
// header where the primary is damaged.
func (luksFormat) Probe(r io.ReaderAt, size int64) bool { return luks.Detect(r, size) }

func (luksFormat) Open(img *disk.Image, opt disk.Options) (disk.Header, error) {
	r, size := img.HeaderReader()
	h, err := luks.ReadHeader(r, size)
	if err != nil {
		return nil, DiskError(headerPath(img), err)
	}
	return &luksHeader{img: img, h: h}, nil
}

func headerPath(img *disk.Image) string {
	if img.HeaderFile != nil {
		return img.HeaderPath
	}
	return img.Path
}

type luksHeader struct {
	img *disk.Image
	h   *luks.Header
}

func (h *luksHeader) Format() disk.Format { return Format }

// Header returns the header as package luks read it.
func (h *luksHeader) Header() *luks.Header { return h.h }

// Limits are the KDF bounds an unlock runs under: luks.DefaultLimits, or
// none with AllowExpensiveKDF.
func Limits(req *disk.Request) *luks.Limits {
	l := luks.DefaultLimits()
	if req.AllowExpensiveKDF {
		l = luks.Limits{MaxMemoryKiB: math.MaxUint32, MaxTime: math.MaxUint32, MaxThreads: math.MaxUint32,
			MaxWork: math.MaxUint64, MaxIterations: math.MaxUint64}
	}
	return &l
}

func pick(req *disk.Request) *int {
	if req.Slot < 0 {
		return nil
	}
	n := req.Slot
	return &n
}

// Check refuses before any prompt what no passphrase can open, and a data
// segment that cannot be served (unless only the passphrase is tested).
func (h *luksHeader) Check(req *disk.Request) (*disk.Need, error) {
	if req.Slot > 31 {
		return nil, disk.WithKind(disk.KindUsage, fmt.Errorf("--key-slot %d: LUKS keyslots are 0..31 (LUKS1: 0..7)", req.Slot))
	}
	slots, err := h.checkUnlock(req)
	if err != nil {
		return nil, DiskError(headerPath(h.img), err)
	}
	if !req.TestOnly && h.img.File != nil {
		if h.img.HeaderFile == nil && h.h.Detached() {
			// The data would start at the image's byte 0, over its header.
			return nil, disk.WithKind(disk.KindInput, fmt.Errorf("%s holds a detached LUKS header: its data segment starts at byte 0 of another device", h.img.Path),
				"give it with --header "+h.img.Path+" and the data device as IMAGE")
		}
		if _, _, err := h.h.DataRange(h.img.Size); err != nil {
			return nil, DiskError(h.img.Path, err)
		}
	}
	need := &disk.Need{Passphrase: disk.WantRequired, Prompt: "the passphrase for " + h.img.Path, KeyFile: disk.WantOptional}
	if len(slots) > 0 {
		need.Tries = "keyslot " + words.List(slots)
	}
	return need, nil
}

// checkUnlock is the luks package's check before a prompt: of what an
// unlock needs, or with TestOnly only of what testing the passphrase needs
// (the keyslot and its digest), as cryptsetup's --test-passphrase.
func (h *luksHeader) checkUnlock(req *disk.Request) ([]int, error) {
	if req.TestOnly {
		return h.h.CheckTestPassphrase(pick(req))
	}
	return h.h.CheckUnlock(pick(req))
}

// Unlock opens a keyslot with the passphrase (or the whole of the key
// file, as cryptsetup takes it) and returns the data segment.
func (h *luksHeader) Unlock(ctx context.Context, req *disk.Request, sec *disk.Secret) (*disk.Unlocked, error) {
	slots, err := h.checkUnlock(req)
	if err != nil {
		return nil, DiskError(headerPath(h.img), err)
	}
	pass := sec.Passphrase
	switch {
	case len(sec.KeyFiles) > 1:
		return nil, disk.WithKind(disk.KindUsage, errors.New("a LUKS image takes one --key-file"))
	case len(sec.KeyFiles) == 1:
		pass = sec.KeyFiles[0]
	}
	hr, _ := h.img.HeaderReader()
	opts := luks.UnlockOptions{Keyslots: slots, Limits: Limits(req)}
	if req.TestOnly {
		c, err := h.h.TestPassphrase(ctx, hr, pass, opts)
		if err != nil {
			return nil, h.unlockError(err)
		}
		u := &disk.Unlocked{Format: FormatName, Key: c.Key, Slot: c.Keyslot, SlotName: fmt.Sprintf("keyslot %d", c.Keyslot)}
		if c.Unservable != nil {
			u.Unservable = c.Unservable.Error()
			var ue *luks.UnsupportedError
			if errors.As(c.Unservable, &ue) && ue.CryptsetupOpens {
				u.Warnings = append(u.Warnings, "cryptsetup, with device-mapper, opens what xtsctl does not support")
			}
			return u, nil
		}
		if h.img.File == nil {
			u.Unservable = "the data device was not opened"
			return u, nil
		}
		if off, n, err := h.h.DataRange(h.img.Size); err == nil {
			u.Layout = h.layout(off, n)
		} else {
			u.Unservable = err.Error()
		}
		return u, nil
	}
	key, slot, err := h.h.Unlock(ctx, hr, pass, opts)
	if err != nil {
		return nil, h.unlockError(err)
	}
	u := &disk.Unlocked{Format: FormatName, Key: key, Slot: slot, SlotName: fmt.Sprintf("keyslot %d", slot)}
	if h.img.File == nil {
		u.Unservable = "the data device was not opened"
		return u, nil
	}
	off, n, err := h.h.DataRange(h.img.Size)
	if err != nil {
		if !req.TestOnly {
			clear(key)
			return nil, DiskError(h.img.Path, err)
		}
		u.Unservable = err.Error()
		return u, nil
	}
	u.Layout = h.layout(off, n)
	return u, nil
}

// Layout is the data segment, known from the header alone.
func (h *luksHeader) Layout() (disk.Layout, error) {
	off, n, err := h.h.DataRange(h.img.Size)
	if err != nil {
		return disk.Layout{}, DiskError(h.img.Path, err)
	}
	return h.layout(off, n), nil
}

func (h *luksHeader) layout(off, n int64) disk.Layout {
	l := disk.SingleExtent(off, n, h.h.SectorParams(), h.h.Cipher, 8*h.h.KeySize)
	for _, f := range h.h.Flags {
		// LUKS2's persistent flags are dm-crypt's options, spelt with
		// dashes; cryptsetup ignores the ones it does not know.
		if o := strings.ReplaceAll(f, "-", "_"); knownDMOption(o) {
			l.DMOptions = append(l.DMOptions, o)
		}
	}
	return l
}

func knownDMOption(o string) bool {
	var t dmtable.CryptTable
	return t.SetOption(o)
}

// unlockError explains a failed unlock, naming the keyslots that only a
// token (TPM2, FIDO2, ...) can open: xtsctl runs no tokens.
func (h *luksHeader) unlockError(err error) error {
	unlock := errors.Is(err, luks.ErrWrongPassphrase) || errors.Is(err, luks.ErrKDFCost)
	err = DiskError(headerPath(h.img), err)
	var byToken []string
	for _, t := range h.h.Tokens {
		byToken = append(byToken, fmt.Sprintf("%s (token %d, keyslots %s)", t.Type, t.ID, words.List(t.Keyslots)))
	}
	if len(byToken) > 0 && unlock && disk.KindOf(err) == disk.KindKey {
		err = disk.WithHints(err, "keyslots bound to tokens open with what the token holds, which xtsctl does not run: "+strings.Join(byToken, ", "))
	}
	return err
}

// DiskError gives an error of package luks (or of this one) its kind for
// the command line and names the file.
func DiskError(file string, err error) error {
	if err == nil {
		return nil
	}
	var (
		de *disk.Error
		ue *luks.UnsupportedError
		se *luks.KeyslotStateError
		nu *luks.UnusableKeyslotsError
		ks *luks.KeyslotStopError
		dd *luks.DataDeviceError
	)
	wrap := func(k disk.Kind, hints ...string) error {
		return disk.WithKind(k, fmt.Errorf("%s: %w", file, err), hints...)
	}
	switch {
	case errors.As(err, &de):
		return err
	case errors.Is(err, context.Canceled):
		return disk.WithKind(disk.KindInterrupted, fmt.Errorf("%s: %w", file, err))
	case errors.As(err, &se) && se.InUse:
		return disk.WithKind(disk.KindUsage, fmt.Errorf("%s: %w", file, err), "pick a free one, or leave --key-slot out")
	case errors.As(err, &se):
		return disk.WithKind(disk.KindUsage, fmt.Errorf("%s: %w", file, err))
	case errors.Is(err, luks.ErrNoKeyslot):
		return disk.WithKind(disk.KindKey, fmt.Errorf("%s has no keyslot: no passphrase opens it", file),
			"restore a header backup taken before the last keyslot was removed")
	case errors.As(err, &nu):
		return DiskError(file, fmt.Errorf("no keyslot xtsctl can use: %w", errors.Join(nu.Errs...)))
	case errors.As(err, &ks) && len(ks.Untried) > 0:
		return disk.WithHints(DiskError(file, ks.Err),
			fmt.Sprintf("keyslots %s were not tried (cryptsetup stops at keyslot %d too); --key-slot N tries one", words.List(ks.Untried), ks.Keyslot))
	case errors.As(err, &dd) && dd.HeaderOnly:
		return disk.WithKind(disk.KindInput, fmt.Errorf("%s: %w", file, err),
			"IMAGE holds only a LUKS header (a detached header or a header backup?): give it with --header HDR and the data device as IMAGE")
	case errors.As(err, &dd):
		return wrap(disk.KindInput)
	case errors.Is(err, luks.ErrNotLUKS):
		return disk.NotFormat("%s is not a LUKS image (no LUKS header at its start, nor a LUKS2 secondary header)", file)
	case errors.Is(err, luks.ErrKDFCost):
		return wrap(disk.KindKey, "the image sets these costs; if you trust it, --allow-expensive-kdf runs them (it may take very long and much memory)")
	case errors.Is(err, luks.ErrWrongPassphrase):
		return disk.WithKind(disk.KindKey, fmt.Errorf("%s: %w", file, wrongSecret{err}))
	case errors.As(err, &ue) && ue.Feature == luks.FeatureVersion && strings.HasPrefix(ue.Value, "1 "):
		return wrap(disk.KindInput, "cryptsetup writes LUKS1 headers, or converts them: cryptsetup convert --type luks2 (back up the header first)")
	case errors.As(err, &ue) && ue.Feature == luks.FeatureReencryption:
		return wrap(disk.KindInput)
	case errors.As(err, &ue) && ue.CryptsetupOpens:
		return wrap(disk.KindInput, "cryptsetup, with device-mapper, opens what xtsctl does not support")
	case errors.Is(err, luks.ErrUnsupported):
		return wrap(disk.KindInput)
	case errors.Is(err, luks.ErrCorrupt):
		return wrap(disk.KindIntegrity, "if you have a header backup of it: xtsctl header restore --force IMAGE BACKUP")
	case errors.Is(err, luks.ErrLastKeyslot):
		return wrap(disk.KindUsage, "add another passphrase first (xtsctl passphrase add), or use --force")
	case errors.Is(err, luks.ErrHeaderChanged):
		return wrap(disk.KindFailure, "another program changed the header meanwhile; run the command again")
	case errors.Is(err, luks.ErrUUIDMismatch):
		return wrap(disk.KindUsage, "a header backup goes back onto the volume it was taken from")
	case errors.Is(err, disk.ErrInUse):
		return wrap(disk.KindDevice, "xtsctl status lists open images; close it first")
	}
	return wrap(disk.KindFailure)
}

// wrongSecret keeps luks's message for a wrong passphrase while making it
// disk.ErrWrongSecret to callers that test for any format's.
type wrongSecret struct{ err error }

func (w wrongSecret) Error() string   { return w.err.Error() }
func (w wrongSecret) Unwrap() []error { return []error{w.err, disk.ErrWrongSecret} }

// Describe names the LUKS version, and says whether the header is damaged.
func (luksFormat) Describe(r io.ReaderAt, size int64) string {
	h, err := luks.ReadHeader(r, size)
	switch {
	case err != nil:
		return "a LUKS image (cryptsetup) whose header is damaged"
	case len(h.Copies) > 0 && (h.Copies[0].State == luks.CopyDamaged || h.Copies[0].State == luks.CopyMissing):
		return "a LUKS2 image (cryptsetup) whose primary header is damaged"
	}
	return fmt.Sprintf("a LUKS%d image (cryptsetup)", h.Version)
}
