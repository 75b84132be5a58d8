package main

import (
	"github.com/spf13/cobra"
	"github.com/xtsctl/xtsctl/blockdev"
)

func init() { registerCommand(newCloseCmd) }

func newCloseCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "close NAME|DEVICE|MOUNTPOINT",
		Short: "Unmount, detach and stop serving an open volume",
		Long: `Close the volume opened as NAME: unmount the filesystem that open mounted,
detach the device, flush everything to the image, mark it clean and stop
its server (fuse backend) or remove /dev/mapper/NAME, which frees its loop
device (dm backend). If the filesystem or the device is busy, nothing is
changed and close fails.

A volume whose server died (killed, crashed) is cleaned up too: its mount,
loop device and FUSE mount are removed, with a warning; the next open of
the image recovers what the crash left. So is a dm volume whose device was
removed without xtsctl.

The image can also be named by its device (what open printed: /dev/loopN,
/dev/mapper/NAME, or /dev/xtsctl/NAME) or by the directory it is mounted
on; any other device or directory is refused.`,
		Example: `  xtsctl close secret
  xtsctl close /dev/xtsctl/secret
  xtsctl close /mnt`,
		Args: argsNamed("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return closeVolume(a, args[0])
		},
	}
}

func closeVolume(a *app, arg string) error {
	name, err := blockdev.NameOf(arg)
	if err != nil {
		return err
	}
	st, err := blockdev.Close(a.ctx, name, a.blockdevOptions())
	if err != nil {
		return err
	}
	if st != nil && st.Device != "" {
		a.infof("closed %s (%s)", name, st.Device)
	}
	return nil
}
