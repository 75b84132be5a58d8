package main

// passphrase add|remove|change and header backup|restore on LUKS images.
// The header device is locked with volume.LockImage (exclusively), as for
// volumes: an image that is open, or being changed by another xtsctl
// command, is refused. The luks package writes crash-safely (docs/LUKS.md).

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/spf13/cobra"
	"github.com/xtsctl/xtsctl/internal/bytesize"
	"github.com/xtsctl/xtsctl/luks"
)

// luksChangeSlots is passphrase add, remove or change on a LUKS2 image
// (cmd_passphrase.go's hook). --key-slot picks, as in cryptsetup, the
// keyslot to add (add) or the one to remove or change, which the
// passphrase given must open.
func luksChangeSlots(a *app, cmd *cobra.Command, image, op string, force bool) error {
	li, err := openLUKS(cmd, image, luksWriteHeader)
	if err != nil {
		return err
	}
	defer li.Close()
	h := li.h
	// Refusals before any prompt: nothing this package cannot decrypt,
	// and LUKS1 is not written.
	if err := h.Supported(); err != nil {
		return luksError(li.hdrName, err)
	}
	if h.Version != 2 {
		return luksError(li.hdrName, &luks.UnsupportedError{Feature: luks.FeatureVersion, Value: "1 (writing)", Keyslot: -1,
			Hint: "xtsctl writes LUKS2 headers only"})
	}
	pick, err := luksKeySlot(cmd)
	if err != nil {
		return err
	}
	// --key-slot, as cryptsetup and as for volumes: add puts the new
	// passphrase in that keyslot; change changes that keyslot (unlocked
	// with its passphrase); remove removes it, authorised by any
	// passphrase (luksKillSlot), where without it the passphrase given is
	// the one removed.
	prompt := map[string]string{
		"add":    "an existing passphrase for " + image,
		"change": "the passphrase to change of " + image,
		"remove": "the passphrase to remove from " + image,
	}[op]
	var newSlot, kill *int
	switch {
	case op == "add" && pick != nil:
		if h.Keyslot(*pick) != nil {
			return usageError(fmt.Errorf("%s: keyslot %d is in use", li.hdrName, *pick), "pick a free one, or leave --key-slot out")
		}
		newSlot, pick = pick, nil
	case op == "remove" && pick != nil:
		if h.Keyslot(*pick) == nil {
			return usageError(fmt.Errorf("%s: keyslot %d is not in use (keyslots in use: %s)", li.hdrName, *pick, keyslotList(h)))
		}
		kill, pick = pick, nil
		prompt = fmt.Sprintf("a passphrase of %s (any keyslot) to authorise removing keyslot %d", image, *kill)
	}
	slots, err := luksUsable(li, pick)
	if err != nil {
		return err
	}
	pass, err := luksPassphrase(a, cmd, "key-file", "passphrase-file", prompt, false)
	if err != nil {
		return err
	}
	lim := a.luksLimits()
	key, slot, err := h.Unlock(a.ctx, li.hdr, pass, luks.UnlockOptions{Keyslots: slots, Limits: lim})
	clear(pass)
	if err != nil {
		return luksUnlockError(li, err)
	}
	defer clear(key)

	if op == "remove" {
		if kill != nil {
			slot = *kill
		}
		if err := h.RemoveKeyslot(li.hdr, li.hdrSize, slot, luks.RemoveOptions{AllowLast: force}); err != nil {
			if errors.Is(err, luks.ErrLastKeyslot) {
				return usageError(fmt.Errorf("keyslot %d holds the last passphrase of %s: without it the image cannot be opened", slot, image),
					"add another passphrase first (xtsctl passphrase add), or use --force")
			}
			return luksError(li.hdrName, err)
		}
		a.infof("removed keyslot %d from %s (its key material overwritten)", slot, li.hdrName)
		return nil
	}

	newPass, err := luksNewPassphrase(a, cmd, "new-key-file", "new-passphrase-file", image)
	if err != nil {
		return err
	}
	defer clear(newPass)
	kp, err := luksKDF(a, cmd)
	if err != nil {
		return err
	}
	opts := luks.KeyslotOptions{Argon2: kp, Keyslot: newSlot, Limits: lim}
	if op == "add" {
		n, err := h.AddKeyslot(li.hdr, li.hdrSize, key, newPass, opts)
		if err != nil {
			return luksError(li.hdrName, err)
		}
		a.infof("added keyslot %d to %s (%s)", n, li.hdrName, kdfDescription(luks.KDF{Type: "argon2id", Time: kp.Time, MemoryKiB: kp.MemoryKiB, Threads: kp.Threads}))
		return nil
	}
	if err := h.ChangeKeyslot(li.hdr, li.hdrSize, slot, key, newPass, opts); err != nil {
		return luksError(li.hdrName, err)
	}
	a.infof("changed the passphrase of keyslot %d of %s", slot, li.hdrName)
	return nil
}

// luksHeaderBackup is header backup of a LUKS image (cmd_header.go's hook):
// cryptsetup luksHeaderBackup's format, byte for byte.
func luksHeaderBackup(a *app, cmd *cobra.Command, image, file string, force bool) error {
	li, err := openLUKS(cmd, image, luksInspect)
	if err != nil {
		return err
	}
	defer li.Close()
	out, err := luksOutput(file, li, force)
	if err != nil {
		return err
	}
	n, err := li.h.Backup(li.hdr, out)
	if err != nil {
		out.Abort()
		return luksError(li.hdrName, err)
	}
	if err := out.Commit(); err != nil {
		return withCode(exitOutput, err)
	}
	a.infof("saved the LUKS%d header of %s (UUID %s, keyslots %s; %d bytes, as cryptsetup luksHeaderBackup writes it) to %s",
		li.h.Version, li.hdrName, li.h.UUID, keyslotList(li.h), n, file)
	a.warningf("%s holds the volume key wrapped by every passphrase %s has now: keep it as safe as the image", file, li.hdrName)
	return nil
}

// isLUKSBackup reports whether file is a LUKS header backup, for header
// restore's choice.
func isLUKSBackup(file string) bool { return hasLUKSHeader(file) }

// luksHeaderRestore is header restore onto a LUKS image (cmd_header.go's
// hook), from a backup of ours or cryptsetup's. --force restores onto a
// device without a readable LUKS header.
func luksHeaderRestore(a *app, cmd *cobra.Command, image, file string, force bool) error {
	if err := checkInputPath(file, "header backup"); err != nil {
		return err
	}
	b, err := os.Open(file)
	if err != nil {
		return withCode(exitInput, fmt.Errorf("cannot read header backup: %w", err))
	}
	defer b.Close()
	bsize, err := b.Seek(0, io.SeekEnd)
	if err != nil {
		return withCode(exitInput, fmt.Errorf("cannot read header backup %s: %w", file, err))
	}
	backup, err := luks.ReadHeader(b, bsize)
	if err != nil {
		return withCode(exitInput, fmt.Errorf("%s is not a LUKS header backup: %w", file, err))
	}
	target := image
	if hf := flagString(cmd, "header"); hf != "" {
		target = hf
	}
	if err := checkInputPath(target, "image"); err != nil {
		return err
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
			target, err, bytesize.Human(bsize)), "if "+target+" is the device this backup belongs to, --force restores it all the same")
	case err == nil && current.UUID == backup.UUID:
		// As for volumes (headerRestore): say what the keyslots lose
		// or regain, and ask.
		if change := luksSlotRollback(current, backup); change != "" {
			if err := confirm(a, fmt.Sprintf("restoring %s onto %s %s", file, target, change)); err != nil {
				return err
			}
		}
	}
	h, err := luks.Restore(f, size, b, bsize, luks.RestoreOptions{NoHeader: force})
	if err != nil {
		return luksError(target, err)
	}
	a.infof("restored the LUKS2 header of %s from %s (UUID %s, keyslots %s) to both header copies", target, file, h.UUID, keyslotList(h))
	return nil
}

// luksSlotRollback says how restoring backup changes the keyslots of cur:
// passphrases it brings back (keyslots removed or changed since) and ones
// it removes (added since); "" if none.
func luksSlotRollback(cur, backup *luks.Header) string {
	salts := map[int][]byte{}
	for _, k := range cur.Keyslots {
		salts[k.ID] = k.KDF.Salt
	}
	var back, gone []int
	for _, k := range backup.Keyslots {
		if salt, ok := salts[k.ID]; !ok || !bytes.Equal(salt, k.KDF.Salt) {
			back = append(back, k.ID)
		}
		delete(salts, k.ID)
	}
	for id := range salts {
		gone = append(gone, id)
	}
	slices.Sort(gone)
	return describeRollback(back, gone)
}
