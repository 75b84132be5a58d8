package main

// passphrase add|remove|change and header backup|restore on LUKS images.
// The header device is locked with volume.LockImage (exclusively), as for
// volumes: an image that is open, or being changed by another xtsctl
// command, is refused. The luks package writes crash-safely (docs/LUKS.md).

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"github.com/xtsctl/xtsctl/internal/bytesize"
	"github.com/xtsctl/xtsctl/luks"
	"github.com/xtsctl/xtsctl/luks/luksimage"
)

// luksChangeSlots is passphrase add, remove or change on a LUKS2 image
// (cmd_passphrase.go's hook). --key-slot picks, as in cryptsetup, the
// keyslot to add (add) or the one to remove or change, which the
// passphrase given must open (luksimage.KeyslotChange).
func luksChangeSlots(a *app, cmd *cobra.Command, image, op string, force bool) error {
	li, err := openLUKS(cmd, image, luksimage.WriteHeader)
	if err != nil {
		return err
	}
	defer li.Close()
	h := li.Header
	// Refusals before any prompt: nothing this package cannot decrypt,
	// and LUKS1 is not written.
	if err := h.Supported(); err != nil {
		return luksError(li.HeaderPath, err)
	}
	if h.Version != 2 {
		return luksError(li.HeaderPath, &luks.UnsupportedError{Feature: luks.FeatureVersion, Value: "1 (writing)", Keyslot: -1,
			Hint: "xtsctl writes LUKS2 headers only"})
	}
	pick, err := luksKeySlot(cmd)
	if err != nil {
		return err
	}
	c := luksimage.KeyslotChange{Keyslot: pick, AllowLast: force, Limits: a.luksLimits()}
	prompt := ""
	switch op {
	case "add":
		c.Op, prompt = luksimage.AddKeyslot, "an existing passphrase for "+image
	case "change":
		c.Op, prompt = luksimage.ChangeKeyslot, "the passphrase to change of "+image
	case "remove":
		c.Op, prompt = luksimage.RemoveKeyslot, "the passphrase to remove from "+image
		if pick != nil {
			prompt = fmt.Sprintf("a passphrase of %s (any keyslot) to authorise removing keyslot %d", image, *pick)
		}
	}
	c.Passphrase = func() ([]byte, error) { return luksPassphrase(a, cmd, "key-file", "passphrase-file", prompt, false) }
	var kp *luks.Argon2Params
	c.New = func() ([]byte, *luks.Argon2Params, error) {
		pass, err := luksNewPassphrase(a, cmd, "new-key-file", "new-passphrase-file", image)
		if err == nil {
			if kp, err = luksKDF(a, cmd); err != nil {
				clear(pass)
				pass = nil
			}
		}
		return pass, kp, err
	}
	slot, err := li.ChangeKeyslots(a.ctx, c)
	switch {
	case errors.Is(err, luks.ErrLastKeyslot):
		return usageError(fmt.Errorf("keyslot %d holds the last passphrase of %s: without it the image cannot be opened", slot, image),
			"add another passphrase first (xtsctl passphrase add), or use --force")
	case err != nil:
		return luksUnlockError(li, err)
	case op == "remove":
		a.infof("removed keyslot %d from %s (its key material overwritten)", slot, li.HeaderPath)
	case op == "add":
		a.infof("added keyslot %d to %s (%s)", slot, li.HeaderPath, luks.KDF{Type: "argon2id", Time: kp.Time, MemoryKiB: kp.MemoryKiB, Threads: kp.Threads})
	default:
		a.infof("changed the passphrase of keyslot %d of %s", slot, li.HeaderPath)
	}
	return nil
}

// luksHeaderBackup is header backup of a LUKS image (cmd_header.go's hook):
// cryptsetup luksHeaderBackup's format, byte for byte.
func luksHeaderBackup(a *app, cmd *cobra.Command, image, file string, force bool) error {
	li, err := openLUKS(cmd, image, luksimage.Inspect)
	if err != nil {
		return err
	}
	defer li.Close()
	out, err := luksOutput(file, li, force)
	if err != nil {
		return err
	}
	n, err := li.Header.Backup(li.HeaderFile, out)
	if err != nil {
		out.Abort()
		return luksError(li.HeaderPath, err)
	}
	if err := out.Commit(); err != nil {
		return withCode(exitOutput, err)
	}
	a.infof("saved the LUKS%d header of %s (UUID %s, keyslots %s; %d bytes, as cryptsetup luksHeaderBackup writes it) to %s",
		li.Header.Version, li.HeaderPath, li.Header.UUID, intList(li.Header.KeyslotIDs()), n, file)
	a.warningf("%s holds the volume key wrapped by every passphrase %s has now: keep it as safe as the image", file, li.HeaderPath)
	return nil
}

// isLUKSBackup reports whether file is a LUKS header backup, for header
// restore's choice.
func isLUKSBackup(file string) bool { return hasLUKSHeader(file) }

// luksHeaderRestore is header restore onto a LUKS image (cmd_header.go's
// hook), from a backup of ours or cryptsetup's. --force restores onto a
// device without a readable LUKS header.
func luksHeaderRestore(a *app, cmd *cobra.Command, image, file string, force bool) error {
	b, err := luksimage.OpenBackup(file)
	var he *luksimage.HeaderError
	switch {
	case errors.As(err, &he):
		return withCode(exitInput, fmt.Errorf("%s is not a LUKS header backup: %w", file, he.Err))
	case err != nil:
		return withCode(exitInput, err)
	}
	defer b.Close()
	target := image
	if hf := flagString(cmd, "header"); hf != "" {
		target = hf
	}
	if err := luksimage.CheckPath(target, "image"); err != nil {
		return withCode(exitInput, err)
	}
	f, err := openExclusive(target)
	if err != nil {
		return err
	}
	defer f.Close()
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return withCode(exitInput, err)
	}
	current, err := luks.ReadHeader(f, size)
	switch {
	case err != nil && !force:
		return withCode(exitInput, fmt.Errorf("%s has no readable LUKS header to check the backup against (%w): restoring would overwrite its first %s",
			target, err, bytesize.Human(b.Size)), "if "+target+" is the device this backup belongs to, --force restores it all the same")
	case err == nil && current.UUID == b.Header.UUID:
		// As for volumes (headerRestore): say what the keyslots lose
		// or regain, and ask.
		if change := describeRollback(luks.Rollback(current, b.Header)); change != "" {
			if err := confirm(a, fmt.Sprintf("restoring %s onto %s %s", file, target, change)); err != nil {
				return err
			}
		}
	}
	h, err := luks.Restore(f, size, b.File, b.Size, luks.RestoreOptions{NoHeader: force})
	if err != nil {
		return luksError(target, err)
	}
	a.infof("restored the LUKS2 header of %s from %s (UUID %s, keyslots %s) to both header copies", target, file, h.UUID, intList(h.KeyslotIDs()))
	return nil
}
