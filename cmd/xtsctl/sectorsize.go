package main

import (
	"fmt"
	"io"

	"github.com/spf13/pflag"
	"github.com/xtsctl/xtsctl/disk"
	"github.com/xtsctl/xtsctl/internal/fsblock"
)

// The sector size of data that will be served as a device follows the
// filesystem in it: a device whose sectors are larger than the
// filesystem's smallest I/O cannot mount it (docs/CLI.md). It is chosen
// here only, for every new image whatever its format: encrypt IN OUT of
// each format that writes images and the in-place encryption of a volume
// through planFitted (createImage, startVolumeEncryption), and a plain
// in-place encryption, which has no format's plan, through fitSectorSize.

// fitSectorSize is the sector size of an encrypted device that will
// serve data (the plaintext of image: r, size bytes): --sector-size if
// given, refused if the filesystem in the data could not be mounted from
// sectors that large; otherwise def, lowered to the largest size that
// filesystem allows, saying so (fsblock.ChooseSectorSize).
func fitSectorSize(a *app, flags *pflag.FlagSet, image string, r io.ReaderAt, size int64, def int) (int, error) {
	explicit := 0
	if flags.Changed("sector-size") {
		explicit, _ = flags.GetInt("sector-size")
	}
	fs, err := fsblock.Probe(r, size)
	if err != nil {
		return 0, withCode(exitInput, fmt.Errorf("%s: %w", image, err))
	}
	ss, lowered, err := fsblock.ChooseSectorSize(fs, explicit, def)
	if err != nil {
		return 0, usageError(fmt.Errorf("--sector-size %d is too large for %s: %w", explicit, image, err),
			fmt.Sprintf("give --sector-size %d, or leave it out (xtsctl then picks the largest the filesystem allows)", fs.IOSize))
	}
	if lowered {
		a.infof("%s holds %s: using %d-byte sectors (a device with %d-byte sectors could not mount it)", image, fs, ss, def)
	}
	return ss, nil
}

// planFitted is creator.PlanCreate with the new image's sector size
// fitted to the filesystem in its plaintext r (size bytes; nil where
// there is none to look at: format's zeros, a stream): the options are
// checked first, then the format's sector size (the default, or
// --sector-size) goes through fitSectorSize, and the plan is made again
// if that lowered it.
func planFitted(a *app, flags *pflag.FlagSet, creator disk.Creator, o *disk.CreateOptions, image string, r io.ReaderAt, size int64) (*disk.CreatePlan, error) {
	plan, err := creator.PlanCreate(o)
	if err != nil || r == nil {
		return plan, err
	}
	ss, err := fitSectorSize(a, flags, image, r, size, plan.SectorSize)
	if err != nil || ss == plan.SectorSize {
		return plan, err
	}
	o.SectorSize = ss
	if plan, err = creator.PlanCreate(o); err == nil && plan.SectorSize != ss {
		// Only a default above 512 is lowered, and the formats with one
		// take CreateOptions.SectorSize.
		return nil, fmt.Errorf("%s: the %s format did not take %d-byte sectors", image, o.TypeName, ss)
	}
	return plan, err
}
