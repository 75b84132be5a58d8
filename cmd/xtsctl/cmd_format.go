package main

import (
	"github.com/spf13/cobra"
	"github.com/xtsctl/xtsctl/volume"
)

func init() { registerCommand(newFormatCmd) }

func newFormatCmd(a *app) *cobra.Command {
	var (
		f   imageFlags
		cf  createFlags
		job createJob
	)
	cmd := &cobra.Command{
		Use:   "format IMAGE --size SIZE",
		Short: "Create an empty encrypted image",
		Long: `Create the encrypted image IMAGE holding SIZE bytes of data, all zeros:
an xtsctl volume by default, a LUKS2 image with --type luks2.

SIZE is the usable size (what the filesystem sees), e.g. 1G or 512M; a
volume's image is about 1 MiB larger (header copies, state area) plus the
tags (32 bytes per 4096-byte sector by default), a LUKS2 image 16 MiB
larger (cryptsetup's layout). Every sector is written, with its tag, so
a volume verifies from the start. The passphrase is asked twice on the
terminal, or read from --passphrase-file (LUKS2: or the whole of
--key-file).

IMAGE is written as an unnamed file in its directory, synced, then linked
in, so it appears only when complete and a killed run leaves nothing.
format prints the image's UUID.`,
		Example: `  xtsctl format disk.vol --size 1G
  xtsctl format disk.vol --size 64M --sector-size 512 --integrity none --passphrase-file pass.txt
  xtsctl format --type luks2 disk.luks --size 1G`,
		Args: argsNamed("IMAGE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			job.out = args[0]
			return createImage(a, &f, &cf, job)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&job.size, "size", "", "usable size of the image, e.g. 1G, 512M (required)")
	fs.Int("sector-size", volume.DefaultSectorSize, "sector (XTS data unit and tag) size: 512, 1024, 2048 or 4096")
	fs.BoolVarP(&job.force, "force", "f", false, "overwrite IMAGE if it exists")
	f.register(a, cmd, imgType|imgKeyFile|imgPassFile)
	fs.Lookup("type").Usage = "the new image's format: volume or luks2"
	fs.Lookup("passphrase-file").Usage = "read the new passphrase from `FILE` (one trailing newline is removed) instead of the terminal"
	cf.register(fs)
	registerKeyWindow(a, fs)
	registerProgressFlag(a, fs)
	job.digest = true
	_ = cmd.MarkFlagRequired("size")
	return cmd
}
