package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
	"github.com/xtsctl/xtsctl/aesni"
)

func init() { registerCommand(newVersionCmd) }

func newVersionCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print the version, Go version and the AES-XTS kernel in use",
		Example: "  xtsctl version",
		Args:    argsNamed(),
		RunE: func(*cobra.Command, []string) error {
			a.resultf("xtsctl %s", versionString())
			return nil
		},
	}
}

func versionString() string {
	v := "(devel)"
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		v = bi.Main.Version
	}
	return fmt.Sprintf("%s (%s, %s/%s, xts kernel for 4096-byte sectors: %v)",
		v, runtime.Version(), runtime.GOOS, runtime.GOARCH, aesni.Pick(4096))
}
