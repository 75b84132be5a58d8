package main

import (
	"github.com/spf13/cobra"
	"github.com/xtsctl/xtsctl/blockdev"
)

func init() { registerCommand(newCloseCmd) }

func newCloseCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "close NAME",
		Short: "Unmount, detach and stop serving an open volume",
		Long: `Close the volume opened as NAME: unmount the filesystem that open mounted,
detach the device, flush everything to the image, mark it clean and stop
its server (fuse backend) or remove /dev/mapper/NAME, which frees its loop
device (dm backend). If the filesystem or the device is busy, nothing is
changed and close fails.

A volume whose server died (killed, crashed) is cleaned up too: its mount,
loop device and FUSE mount are removed, with a warning; the next open of
the image recovers what the crash left. So is a dm volume whose device was
removed without xtsctl.`,
		Example: `  xtsctl close secret`,
		Args:    argsNamed("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return closeVolume(a, args[0])
		},
	}
}

func closeVolume(a *app, name string) error {
	st, err := blockdev.Close(a.ctx, name, a.blockdevOptions())
	if err != nil {
		return fromBlockdev(err)
	}
	if st != nil && st.Device != "" {
		a.infof("closed %s (%s)", name, st.Device)
	}
	return nil
}
