package main

import (
	"io"

	"github.com/spf13/pflag"
	"github.com/xtsctl/xtsctl/disk"
)

// The sector size of data that will be served as a device follows the
// filesystem in it (disk.FitSectorSize, docs/CLI.md), for every new image
// whatever its format: encrypt IN OUT through planFitted, and in place
// through the job, which calls fitSectorSize (disk.InPlaceOptions).

// fitSectorSize is disk.FitSectorSize with --sector-size, if given, as
// the size asked for.
func fitSectorSize(a *app, flags *pflag.FlagSet, image string, r io.ReaderAt, size int64, def int) (int, error) {
	explicit := 0
	if flags.Changed("sector-size") {
		explicit, _ = flags.GetInt("sector-size")
	}
	return disk.FitSectorSize(image, r, size, explicit, def, a.infof)
}

// planFitted is disk.PlanFitted with the sector size fitted to the
// filesystem in the plaintext r (size bytes; nil where there is none to
// look at: format's zeros, a stream).
func planFitted(a *app, flags *pflag.FlagSet, creator disk.Creator, o *disk.CreateOptions, image string, r io.ReaderAt, size int64) (*disk.CreatePlan, error) {
	var fit func(int) (int, error)
	if r != nil {
		fit = func(def int) (int, error) { return fitSectorSize(a, flags, image, r, size, def) }
	}
	return disk.PlanFitted(creator, o, fit)
}
