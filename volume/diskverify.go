package volume

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/xtsctl/xtsctl/disk"
	"github.com/xtsctl/xtsctl/internal/words"
)

// Verify checks both header copies and their key slots, the tag of every
// sector and the end-to-end digest (when the volume was not written since
// it was recorded), reporting each finding. It fails with KindIntegrity,
// naming the problems, when anything does not check out; it never writes.
func (h *volumeHeader) Verify(ctx context.Context, u *disk.Unlocked, opt disk.VerifyOptions) error {
	image := h.img.Path
	v, err := OpenDevice(h.img.File, h.img.Size, true, WithKey(u.Key))
	if err != nil {
		return DiskError(image, err)
	}
	v.lastSlot = u.Slot
	defer v.Close()
	hd := v.Header()
	var problems []string
	hs := v.Headers()
	for _, c := range []CopyStatus{hs.Primary, hs.Secondary} {
		if c.Err != nil {
			opt.Finding("header: %s copy at byte %d: damaged (%v)", c.Name, c.Offset, c.Err)
			problems = append(problems, fmt.Sprintf("the %s header copy is damaged", c.Name))
		} else {
			opt.Finding("header: %s copy at byte %d: ok (generation %d)", c.Name, c.Offset, c.Generation)
		}
	}
	if len(hs.Damaged) > 0 {
		problems = append(problems, fmt.Sprintf("key slots %v are damaged in both copies", hs.Damaged))
	}
	opt.Finding("key slots in use: %s; the passphrase opened slot %d", words.List(hd.ActiveSlots()), u.Slot)

	st := v.State()
	if !st.Valid || st.Dirty {
		regions, all, err := v.RecoveryRegions()
		if err != nil {
			return DiskError(image, err)
		}
		switch {
		case !st.Valid:
			opt.Finding("state: unknown (no usable state record)")
			opt.Warn("%s: whether the volume was closed cleanly is unknown", image)
		case all:
			opt.Finding("state: not closed cleanly (which regions were being written cannot be trusted)")
			opt.Warn("%s: the volume was not closed cleanly, and the record of the regions being written cannot be trusted", image)
		default:
			opt.Finding("state: not closed cleanly (%s)", words.Plural(int64(len(regions)), "dirty region"))
			opt.Warn("%s: the volume was not closed cleanly: %d regions may hold sectors written just before, whose tags may not match", image, len(regions))
		}
	} else {
		opt.Finding("state: closed cleanly")
	}
	if st.Valid && !st.Authenticated {
		opt.Warn("%s: volume format version 1: its state area is not authenticated (a read-write open upgrades it)", image)
	}

	if opt.Total != nil {
		opt.Total(hd.DataLength)
	}
	res, err := v.Verify(ctx, opt.Progress, func(b BadSector) {
		why := "tag mismatch"
		if b.DirtyRegion {
			why += ", in a region being written when the volume was last used (a crash may have torn it: a read-write open checks it, open --recover accepts it)"
		}
		opt.Finding("bad sector %d at byte offset %d: %s", b.Sector, b.Offset, why)
	})
	var dm *DigestMismatchError
	if err != nil && !errors.As(err, &dm) {
		return DiskError(image, err)
	}
	if hd.Integrity == IntegrityNone {
		opt.Finding("data: %d sectors; no integrity tags to check", hd.Sectors())
	} else {
		opt.Finding("data: %d sectors, %d bad", hd.Sectors(), res.BadSectors)
	}
	if res.BadSectors > 0 {
		problems = append(problems, words.Plural(res.BadSectors, "bad sector"))
	}
	switch d := res.Digest; {
	case dm != nil:
		opt.Finding("digest: MISMATCH (recorded %x, data %x)", dm.Recorded, dm.Computed)
		problems = append(problems, "the end-to-end digest does not match")
	case d.Match:
		opt.Finding("digest: ok (%x)", d.Computed)
	case d.Stale:
		opt.Finding("digest: not checked (the volume was written since it was recorded)")
	case !d.Recorded:
		opt.Finding("digest: none recorded (made with --digest none)")
	}
	if len(problems) > 0 {
		return disk.WithKind(disk.KindIntegrity, fmt.Errorf("%s: %s", image, strings.Join(problems, "; ")))
	}
	return nil
}
