package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"github.com/xtsctl/xtsctl/disk"
)

func init() { registerCommand(newVerifyCmd) }

func newVerifyCmd(a *app) *cobra.Command {
	var f imageFlags
	cmd := &cobra.Command{
		Use:   "verify IMAGE",
		Short: "Check a volume's headers, every sector tag and the end-to-end digest",
		Long: `Check the xtsctl volume IMAGE: both header copies and their key slots,
the tag of every sector, and the end-to-end digest of the plaintext (when
the volume has not been written since it was recorded).

The report goes to stdout, one line per finding; each sector whose tag does
not match is listed with its number and the byte offset of its data in
IMAGE. verify exits with 0 when everything checks out, and with 6 when
anything does not (a damaged header copy or key slot, a bad sector, a
digest mismatch). A volume that was not closed cleanly is reported as a
warning. verify needs the passphrase (the tag key comes from the master key)
and never writes to IMAGE. Formats without integrity tags (LUKS, plain,
...) have nothing to verify: info checks their headers, decrypt reads all
of their data.`,
		Example: `  xtsctl verify disk.vol
  xtsctl verify --passphrase-file pass.txt disk.vol`,
		Args: argsNamed("IMAGE"),
		RunE: func(cmd *cobra.Command, args []string) error { return verify(a, &f, args[0]) },
	}
	f.register(a, cmd, imgPassFile|imgUnlock)
	registerProgressFlag(a, cmd.Flags())
	return cmd
}

func verify(a *app, f *imageFlags, image string) error {
	in, err := openInput(image) // names a missing or unusable IMAGE
	if err != nil {
		return err
	}
	in.Close()
	o, err := openImageFor(a, f, image, disk.Read, defaultType, false)
	if err != nil {
		return err
	}
	defer o.Close()
	v, ok := o.hdr.(disk.Verifier)
	if !ok {
		return withCode(exitInput, fmt.Errorf("%s is %s: it has no integrity tags or digest to verify", image, o.format.Info().Title),
			"xtsctl info "+image+" checks its header copies; xtsctl decrypt reads all of its data")
	}
	headerWarnings(a, o)
	req := a.request(f)
	req.ReadOnly = true
	u, err := unlockImage(a, f, o, req)
	if err != nil {
		return err
	}
	defer u.Wipe()
	update, done := func(int64) {}, func(error) {}
	err = v.Verify(a.ctx, u, disk.VerifyOptions{
		Finding: a.resultf,
		Warn:    a.warningf,
		Total:   func(n int64) { update, done = newProgress(a, "verifying", n) },
		Progress: func(n int64) {
			if update != nil {
				update(n)
			}
		},
	})
	done(err)
	if err != nil {
		return err
	}
	a.infof("%s: all checks passed", image)
	return nil
}
