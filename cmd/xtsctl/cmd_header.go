package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/xtsctl/xtsctl/volume"
)

func init() { registerCommand(newHeaderCmd) }

func newHeaderCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "header backup|restore IMAGE FILE",
		Short: "Back up or restore a volume's header and key slots",
		Long: `Save the header of the xtsctl volume IMAGE (with its key slots) to FILE, or
write a saved header back to both of IMAGE's header copies.

A backup holds the master key wrapped by every passphrase the volume had
when it was taken: with it, such a passphrase decrypts the volume even after
it was removed or changed. Keep it as safe as the volume.`,
		Example: `  xtsctl header backup disk.vol disk.header
  xtsctl header restore disk.vol disk.header`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return usageError(errors.New("header: missing subcommand backup or restore"),
				"usage: xtsctl header backup|restore IMAGE FILE")
		},
	}
	cmd.AddCommand(newHeaderBackupCmd(a), newHeaderRestoreCmd(a))
	return cmd
}

func newHeaderBackupCmd(a *app) *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "backup IMAGE FILE",
		Short: "Save a volume's header to a file",
		Long: `Save the header in use of the xtsctl volume IMAGE, with its key slots, to
FILE (8192 bytes, mode 0600). FILE appears only when complete.`,
		Example: "  xtsctl header backup disk.vol disk.header",
		Args:    argsNamed("IMAGE", "FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if wantsLUKS(cmd, args[0]) {
				return luksHeaderBackup(a, cmd, args[0], args[1], force)
			}
			return headerBackup(a, args[0], args[1], force)
		},
	}
	cmd.Flags().BoolVarP(&force, "force", "f", false, "overwrite FILE if it exists")
	addLUKSFlags(cmd, luksHeaderFlag)
	return cmd
}

func newHeaderRestoreCmd(a *app) *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "restore IMAGE FILE",
		Short: "Write a saved header back to a volume",
		Long: `Write the header saved in FILE to both header copies of the xtsctl volume
IMAGE: the passphrases become those the backup has. The copies are written
one at a time, each synced, so a crash leaves IMAGE opening with its old
header or the restored one.

Restoring brings back passphrases removed or changed since the backup and
drops ones added since: when it would, xtsctl says which and asks you to
type yes (on the terminal); --batch-mode goes on without asking.

The backup must come from the same volume (same UUID) and fit the image.
--force restores it all the same, also onto an image that holds no
readable volume header at all.`,
		Example: "  xtsctl header restore disk.vol disk.header",
		Args:    argsNamed("IMAGE", "FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if wantsLUKS(cmd, args[0]) || isLUKSBackup(args[1]) {
				return luksHeaderRestore(a, cmd, args[0], args[1], force)
			}
			return headerRestore(a, args[0], args[1], force)
		},
	}
	addLUKSFlags(cmd, luksHeaderFlag)
	cmd.Flags().BoolVarP(&force, "force", "f", false, "restore even if the backup is of another volume, or IMAGE has no readable header")
	return cmd
}

func headerBackup(a *app, image, file string, force bool) error {
	in, err := openInput(image)
	if err != nil {
		return err
	}
	defer in.Close()
	hs, err := volume.ReadHeaders(in, in.Size)
	var te *volume.TruncatedError
	if errors.As(err, &te) {
		a.warningf("%s: %v", image, err) // the header itself is fine
	} else if err != nil {
		return volumeError(image, err)
	}
	warnAll(a, image, hs.Warnings)
	b, err := hs.Backup()
	if err != nil {
		return volumeError(image, err)
	}
	out, err := createOutput(file, in, force)
	if err != nil {
		return err
	}
	if _, err := out.Write(b); err != nil {
		out.Abort()
		return withCode(exitOutput, fmt.Errorf("cannot write %s: %w", file, err))
	}
	if err := out.Commit(); err != nil {
		return withCode(exitOutput, err)
	}
	a.infof("saved the header of %s (UUID %s, generation %d, key slots %s) to %s",
		image, hs.Header.UUIDString(), hs.Header.Generation, intList(hs.Header.ActiveSlots()), file)
	a.warningf("%s holds the wrapped master key: keep it as safe as the volume", file)
	return nil
}

func headerRestore(a *app, image, file string, force bool) error {
	backup, err := volume.ReadBackup(file)
	if err != nil {
		return withCode(exitInput, err)
	}
	if _, err := volume.ParseHeader(backup); err != nil {
		return withCode(exitInput, fmt.Errorf("%s is not a valid header backup: %w", file, err))
	}
	f, size, current, err := openForHeader(image)
	if f == nil {
		return err
	}
	defer f.Close()
	var (
		hd *volume.HeadersDamagedError
		te *volume.TruncatedError
	)
	switch {
	case err == nil, errors.As(err, &te):
		warnAll(a, image, current.Warnings)
	case errors.As(err, &hd):
		current = nil // the case restore is for
	case errors.Is(err, volume.ErrNotVolume):
		if !force {
			return withCode(exitInput, fmt.Errorf("%s holds no xtsctl volume header: restoring would overwrite its first and last 8 KiB", image),
				"if IMAGE is the volume this backup belongs to, use --force")
		}
		current = nil
	default:
		return volumeError(image, err)
	}
	if current != nil {
		if change := describeRollback(volume.SlotRollback(current.Header, backup)); change != "" {
			if err := confirm(a, fmt.Sprintf("restoring %s onto %s %s", file, image, change)); err != nil {
				return err
			}
		}
	}
	h, err := volume.Restore(f, size, current, backup, force)
	if err != nil {
		return volumeError(image, err)
	}
	a.infof("restored the header of %s from %s (UUID %s, key slots %s) to both header copies", image, file, h.UUIDString(), intList(h.ActiveSlots()))
	return nil
}

// describeRollback names the key slots a header restore brings back and
// those it removes; "" if none.
func describeRollback(back, gone []int) string {
	var parts []string
	if len(back) > 0 {
		parts = append(parts, fmt.Sprintf("brings back the %s as they were (removed or changed since the backup)", slotsNoun(back)))
	}
	if len(gone) > 0 {
		parts = append(parts, fmt.Sprintf("removes the %s (added since)", slotsNoun(gone)))
	}
	return strings.Join(parts, " and ")
}

// slotsNoun names the passphrases of some key slots: "passphrase of key
// slot 0", "passphrases of key slots 1, 3".
func slotsNoun(slots []int) string {
	if len(slots) == 1 {
		return fmt.Sprintf("passphrase of key slot %d", slots[0])
	}
	return "passphrases of key slots " + intList(slots)
}
