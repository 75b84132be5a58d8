package main

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/xtsctl/xtsctl/blockdev"
)

func init() { registerCommand(newStatusCmd) }

func newStatusCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status [NAME|DEVICE|MOUNTPOINT]",
		Short: "List open volumes, their devices, mountpoints and I/O counters",
		Long: `Show each open volume (or only NAME): image, device, mountpoint, backend,
and the I/O counters of its server: requests and bytes read and written,
syncs, I/O errors, and integrity errors with the sectors that failed.
Volumes served by the dm backend have no server and no counters: status
shows their loop device and the device-mapper table the kernel holds, with
the key masked as zeros (as dmsetup table shows it).

A volume whose server died, or whose device-mapper device was removed
without xtsctl, is shown as "dead"; 'xtsctl close NAME' or the next open
cleans it up.`,
		Example: `  xtsctl status
  xtsctl status --json secret`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return status(a, args, asJSON)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON (one object per volume, in an array)")
	return cmd
}

func status(a *app, args []string, asJSON bool) error {
	var out []blockdev.Status
	if len(args) == 1 {
		name, err := blockdev.NameOf(args[0])
		if err != nil {
			return err
		}
		st, err := blockdev.StatusOf(name, a.blockdevOptions())
		if errors.Is(err, blockdev.ErrNotOpen) {
			return withCode(exitUsage, fmt.Errorf("%s is not open", args[0]), "'xtsctl status' lists open volumes")
		}
		if err != nil {
			return err
		}
		out = append(out, st)
	} else {
		var err error
		if out, err = blockdev.List(a.blockdevOptions()); err != nil {
			return err
		}
	}
	if asJSON {
		b, err := json.MarshalIndent(blockdev.NewStatusDoc(out), "", "  ")
		if err != nil {
			return err
		}
		a.resultf("%s", b)
		return nil
	}
	if len(out) == 0 {
		a.infof("no volumes are open")
		return nil
	}
	for i, vs := range out {
		if i > 0 {
			a.resultf("")
		}
		for _, l := range vs.Lines() {
			a.resultf("%s", l)
		}
	}
	return nil
}
