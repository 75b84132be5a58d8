package main

import (
	"errors"
	"fmt"
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

// openForHeader opens image to rewrite its header (volume.OpenForHeader).
// A nil file comes with the error to return; with a file, err is
// ReadHeaders' and the caller closes the file.
func openForHeader(image string) (*os.File, int64, *volume.Headers, error) {
	in, err := openInput(image)
	if err != nil {
		return nil, 0, nil, err
	}
	in.Close()
	f, size, hs, err := volume.OpenForHeader(image)
	if f == nil {
		return nil, 0, nil, lockError(image, err)
	}
	return f, size, hs, err
}

func changeSlots(a *app, image string, sf *slotFlags, op string) error {
	f, _, hs, err := openForHeader(image)
	if f == nil {
		return err
	}
	defer f.Close()
	if err != nil {
		return volumeError(image, err)
	}
	warnAll(a, image, hs.Warnings)
	target := a.keySlot
	c := volume.SlotChange{
		Op:        map[string]volume.SlotOp{"add": volume.OpAddSlot, "change": volume.OpChangeSlot, "remove": volume.OpRemoveSlot}[op],
		Slot:      target,
		AllowLast: sf.force,
		Unlock:    a.unlockOptions(image),
	}
	prompt := map[string]string{
		"add":    "an existing passphrase for " + image,
		"change": "the passphrase to change of " + image,
		"remove": "the passphrase to remove from " + image,
	}[op]
	if op == "remove" && target >= 0 {
		prompt = fmt.Sprintf("a passphrase of %s (any slot) to authorise removing key slot %d", image, target)
	}
	c.Passphrase = func() ([]byte, error) {
		return readPassphrase(a, passphraseRequest{file: sf.passFile, flag: "passphrase-file", prompt: prompt})
	}
	c.New = func() ([]byte, volume.KDFParams, error) {
		newPass, err := readPassphrase(a, passphraseRequest{file: sf.newPassFile, flag: "new-passphrase-file",
			prompt: "the new passphrase for " + image, confirm: true})
		if err != nil {
			return nil, volume.KDFParams{}, err
		}
		kdf, err := sf.kdf.params(a)
		return newPass, kdf, err
	}
	slot, err := volume.ChangeSlots(f, hs, c)
	var se *volume.SlotStateError
	switch {
	case errors.As(err, &se) && se.InUse:
		return usageError(fmt.Errorf("key slot %d of %s is in use", se.Slot, image), "choose a free one: xtsctl info "+image)
	case errors.As(err, &se):
		return usageError(fmt.Errorf("key slot %d of %s is empty", se.Slot, image), "xtsctl info "+image+" lists the slots in use")
	case errors.Is(err, volume.ErrLastSlot):
		return usageError(fmt.Errorf("key slot %d holds the last passphrase of %s: without it the volume cannot be opened", slot, image),
			"add another passphrase first (xtsctl passphrase add), or use --force")
	case errors.Is(err, volume.ErrSlotsFull):
		return withCode(exitUsage, fmt.Errorf("%s: %w", image, err), "remove one first: xtsctl passphrase remove "+image)
	case err != nil:
		return volumeError(image, err)
	}
	switch op {
	case "add":
		a.infof("added key slot %d to %s", slot, image)
	case "remove":
		a.infof("removed key slot %d from %s", slot, image)
	default:
		a.infof("changed the passphrase of key slot %d of %s", slot, image)
	}
	return nil
}

// openExclusive opens image read-write for a header rewrite, locked as a
// read-write volume.Open locks it (volume.LockImage).
func openExclusive(image string) (*os.File, error) {
	f, err := volume.LockImage(image, false, 0)
	if err != nil {
		return nil, lockError(image, err)
	}
	return f, nil
}

// lockError explains why image could not be opened and locked to rewrite
// its header.
func lockError(image string, err error) error {
	if errors.Is(err, volume.ErrInUse) {
		return withCode(exitDevice, fmt.Errorf("%s is in use by another process (open, or being changed by another xtsctl command)", image),
			"xtsctl status lists open volumes; close it first")
	}
	return withCode(exitInput, fmt.Errorf("cannot open %s for writing: %w", image, err))
}
