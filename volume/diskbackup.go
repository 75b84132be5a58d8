package volume

import (
	"errors"
	"fmt"
	"io"

	"github.com/xtsctl/xtsctl/disk"
	"github.com/xtsctl/xtsctl/internal/words"
)

// Backup writes the header in use, with its key slots (8192 bytes).
func (h *volumeHeader) Backup(w io.Writer) (string, string, error) {
	b, err := h.hs.Backup()
	if err != nil {
		return "", "", DiskError(h.img.Path, err)
	}
	if _, err := w.Write(b); err != nil {
		return "", "", disk.WithKind(disk.KindOutput, err)
	}
	hd := h.hs.Header
	return fmt.Sprintf("the header of %s (UUID %s, generation %d, key slots %s)", h.img.Path, hd.UUIDString(), hd.Generation, words.List(hd.ActiveSlots())),
		"holds the wrapped master key: keep it as safe as the volume", nil
}

// IsBackup recognises a volume header backup: one header copy.
func (volumeFormat) IsBackup(r io.ReaderAt, size int64) bool {
	if size != CopySize {
		return false
	}
	b := make([]byte, CopySize)
	if _, err := r.ReadAt(b, 0); err != nil {
		return false
	}
	return string(b[:len(Magic)]) == Magic
}

// Restore writes the backup to both header copies of img, one at a time,
// each synced; it asks first when that brings back or drops passphrases.
func (volumeFormat) Restore(img *disk.Image, r io.ReaderAt, size int64, opt disk.RestoreOptions) (string, error) {
	image := img.Path
	if size != CopySize {
		return "", disk.WithKind(disk.KindInput, fmt.Errorf("%s is not a header backup: %d bytes, a backup has %d", opt.BackupName, size, CopySize))
	}
	backup := make([]byte, CopySize)
	if _, err := r.ReadAt(backup, 0); err != nil {
		return "", disk.WithKind(disk.KindInput, fmt.Errorf("cannot read %s: %w", opt.BackupName, err))
	}
	if _, err := ParseHeader(backup); err != nil {
		return "", disk.WithKind(disk.KindInput, fmt.Errorf("%s is not a valid header backup: %w", opt.BackupName, err))
	}
	current, err := ReadHeaders(img.File, img.Size)
	var (
		hd *HeadersDamagedError
		te *TruncatedError
	)
	switch {
	case err == nil, errors.As(err, &te):
	case errors.As(err, &hd):
		current = nil // the case restore is for
	case errors.Is(err, ErrNotVolume):
		if !opt.Force {
			return "", disk.WithKind(disk.KindInput, fmt.Errorf("%s holds no xtsctl volume header: restoring would overwrite its first and last 8 KiB", image),
				"if IMAGE is the volume this backup belongs to, use --force")
		}
		current = nil
	default:
		return "", DiskError(image, err)
	}
	if current != nil {
		if change := disk.DescribeRollback(SlotRollback(current.Header, backup)); change != "" && opt.Confirm != nil {
			if err := opt.Confirm(fmt.Sprintf("restoring %s onto %s %s", opt.BackupName, image, change)); err != nil {
				return "", err
			}
		}
	}
	h, err := Restore(img.File, img.Size, current, backup, opt.Force)
	if err != nil {
		return "", DiskError(image, err)
	}
	return fmt.Sprintf("the header of %s from %s (UUID %s, key slots %s)", image, opt.BackupName, h.UUIDString(), words.List(h.ActiveSlots())), nil
}
