package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/xtsctl/xtsctl/plain"
	"github.com/xtsctl/xtsctl/sector"
)

// plainFlags are the options of cryptsetup's plain mode that xtsctl
// supports, with cryptsetup's names and units.
type plainFlags struct {
	keyFile      string
	sectorSize   int
	largeSectors bool
	offset       uint64
	skip         uint64
	fs           *pflag.FlagSet // to tell a given --sector-size from the default
}

// plainOnly lists the flags that make sense only with --type plain.
var plainOnly = []string{"key-file", "iv-large-sectors", "offset", "skip"}

// plainSectorSize is a plain image's sector size unless --sector-size is
// given: cryptsetup's default.
const plainSectorSize = 512

// params validates the flags and returns the plain-mode layout.
func (pf *plainFlags) params() (plain.Mapping, error) {
	if pf.keyFile == "" {
		return plain.Mapping{}, usageError(fmt.Errorf("--type plain needs --key-file"), "make a key with: head -c 64 /dev/urandom > KEYFILE; chmod 600 KEYFILE")
	}
	size := pf.sectorSize
	if !pf.fs.Changed("sector-size") {
		size = plainSectorSize
	}
	p := plain.Mapping{
		Sector: sector.Params{Size: size, IVOffset: pf.skip},
		Offset: pf.offset,
	}
	if pf.largeSectors {
		p.Sector.IVMode = sector.Plain64LargeSectors
	}
	if err := p.Check(); err != nil {
		return plain.Mapping{}, usageError(err)
	}
	return p, nil
}

// rejectFlags fails if any of names was given on the command line; used to
// refuse options that the chosen --type ignores instead of ignoring them.
func rejectFlags(cmd *cobra.Command, typ string, names []string) error {
	for _, n := range names {
		if cmd.Flags().Changed(n) {
			return usageError(fmt.Errorf("--%s does not apply to --type %s", n, typ), rejectHints[typ+" "+n]...)
		}
	}
	return nil
}

// rejectHints say what a flag of the other type is called here.
var rejectHints = map[string][]string{
	"volume key-file":       {"a volume is unlocked with a passphrase: --passphrase-file FILE, or the terminal (a plain image's key file is its key)"},
	"plain passphrase-file": {"a plain image takes its raw key: --key-file FILE (32 or 64 bytes)"},
}

func roundUp(n, m int64) int64 { return (n + m - 1) / m * m }
