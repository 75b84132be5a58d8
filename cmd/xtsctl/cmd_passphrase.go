package main

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/xtsctl/xtsctl/disk"
	"github.com/xtsctl/xtsctl/internal/keyfile"
)

func init() { registerCommand(newPassphraseCmd) }

func newPassphraseCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "passphrase add|remove|change IMAGE",
		Short: "Add, remove or change passphrases (volume or LUKS keyslots)",
		Long: `Manage the passphrases of IMAGE (volume or LUKS keyslots): the key slots
of an xtsctl volume (up to 8) or the keyslots of a LUKS2 image (up to 32),
as cryptsetup luksAddKey, luksRemoveKey, luksKillSlot and luksChangeKey do.

Each change rewrites both header copies, one at a time, each synced: if
xtsctl is killed or the machine stops at any moment, the image still opens
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
	img                     imageFlags
	newPassFile, newKeyFile string
	kdf                     kdfFlags
	force                   bool
}

func (f *slotFlags) register(a *app, cmd *cobra.Command, newPass bool) {
	f.img.register(a, cmd, imgType|imgHeader|imgKeyFile|imgPassFile|imgUnlock)
	fs := cmd.Flags()
	fs.Lookup("passphrase-file").Usage = "read the existing passphrase from `FILE` instead of the terminal"
	if newPass {
		fs.StringVar(&f.newPassFile, "new-passphrase-file", "", "read the new passphrase from `FILE` instead of the terminal")
		fs.StringVar(&f.newKeyFile, "new-key-file", "", "LUKS: the new passphrase is the whole of `FILE` (no newline removed)")
		f.kdf.register(fs)
	}
}

func newPassphraseAddCmd(a *app) *cobra.Command {
	var f slotFlags
	cmd := &cobra.Command{
		Use:   "add IMAGE",
		Short: "Add a passphrase in a free key slot",
		Long: `Add a passphrase to IMAGE (an xtsctl volume, or a LUKS2 image's keyslots),
in the first free key slot (or in slot N with --key-slot N). An existing
passphrase unlocks the key, which the new passphrase then wraps too.`,
		Example: "  xtsctl passphrase add disk.vol\n  xtsctl passphrase add --key-slot 7 disk.vol",
		Args:    argsNamed("IMAGE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return changeSlots(a, args[0], &f, disk.AddSlot)
		},
	}
	f.register(a, cmd, true)
	cmd.Flags().Lookup("key-slot").Usage = "put the new passphrase in key slot `N` (0-7; LUKS2: 0-31), which must be free"
	return cmd
}

func newPassphraseRemoveCmd(a *app) *cobra.Command {
	var f slotFlags
	cmd := &cobra.Command{
		Use:   "remove IMAGE",
		Short: "Remove a passphrase",
		Long: `Remove the passphrase given (its key slot is erased) from IMAGE (an xtsctl
volume, or a LUKS2 image's keyslots); or, with --key-slot N, remove key
slot N, authorised by any passphrase of the image (as cryptsetup
luksKillSlot). Removing the last passphrase makes the image impossible to
open (short of a header backup): it needs --force.

A header backup taken before still holds the removed passphrase's key slot.`,
		Example: "  xtsctl passphrase remove disk.vol\n  xtsctl passphrase remove --key-slot 3 disk.vol  # any passphrase authorises",
		Args:    argsNamed("IMAGE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return changeSlots(a, args[0], &f, disk.RemoveSlot)
		},
	}
	f.register(a, cmd, false)
	cmd.Flags().BoolVarP(&f.force, "force", "f", false, "remove the last passphrase too")
	cmd.Flags().Lookup("key-slot").Usage = "remove key slot `N` (0-7; LUKS2: 0-31), whichever passphrase of the image is given"
	return cmd
}

func newPassphraseChangeCmd(a *app) *cobra.Command {
	var f slotFlags
	cmd := &cobra.Command{
		Use:   "change IMAGE",
		Short: "Change a passphrase",
		Long: `Replace a passphrase of IMAGE (an xtsctl volume, or a LUKS2 image's
keyslots) with a new one, in the same key slot. With --key-slot N, the
passphrase given must be slot N's.`,
		Example: "  xtsctl passphrase change disk.vol",
		Args:    argsNamed("IMAGE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return changeSlots(a, args[0], &f, disk.ChangeSlot)
		},
	}
	f.register(a, cmd, true)
	return cmd
}

// changeSlots adds, changes or removes a key slot of image, for every
// format with key slots (disk.KeySlots).
func changeSlots(a *app, image string, f *slotFlags, op disk.SlotOp) error {
	o, err := openImageFor(a, &f.img, image, disk.WriteHeader, defaultType, false)
	if err != nil {
		return err
	}
	defer o.Close()
	ks, ok := o.hdr.(disk.KeySlots)
	if !ok {
		return withCode(exitInput, fmt.Errorf("%s is %s: it has no passphrases to manage", image, o.format.Info().Title))
	}
	headerWarnings(a, o)
	noun := cmp.Or(o.format.Info().SlotNoun, "key slot")
	name := image
	if o.img.HeaderFile != nil {
		name = o.img.HeaderPath
	}
	prompt := map[disk.SlotOp]string{
		disk.AddSlot:    "an existing passphrase for " + image,
		disk.ChangeSlot: "the passphrase to change of " + image,
		disk.RemoveSlot: "the passphrase to remove from " + image,
	}[op]
	if op == disk.RemoveSlot && a.keySlot >= 0 {
		prompt = fmt.Sprintf("a passphrase of %s (any %s) to authorise removing %s %d", image, strings.TrimPrefix(noun, "key "), noun, a.keySlot)
	}
	if len(f.img.keyFiles) > 0 && f.img.passFile != "" {
		return usageError(errors.New("--key-file and --passphrase-file do not go together"),
			"--key-file takes the whole file as the passphrase, --passphrase-file drops one trailing newline")
	}
	var kdf disk.NewKDF
	if op != disk.RemoveSlot {
		if kdf, err = f.kdf.newKDF(a, o.name()); err != nil {
			return err
		}
	}
	readNew := func() (*disk.Secret, error) {
		if f.newKeyFile != "" {
			k, err := readKeyFile(a, o.format.Info(), f.newKeyFile, keyfile.Window{})
			return &disk.Secret{KeyFiles: [][]byte{k}}, err
		}
		p, err := readPassphrase(a, passphraseRequest{file: f.newPassFile, flag: "new-passphrase-file", prompt: "the new passphrase for " + image, confirm: true})
		return &disk.Secret{Passphrase: p}, err
	}
	// A new passphrase in a file is read first: a missing or empty file
	// is refused before the existing passphrase is asked for and its key
	// derivation run. One typed at the terminal is asked for after the
	// existing one, as cryptsetup asks.
	var fromFile *disk.Secret
	if op != disk.RemoveSlot && (f.newKeyFile != "" || f.newPassFile != "") {
		if fromFile, err = readNew(); err != nil {
			return err
		}
		defer fromFile.Wipe()
	}
	// A wrong existing passphrase typed at the terminal is asked for
	// again (--tries), as unlocking asks: ChangeSlots is run again, which
	// changes nothing before the unlock.
	need := &disk.Need{Passphrase: disk.WantRequired, Prompt: prompt, KeyFile: disk.WantOptional}
	retry := asksTerminal(&f.img, o, need)
	notice, askedNew := "", false
	c := disk.SlotChange{
		Op: op, Slot: a.keySlot, AllowLast: f.force, AllowExpensiveKDF: a.allowExpensiveKDF, KDF: kdf,
		Progress: func(format string, args ...any) { a.infof(format, args...) },
		Secret: func() (*disk.Secret, error) {
			sec, err := readKeyFiles(a, &f.img, o)
			if err == nil {
				err = readPassphraseFor(a, &f.img, o, need, sec, notice)
			}
			if err != nil {
				sec.Wipe()
				return nil, err
			}
			return sec, nil
		},
		New: func() (*disk.Secret, error) {
			askedNew = true
			if fromFile != nil {
				// A copy: the caller may wipe what it gets.
				s := &disk.Secret{Passphrase: bytes.Clone(fromFile.Passphrase)}
				for _, k := range fromFile.KeyFiles {
					s.KeyFiles = append(s.KeyFiles, bytes.Clone(k))
				}
				return s, nil
			}
			return readNew()
		},
	}
	var res *disk.SlotResult
	for try := 1; ; try++ {
		res, err = ks.ChangeSlots(a.ctx, c)
		if err != nil && retry && !askedNew && try < a.tries && errors.Is(err, disk.ErrWrongSecret) && a.ctx.Err() == nil {
			notice = retryNotice(a, err, try+1)
			continue
		}
		break
	}
	if err != nil {
		return err
	}
	detail := ""
	if res.Detail != "" {
		detail = " (" + res.Detail + ")"
	}
	switch op {
	case disk.AddSlot:
		a.infof("added %s %d to %s%s", noun, res.Slot, name, detail)
	case disk.RemoveSlot:
		a.infof("removed %s %d from %s%s", noun, res.Slot, name, detail)
	default:
		a.infof("changed the passphrase of %s %d of %s%s", noun, res.Slot, name, detail)
	}
	return nil
}
