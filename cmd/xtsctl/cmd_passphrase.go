package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"github.com/xtsctl/xtsctl/volume"
)

func init() { registerCommand(newPassphraseCmd) }

func newPassphraseCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "passphrase add|remove|change IMAGE",
		Short: "Add, remove or change a volume's passphrases",
		Long: `Manage the passphrases (key slots, up to 8) of the xtsctl volume IMAGE.

Each change rewrites both header copies, one at a time, each synced: if
xtsctl is killed or the machine stops at any moment, the volume still opens
with the old passphrase or the new one. Passphrases are asked on the
terminal (new ones twice), or read from --passphrase-file (an existing
passphrase) and --new-passphrase-file.`,
		Example: `  xtsctl passphrase add disk.vol
  xtsctl passphrase change --passphrase-file old.txt --new-passphrase-file new.txt disk.vol
  xtsctl passphrase remove disk.vol`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return usageError(errors.New("passphrase: missing subcommand add, remove or change"),
				"usage: xtsctl passphrase add|remove|change IMAGE")
		},
	}
	cmd.AddCommand(newPassphraseAddCmd(a), newPassphraseRemoveCmd(a), newPassphraseChangeCmd(a))
	return cmd
}

type slotFlags struct {
	passFile, newPassFile string
	kdf                   kdfFlags
	force                 bool
}

func (f *slotFlags) register(a *app, cmd *cobra.Command, newPass bool) {
	fs := cmd.Flags()
	fs.StringVar(&f.passFile, "passphrase-file", "", "read the existing passphrase from FILE instead of the terminal")
	registerUnlockFlags(a, fs)
	if newPass {
		fs.StringVar(&f.newPassFile, "new-passphrase-file", "", "read the new passphrase from FILE instead of the terminal")
		f.kdf.register(fs)
	}
}

func newPassphraseAddCmd(a *app) *cobra.Command {
	var f slotFlags
	cmd := &cobra.Command{
		Use:   "add IMAGE",
		Short: "Add a passphrase in a free key slot",
		Long: `Add a passphrase to the xtsctl volume IMAGE, in the first free key slot
(or in slot N with --key-slot N). An existing passphrase unlocks the master
key, which the new passphrase then wraps too.`,
		Example: "  xtsctl passphrase add disk.vol\n  xtsctl passphrase add --key-slot 7 disk.vol",
		Args:    argsNamed("IMAGE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if wantsLUKS(cmd, args[0]) {
				return luksChangeSlots(a, cmd, args[0], "add", false)
			}
			if err := notLUKS(cmd); err != nil {
				return err
			}
			return changeSlots(a, args[0], &f, "add")
		},
	}
	f.register(a, cmd, true)
	cmd.Flags().Lookup("key-slot").Usage = "put the new passphrase in key slot `N` (0-7; LUKS2: 0-31), which must be free"
	addLUKSFlags(cmd, luksHeaderFlag|luksUnlockFlags|luksNewKeyFlag)
	return cmd
}

func newPassphraseRemoveCmd(a *app) *cobra.Command {
	var f slotFlags
	cmd := &cobra.Command{
		Use:   "remove IMAGE",
		Short: "Remove a passphrase",
		Long: `Remove the passphrase given (its key slot is erased) from the xtsctl volume
IMAGE; or, with --key-slot N, remove key slot N, authorised by any
passphrase of the volume (as cryptsetup luksKillSlot). Removing the last
passphrase makes the volume impossible to open (short of a header backup):
it needs --force.

A header backup taken before still holds the removed passphrase's key slot.`,
		Example: "  xtsctl passphrase remove disk.vol\n  xtsctl passphrase remove --key-slot 3 disk.vol  # any passphrase authorises",
		Args:    argsNamed("IMAGE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if wantsLUKS(cmd, args[0]) {
				return luksChangeSlots(a, cmd, args[0], "remove", f.force)
			}
			if err := notLUKS(cmd); err != nil {
				return err
			}
			return changeSlots(a, args[0], &f, "remove")
		},
	}
	f.register(a, cmd, false)
	addLUKSFlags(cmd, luksHeaderFlag|luksUnlockFlags)
	cmd.Flags().BoolVarP(&f.force, "force", "f", false, "remove the last passphrase too")
	cmd.Flags().Lookup("key-slot").Usage = "remove key slot `N` (0-7; LUKS2: 0-31), whichever passphrase of the volume is given"
	return cmd
}

func newPassphraseChangeCmd(a *app) *cobra.Command {
	var f slotFlags
	cmd := &cobra.Command{
		Use:   "change IMAGE",
		Short: "Change a passphrase",
		Long: `Replace a passphrase of the xtsctl volume IMAGE with a new one, in the same
key slot. With --key-slot N, the passphrase given must be slot N's.`,
		Example: "  xtsctl passphrase change disk.vol",
		Args:    argsNamed("IMAGE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if wantsLUKS(cmd, args[0]) {
				return luksChangeSlots(a, cmd, args[0], "change", false)
			}
			if err := notLUKS(cmd); err != nil {
				return err
			}
			return changeSlots(a, args[0], &f, "change")
		},
	}
	f.register(a, cmd, true)
	addLUKSFlags(cmd, luksHeaderFlag|luksUnlockFlags|luksNewKeyFlag)
	return cmd
}

// openForHeader opens image to rewrite its header, with what ReadHeaders
// found; damaged-but-usable headers come with warnings, a truncated volume
// is refused.
func openForHeader(a *app, image string) (*os.File, int64, *volume.Headers, error) {
	in, err := openInput(image)
	if err != nil {
		return nil, 0, nil, err
	}
	in.Close()
	f, err := openExclusive(image)
	if err != nil {
		return nil, 0, nil, err
	}
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		f.Close()
		return nil, 0, nil, withCode(exitInput, err)
	}
	hs, err := volume.ReadHeaders(f, size)
	if err != nil {
		f.Close()
		return nil, 0, hs, volumeError(image, err)
	}
	warnAll(a, image, hs.Warnings)
	return f, size, hs, nil
}

func changeSlots(a *app, image string, sf *slotFlags, op string) error {
	f, _, hs, err := openForHeader(a, image)
	if err != nil {
		return err
	}
	defer f.Close()
	// --key-slot, as cryptsetup: add puts the new passphrase in that
	// slot; change changes that slot (unlocked with its passphrase);
	// remove removes that slot, authorised by any passphrase of the
	// volume (luksKillSlot), where without it the passphrase given is
	// the one removed.
	target := a.keySlot
	prompt := map[string]string{
		"add":    "an existing passphrase for " + image,
		"change": "the passphrase to change of " + image,
		"remove": "the passphrase to remove from " + image,
	}[op]
	opts := a.unlockOptions(image)
	if op != "change" {
		opts.Slot = -1
	}
	if target >= 0 {
		active := hs.Header.Slots[target].Active
		switch {
		case op == "add" && active:
			return usageError(fmt.Errorf("key slot %d of %s is in use", target, image), "choose a free one: xtsctl info "+image)
		case op != "add" && !active:
			return usageError(fmt.Errorf("key slot %d of %s is empty", target, image), "xtsctl info "+image+" lists the slots in use")
		case op == "remove":
			prompt = fmt.Sprintf("a passphrase of %s (any slot) to authorise removing key slot %d", image, target)
		}
	}
	pass, err := readPassphrase(a, passphraseRequest{file: sf.passFile, flag: "passphrase-file", prompt: prompt})
	if err != nil {
		return err
	}
	key, slot, err := hs.UnlockWith(pass, opts)
	clear(pass)
	if err != nil {
		return volumeError(image, err)
	}
	defer clear(key)

	if op == "remove" {
		if target >= 0 {
			slot = target
		}
		if len(hs.Header.ActiveSlots()) == 1 && !sf.force {
			return usageError(fmt.Errorf("key slot %d holds the last passphrase of %s: without it the volume cannot be opened", slot, image),
				"add another passphrase first (xtsctl passphrase add), or use --force")
		}
		if err := volume.RemoveSlot(f, hs, slot); err != nil {
			return volumeError(image, err)
		}
		a.infof("removed key slot %d from %s", slot, image)
		return nil
	}

	newPass, err := readPassphrase(a, passphraseRequest{file: sf.newPassFile, flag: "new-passphrase-file",
		prompt: "the new passphrase for " + image, confirm: true})
	if err != nil {
		return err
	}
	defer clear(newPass)
	kdf, err := sf.kdf.params(a)
	if err != nil {
		return err
	}
	if op == "add" {
		n, err := volume.AddSlot(f, hs, key, newPass, kdf, target)
		if errors.Is(err, volume.ErrSlotsFull) {
			return withCode(exitUsage, fmt.Errorf("%s: %w", image, err), "remove one first: xtsctl passphrase remove "+image)
		}
		if err != nil {
			return volumeError(image, err)
		}
		a.infof("added key slot %d to %s", n, image)
		return nil
	}
	if err := volume.ChangeSlot(f, hs, key, slot, newPass, kdf); err != nil {
		return volumeError(image, err)
	}
	a.infof("changed the passphrase of key slot %d of %s", slot, image)
	return nil
}

// openExclusive opens image read-write for a header rewrite, locked as a
// read-write volume.Open locks it: a volume that is open (by an xtsctl
// server, the dm backend or another command) is refused rather than having
// its header rewritten underneath, and two rewrites never interleave.
func openExclusive(image string) (*os.File, error) {
	f, err := volume.LockImage(image, false, 0)
	switch {
	case errors.Is(err, volume.ErrInUse):
		return nil, withCode(exitDevice, fmt.Errorf("%s is in use by another process (open, or being changed by another xtsctl command)", image),
			"xtsctl status lists open volumes; close it first")
	case err != nil:
		return nil, withCode(exitInput, fmt.Errorf("cannot open %s for writing: %w", image, err))
	}
	return f, nil
}
