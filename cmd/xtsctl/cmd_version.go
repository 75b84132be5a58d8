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

// versionString is the module version of a released build, or the
// revision (and date) of the source a development build was made from.
func versionString() string {
	v := "(devel)"
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		} else {
			v = vcsVersion(bi.Settings)
		}
	}
	return fmt.Sprintf("%s (%s, %s/%s, xts kernel for 4096-byte sectors: %v)",
		v, runtime.Version(), runtime.GOOS, runtime.GOARCH, aesni.Pick(4096))
}

// vcsVersion describes the VCS revision the go command stamped into the
// binary (go build in a git checkout): devel-<12 hex digits>[+dirty]
// (<commit date>).
func vcsVersion(settings []debug.BuildSetting) string {
	var rev, when string
	dirty := false
	for _, s := range settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			when = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "(devel)"
	}
	v := "devel-" + rev[:min(12, len(rev))]
	if dirty {
		v += "+dirty"
	}
	if when != "" {
		v += " (" + when + ")"
	}
	return v
}
