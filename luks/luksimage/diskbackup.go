package luksimage

import (
	"fmt"
	"io"

	"github.com/xtsctl/xtsctl/disk"
	"github.com/xtsctl/xtsctl/internal/bytesize"
	"github.com/xtsctl/xtsctl/internal/words"
	"github.com/xtsctl/xtsctl/luks"
)

// Backup writes cryptsetup luksHeaderBackup's format, byte for byte.
func (h *luksHeader) Backup(w io.Writer) (string, string, error) {
	hr, _ := h.img.HeaderReader()
	path := headerPath(h.img)
	n, err := h.h.Backup(hr, w)
	if err != nil {
		return "", "", DiskError(path, err)
	}
	return fmt.Sprintf("the LUKS%d header of %s (UUID %s, keyslots %s; %d bytes, as cryptsetup luksHeaderBackup writes it)",
			h.h.Version, path, h.h.UUID, words.List(h.h.KeyslotIDs()), n),
		fmt.Sprintf("holds the volume key wrapped by every passphrase %s has now: keep it as safe as the image", path), nil
}

// IsBackup recognises a LUKS header backup (ours or cryptsetup's): a LUKS
// header.
func (luksFormat) IsBackup(r io.ReaderAt, size int64) bool { return luks.Detect(r, size) }

// Restore writes a LUKS2 header backup onto img's header (the detached
// header file, if any). Without Force the image must hold a readable LUKS
// header of the same UUID; restoring asks first when it brings back or
// drops passphrases.
func (luksFormat) Restore(img *disk.Image, r io.ReaderAt, size int64, opt disk.RestoreOptions) (string, error) {
	b, err := luks.ReadHeader(r, size)
	if err != nil {
		// Refused as info refuses that file: damaged, unsupported.
		return "", DiskError(opt.BackupName, err)
	}
	target := headerPath(img)
	f, fsize := img.File, img.Size
	if img.HeaderFile != nil {
		f, fsize = img.HeaderFile, img.HeaderSize
	}
	current, err := luks.ReadHeader(f, fsize)
	switch {
	case err != nil && !opt.Force:
		return "", disk.WithKind(disk.KindInput, fmt.Errorf("%s has no readable LUKS header to check the backup against (%w): restoring would overwrite its first %s",
			target, err, bytesize.Human(size)), "if "+target+" is the device this backup belongs to, --force restores it all the same")
	case err == nil && current.UUID == b.UUID && opt.Confirm != nil:
		if change := disk.DescribeRollback(luks.Rollback(current, b)); change != "" {
			if err := opt.Confirm(fmt.Sprintf("restoring %s onto %s %s", opt.BackupName, target, change)); err != nil {
				return "", err
			}
		}
	}
	h, err := luks.Restore(f, fsize, r, size, luks.RestoreOptions{NoHeader: opt.Force})
	if err != nil {
		return "", DiskError(target, err)
	}
	return fmt.Sprintf("the LUKS2 header of %s from %s (UUID %s, keyslots %s)", target, opt.BackupName, h.UUID, words.List(h.KeyslotIDs())), nil
}
