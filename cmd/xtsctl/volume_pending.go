package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// The volume format is issue 5; until it lands, --type volume says so.

var errNoVolumeFormat = errors.New("the xtsctl volume format is not implemented in this build; use --type plain")

func encryptVolume(*app, *cobra.Command, string, string, bool) error {
	return usageError(errNoVolumeFormat)
}

func decryptVolume(*app, *cobra.Command, string, string, bool) error {
	return usageError(errNoVolumeFormat)
}
