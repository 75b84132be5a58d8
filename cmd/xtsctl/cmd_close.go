package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
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
	if err := checkName(name); err != nil {
		return err
	}
	unlock, err := lockRunDir()
	if err != nil {
		return err
	}
	defer unlock()
	e, err := readEntry(name)
	if errors.Is(err, errNotOpen) {
		return withCode(exitUsage, fmt.Errorf("%s is not open", name), "'xtsctl status' lists open volumes")
	}
	if err != nil {
		return withCode(exitDevice, err)
	}
	b := backendOf(e)
	if !b.alive(e) {
		return removeStale(a, e)
	}
	if e.state == nil {
		return withCode(exitDevice, fmt.Errorf("%s is still being opened (server pid %d)", name, e.pid))
	}
	if err := b.close(a, e.state); err != nil {
		return err
	}
	if err := os.RemoveAll(stateDir(name)); err != nil {
		return withCode(exitDevice, err)
	}
	a.infof("closed %s (%s)", name, e.state.Device)
	return nil
}
