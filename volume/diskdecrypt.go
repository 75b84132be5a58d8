package volume

import (
	"context"
	"errors"
	"io"

	"github.com/xtsctl/xtsctl/disk"
)

// Decrypt writes the volume's plaintext to w: every sector's tag is
// checked before it is decrypted, and the end-to-end digest at the end
// (opt.Digest).
func (h *volumeHeader) Decrypt(ctx context.Context, u *disk.Unlocked, w io.Writer, opt disk.DecryptOptions) (*disk.DecryptResult, error) {
	v, err := OpenDevice(h.img.File, h.img.Size, true, WithKey(u.Key))
	if err != nil {
		return nil, DiskError(h.img.Path, err)
	}
	defer v.Close()
	hd := v.Header()
	if opt.Total != nil {
		opt.Total(hd.DataLength)
	}
	dc, err := v.Decrypt(ctx, w, opt.Digest, opt.Progress)
	var dm *DigestMismatchError
	switch {
	case errors.As(err, &dm):
		return nil, disk.WithKind(disk.KindIntegrity, err)
	case errors.Is(err, context.Canceled):
		return nil, err
	case err != nil:
		var re *ReadError
		var we *WriteError
		if errors.As(err, &re) || errors.As(err, &we) {
			return nil, err
		}
		return nil, DiskError(h.img.Path, err)
	}
	res := &disk.DecryptResult{Bytes: hd.DataLength}
	if dc.Done {
		res.Digest = append([]byte(nil), dc.Computed[:]...)
	}
	switch {
	case !opt.Digest && hd.Integrity == IntegrityNone:
		res.Checked = "nothing checked (no tags, and --digest none)"
	case !opt.Digest:
		res.Checked = "every sector tag verified; the end-to-end digest was not computed (--digest none)"
	case dc.Match:
		res.Checked = "every sector tag and the end-to-end digest verified"
	case dc.Stale:
		res.Checked = "every sector tag verified; the end-to-end digest was not checked (the volume was written since it was recorded)"
	case !dc.Recorded && hd.Integrity != IntegrityNone:
		res.Checked = "every sector tag verified; the volume records no end-to-end digest (made with --digest none)"
	}
	return res, nil
}
