package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"github.com/xtsctl/xtsctl/disk"
	"github.com/xtsctl/xtsctl/internal/safefile"
)

func init() { registerCommand(newHeaderCmd) }

func newHeaderCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "header backup|restore IMAGE FILE",
		Short: "Back up or restore a header with its passphrases (volume or LUKS keyslots)",
		Long: `Save the header of IMAGE with its passphrases (volume or LUKS keyslots) to
FILE, as cryptsetup luksHeaderBackup does, or write a saved header back to
both of IMAGE's header copies.

A backup holds the master key wrapped by every passphrase the image had
when it was taken: with it, such a passphrase decrypts the image even after
it was removed or changed. Keep it as safe as the image.`,
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

type headerFlags struct {
	img   imageFlags
	force bool
}

func newHeaderBackupCmd(a *app) *cobra.Command {
	var f headerFlags
	cmd := &cobra.Command{
		Use:   "backup IMAGE FILE",
		Short: "Save an image's header to a file",
		Long: `Save the header in use of IMAGE (an xtsctl volume, or a LUKS image as
cryptsetup luksHeaderBackup saves it), with its key slots, to FILE (mode
0600). FILE appears only when complete.`,
		Example: "  xtsctl header backup disk.vol disk.header",
		Args:    argsNamed("IMAGE", "FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return headerBackup(a, &f, args[0], args[1])
		},
	}
	cmd.Flags().BoolVarP(&f.force, "force", "f", false, "overwrite FILE if it exists")
	f.img.register(a, cmd, imgType|imgHeader)
	return cmd
}

func newHeaderRestoreCmd(a *app) *cobra.Command {
	var f headerFlags
	cmd := &cobra.Command{
		Use:   "restore IMAGE FILE",
		Short: "Write a saved header back to an image",
		Long: `Write the header saved in FILE to both header copies of IMAGE (an xtsctl
volume, or a LUKS2 image): the passphrases become those the backup has.
The copies are written one at a time, each synced, so a crash leaves IMAGE
opening with its old header or the restored one.

Restoring brings back passphrases removed or changed since the backup and
drops ones added since: when it would, xtsctl says which and asks you to
type yes (on the terminal); --batch-mode goes on without asking.

The backup must come from the same image (same UUID) and fit it.
--force restores it all the same, also onto an image that holds no
readable header at all.`,
		Example: "  xtsctl header restore disk.vol disk.header",
		Args:    argsNamed("IMAGE", "FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return headerRestore(a, &f, args[0], args[1])
		},
	}
	f.img.register(a, cmd, imgType|imgHeader)
	cmd.Flags().BoolVarP(&f.force, "force", "f", false, "restore even if the backup is of another image, or IMAGE has no readable header")
	return cmd
}

func headerBackup(a *app, f *headerFlags, image, file string) error {
	o, err := openImageFor(a, &f.img, image, disk.Inspect, defaultType, false)
	if err != nil {
		return err
	}
	defer o.Close()
	hb, ok := o.hdr.(disk.HeaderBackuper)
	if !ok {
		return withCode(exitInput, fmt.Errorf("%s is %s: it has no header to back up", image, o.format.Info().Title))
	}
	headerWarnings(a, o)
	out, err := o.output(a, file, f.force)
	if err != nil {
		return err
	}
	what, warning, err := hb.Backup(out)
	if err != nil {
		out.Abort()
		return err
	}
	if err := out.Commit(); err != nil {
		return withCode(exitOutput, err)
	}
	a.infof("saved %s to %s", what, file)
	a.warningf("%s %s", file, warning)
	return nil
}

func headerRestore(a *app, f *headerFlags, image, file string) error {
	if _, err := safefile.CheckPath(file, "header backup"); err != nil {
		return withCode(exitInput, err)
	}
	b, err := os.Open(file)
	if err != nil {
		return withCode(exitInput, fmt.Errorf("cannot read header backup: %w", err))
	}
	defer b.Close()
	size, err := b.Seek(0, io.SeekEnd)
	if err != nil {
		return withCode(exitInput, fmt.Errorf("cannot read header backup %s: %w", file, err))
	}
	if err := f.img.checkType(); err != nil {
		return err
	}
	r, err := disk.PickRestorer(f.img.typ, image, b, size, defaultType)
	if err != nil {
		return err
	}
	img, err := disk.OpenImage(image, disk.ImageOptions{Access: disk.WriteHeader, HeaderPath: f.img.header})
	if err != nil {
		return err
	}
	defer img.Close()
	what, err := r.Restore(img, b, size, disk.RestoreOptions{BackupName: file, Force: f.force,
		Confirm: func(question string) error { return confirm(a, question) }})
	if err != nil {
		return err
	}
	a.infof("restored %s to both header copies", what)
	return nil
}
