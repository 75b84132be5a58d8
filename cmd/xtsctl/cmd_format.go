package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"github.com/xtsctl/xtsctl/internal/bytesize"
	"github.com/xtsctl/xtsctl/internal/safefile"
)

func init() { registerCommand(newFormatCmd) }

func newFormatCmd(a *app) *cobra.Command {
	var (
		size       string
		sectorSize int
		force      bool
		cf         createFlags
	)
	cmd := &cobra.Command{
		Use:   "format IMAGE --size SIZE",
		Short: "Create an empty xtsctl volume",
		Long: `Create the xtsctl volume IMAGE holding SIZE bytes of data, all zeros.

SIZE is the usable size (what the filesystem sees), e.g. 1G or 512M; the
image is about 1 MiB larger (header copies, state area) plus the tags
(32 bytes per 4096-byte sector by default). Every sector is written, with
its tag, so the whole volume verifies from the start. The passphrase is
asked twice on the terminal, or read from --passphrase-file.

IMAGE is written as an unnamed file in its directory, synced, then linked
in, so it appears only when complete and a killed run leaves nothing. format prints the volume's UUID.`,
		Example: `  xtsctl format disk.vol --size 1G
  xtsctl format disk.vol --size 64M --sector-size 512 --integrity none --passphrase-file pass.txt`,
		Args: argsNamed("IMAGE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if typ := flagString(cmd, "type"); typ != typeVolume {
				return luksFormatType(a, cmd, typ, args[0], size, force)
			}
			if err := notLUKS(cmd); err != nil {
				return err
			}
			return format(a, cmd, &cf, args[0], size, force)
		},
	}
	f := cmd.Flags()
	f.StringVar(&size, "size", "", "usable size of the volume, e.g. 1G, 512M (required)")
	f.IntVar(&sectorSize, "sector-size", defaultVolumeSectorSize, "sector (XTS data unit and tag) size: 512, 1024, 2048 or 4096")
	f.BoolVarP(&force, "force", "f", false, "overwrite IMAGE if it exists")
	cf.register(f)
	registerKeyWindow(a, f)
	addLUKSFlags(cmd, luksCreateFlags|luksKeyFileFlag)
	_ = cmd.MarkFlagRequired("size")
	return cmd
}

func format(a *app, cmd *cobra.Command, cf *createFlags, image, sizeArg string, force bool) error {
	size, err := bytesize.Parse(sizeArg)
	if err != nil {
		return usageError(fmt.Errorf("--size: %w", err))
	}
	ss, err := volumeSectorSize(cmd)
	if err != nil {
		return err
	}
	if size <= 0 || size%int64(ss) != 0 {
		return usageError(fmt.Errorf("--size %s is not a positive whole number of %d-byte sectors", sizeArg, ss))
	}
	opts, err := cf.options(cmd, ss)
	if err != nil {
		return err
	}
	out, err := createOutput(image, &safefile.Input{}, force)
	if err != nil {
		return err
	}
	if err := needFile(out); err != nil {
		return err
	}
	h, _, err := createVolume(a, cf, opts, out.File, zeros{}, size, image, "formatting")
	if err := finish(out, err); err != nil {
		return volumeError(image, err)
	}
	a.resultf("%s", h.UUIDString())
	a.infof("formatted %s: %s of data (image %s), %s", image, bytesize.Human(size), bytesize.Human(h.Size), volumeCipher(h))
	return nil
}

// zeros reads as zero bytes everywhere.
type zeros struct{}

func (zeros) ReadAt(p []byte, _ int64) (int, error) {
	clear(p)
	return len(p), nil
}
