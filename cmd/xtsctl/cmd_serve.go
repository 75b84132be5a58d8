package main

import (
	"github.com/spf13/cobra"
	"github.com/xtsctl/xtsctl/blockdev"
)

func init() { registerCommand(newServeCmd) }

// newServeCmd is the background server that open starts (re-executing
// this binary); it is not meant to be run by hand.
func newServeCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:    blockdev.ServeCommand,
		Short:  "Serve an opened volume (started by xtsctl open)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return blockdev.Serve()
		},
	}
}
