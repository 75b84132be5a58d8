package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/xtsctl/xtsctl/volume"
)

func init() { registerCommand(newVerifyCmd) }

func newVerifyCmd(a *app) *cobra.Command {
	var passFile string
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
and never writes to IMAGE.`,
		Example: `  xtsctl verify disk.vol
  xtsctl verify --passphrase-file pass.txt disk.vol`,
		Args: argsNamed("IMAGE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if hasLUKSHeader(args[0]) {
				return luksVerify(args[0])
			}
			if err := notLUKS(cmd); err != nil {
				return err
			}
			return verify(a, args[0], passFile)
		},
	}
	cmd.Flags().StringVar(&passFile, "passphrase-file", "", "read the passphrase from FILE (one trailing newline is removed) instead of the terminal")
	registerUnlockFlags(a, cmd.Flags())
	registerProgressFlag(a, cmd.Flags())
	return cmd
}

func verify(a *app, image, passFile string) error {
	in, err := openInput(image) // names a missing or unusable IMAGE
	if err != nil {
		return err
	}
	in.Close()
	v, err := unlockVolume(a, image, passFile, true)
	if err != nil {
		return err
	}
	defer v.Close()
	h := v.Header()
	var problems []string

	hs := v.Headers()
	for _, c := range []volume.CopyStatus{hs.Primary, hs.Secondary} {
		if c.Err != nil {
			a.resultf("header: %s copy at byte %d: damaged (%v)", c.Name, c.Offset, c.Err)
			problems = append(problems, fmt.Sprintf("the %s header copy is damaged", c.Name))
		} else {
			a.resultf("header: %s copy at byte %d: ok (generation %d)", c.Name, c.Offset, c.Generation)
		}
	}
	if len(hs.Damaged) > 0 {
		problems = append(problems, fmt.Sprintf("key slots %v are damaged in both copies", hs.Damaged))
	}
	a.resultf("key slots in use: %s; the passphrase opened slot %d", intList(h.ActiveSlots()), v.Slot())

	st := v.State()
	if !st.Valid || st.Dirty {
		regions, all, err := v.RecoveryRegions()
		if err != nil {
			return volumeError(image, err)
		}
		switch {
		case !st.Valid:
			a.resultf("state: unknown (no usable state record)")
			a.warningf("%s: whether the volume was closed cleanly is unknown", image)
		case all:
			a.resultf("state: not closed cleanly (which regions were being written cannot be trusted)")
			a.warningf("%s: the volume was not closed cleanly, and the record of the regions being written cannot be trusted", image)
		default:
			a.resultf("state: not closed cleanly (%s)", plural(int64(len(regions)), "dirty region"))
			a.warningf("%s: the volume was not closed cleanly: %d regions may hold sectors written just before, whose tags may not match", image, len(regions))
		}
	} else {
		a.resultf("state: closed cleanly")
	}
	if st.Valid && !st.Authenticated {
		a.warningf("%s: volume format version 1: its state area is not authenticated (a read-write open upgrades it)", image)
	}

	update, done := newProgress(a, "verifying", h.DataLength)
	res, err := v.Verify(a.ctx, update, func(b volume.BadSector) {
		why := "tag mismatch"
		if b.DirtyRegion {
			why += ", in a region being written when the volume was last used (a crash may have torn it: a read-write open checks it, open --recover accepts it)"
		}
		a.resultf("bad sector %d at byte offset %d: %s", b.Sector, b.Offset, why)
	})
	done()
	var dm *volume.DigestMismatchError
	if err != nil && !errors.As(err, &dm) {
		return volumeError(image, err)
	}
	if h.Integrity == volume.IntegrityNone {
		a.resultf("data: %d sectors; no integrity tags to check", h.Sectors())
	} else {
		a.resultf("data: %d sectors, %d bad", h.Sectors(), res.BadSectors)
	}
	if res.BadSectors > 0 {
		problems = append(problems, plural(res.BadSectors, "bad sector"))
	}
	switch d := res.Digest; {
	case dm != nil:
		a.resultf("digest: MISMATCH (recorded %x, data %x)", dm.Recorded, dm.Computed)
		problems = append(problems, "the end-to-end digest does not match")
	case d.Match:
		a.resultf("digest: ok (%x)", d.Computed)
	case d.Stale:
		a.resultf("digest: not checked (the volume was written since it was recorded)")
	case !d.Recorded:
		a.resultf("digest: none recorded (made with --digest none)")
	}
	if len(problems) > 0 {
		return withCode(exitIntegrity, fmt.Errorf("%s: %s", image, strings.Join(problems, "; ")))
	}
	a.infof("%s: all checks passed", image)
	return nil
}

func intList[T int | uint64](xs []T) string {
	if len(xs) == 0 {
		return "none"
	}
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ", ")
}

// plural formats a count with a noun: "1 bad sector", "2 bad sectors",
// "3 passes".
func plural(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	if strings.HasSuffix(noun, "s") {
		return fmt.Sprintf("%d %ses", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// luksVerify answers verify on a LUKS image (cmd_verify.go's hook): LUKS
// has no integrity tags or digest to check.
func luksVerify(image string) error {
	return withCode(exitInput, fmt.Errorf("%s is a LUKS image: it has no integrity tags or digest to verify", image),
		"xtsctl info "+image+" checks its header copies; xtsctl decrypt reads all of its data")
}
