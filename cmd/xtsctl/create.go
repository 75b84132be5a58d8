package main

// encrypt IN OUT and format: a new image of any format that writes them
// (disk.Creator), on one path: the options checked by the format before
// anything is asked or written, the output started, the new secret asked
// for, the image written.

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/xtsctl/xtsctl/aesni"
	"github.com/xtsctl/xtsctl/disk"
	"github.com/xtsctl/xtsctl/internal/bytesize"
	"github.com/xtsctl/xtsctl/internal/safefile"
)

// createJob is what encrypt or format was asked to make.
type createJob struct {
	in     string // encrypt: the plaintext; "" for format (zeros)
	out    string
	size   string // format: --size
	force  bool
	digest bool
}

// createDependent are the flags of encrypt and format that some formats
// take for a new image (disk.FormatInfo.CreateTakes).
var createDependent = []string{"sector-size", "key-size", "integrity", "tag-size", "label", "uuid", "digest",
	"passphrase-file", "key-file", "kdf-time", "kdf-memory", "kdf-iterations", "offset", "skip", "iv-large-sectors"}

// checkCreateFlags refuses the flags given that a new image of format
// does not take, before anything is read or asked.
func checkCreateFlags(cmd *cobra.Command, format disk.Format) error {
	info := format.Info()
	for _, name := range createDependent {
		fl := cmd.Flags().Lookup(name)
		if fl == nil || !fl.Changed || slices.Contains(info.CreateTakes, name) {
			continue
		}
		where := "--type " + info.Name
		if info.Refer != "" && name != "key-file" && name != "passphrase-file" {
			where = info.Refer
		}
		msg := fmt.Sprintf("--%s does not apply to %s", name, where)
		var takers []string
		for _, fo := range disk.Formats() {
			if _, ok := fo.(disk.Creator); ok && slices.Contains(fo.Info().CreateTakes, name) {
				takers = append(takers, cmp.Or(fo.Info().Refer, fo.Info().Name+" images"))
			}
		}
		if len(takers) == 1 && !cmd.Flags().Changed("type") {
			// No --type: the flag may say what the user meant.
			msg = fmt.Sprintf("--%s applies to %s only", name, takers[0])
		}
		return usageError(errors.New(msg), rejectHints[info.Name+" "+name]...)
	}
	return nil
}

// creatorNames lists the formats xtsctl writes, the default first:
// "volume, plain or luks2".
func creatorNames() string {
	names := []string{defaultType}
	// Headerless formats (plain) before those with a header.
	for _, sig := range []bool{false, true} {
		for _, f := range disk.Formats() {
			if _, ok := f.(disk.Creator); ok && f.Info().Name != defaultType && f.Info().Signature == sig {
				names = append(names, cmp.Or(f.Info().WriteName, f.Info().Name))
			}
		}
	}
	if len(names) == 1 {
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// decimalUnit is the power-of-1000 unit a size ends in ("GB"), or "".
func decimalUnit(size string) string {
	for _, u := range []string{"KB", "MB", "GB", "TB"} {
		if strings.HasSuffix(size, u) {
			return u
		}
	}
	return ""
}

func createImage(a *app, f *imageFlags, cf *createFlags, job createJob) error {
	typ := cmp.Or(f.typ, defaultType)
	format, ok := disk.Lookup(typ)
	if !ok {
		return usageError(fmt.Errorf("unknown --type %q (want %s)", typ, creatorNames()))
	}
	creator, ok := format.(disk.Creator)
	if !ok {
		return usageError(fmt.Errorf("xtsctl reads %s, but does not write them (--type %s)", cmp.Or(format.Info().Refer, typ+" images"), typ),
			"it writes: "+creatorNames())
	}
	// The input first: a misspelled IN is named as such, not as a flag
	// that does not fit the format.
	verb := "encrypting"
	var in *safefile.Input
	if job.in != "" {
		var err error
		if in, err = openStreamInput(a, job.in); err != nil {
			return err
		}
		defer in.Close()
	}
	if err := checkCreateFlags(f.cmd, format); err != nil {
		return err
	}
	o := &disk.CreateOptions{Name: job.out, TypeName: typ, Digest: job.digest, Options: f.options(), Warn: a.warningf}
	cf.options(o)
	if job.in == "" {
		verb = "formatting"
		size, err := bytesize.Parse(job.size)
		if err != nil {
			return usageError(fmt.Errorf("--size: %w", err))
		}
		o.DataSize = size
		in = &safefile.Input{}
	} else {
		o.DataSize = in.Size
	}
	var plaintext io.ReaderAt // looked at for its filesystem (not a stream)
	if job.in != "" && in.File != nil && in.Size >= 0 {
		plaintext = in.File
	}
	plan, err := planFitted(a, f.cmd.Flags(), creator, o, job.in, plaintext, in.Size)
	if err != nil {
		return err
	}
	ss := int64(plan.SectorSize)
	switch {
	case job.in == "" && o.DataSize > 0 && o.DataSize%ss != 0 && decimalUnit(job.size) != "":
		// 1GB is 10^9 bytes (as truncate reads it), which no sector
		// size divides: the user almost always means 1G.
		u := decimalUnit(job.size)
		bin := strings.TrimSuffix(job.size, u) + u[:1]
		return usageError(fmt.Errorf("--size %s is %d bytes (%s is a power of 1000), not a whole number of %d-byte sectors", job.size, o.DataSize, u, ss),
			fmt.Sprintf("for powers of 1024 write %s or %siB", bin, bin))
	case job.in == "" && (o.DataSize <= 0 || o.DataSize%ss != 0):
		return usageError(fmt.Errorf("--size %s is not a positive whole number of %d-byte sectors", job.size, ss))
	case job.in == "" && plan.ImageSize != -1 && plan.ImageSize < o.DataSize:
		return usageError(fmt.Errorf("--size %s is too large", job.size))
	case o.DataSize > 0 && plan.ImageSize != -1 && plan.ImageSize < o.DataSize:
		return withCode(exitInput, fmt.Errorf("input %s is too large for %s", job.in, format.Info().Title))
	case o.DataSize > 0 && o.DataSize%ss != 0:
		return withCode(exitInput, fmt.Errorf("input %s is %d bytes, not a whole number of %d-byte sectors", job.in, o.DataSize, ss),
			fmt.Sprintf("pad it to a multiple of the sector size (truncate -s %d %s), or choose a smaller --sector-size", roundUp(o.DataSize, ss), job.in))
	}
	a.verbosef("AES-XTS kernel for %d-byte sectors: %s", ss, aesni.Pick(int(ss)))
	if plan.Need.Passphrase != disk.WantNone {
		if o.KDF, err = cf.kdf.newKDF(a, format.Info().Name); err != nil {
			return err
		}
	}
	out, err := createOutput(a, job.out, in, job.force)
	if err != nil {
		return err
	}
	if out.File == nil && plan.NeedsFile != "" {
		out.Abort()
		return usageError(fmt.Errorf("%s %s", out.FinalName(), plan.NeedsFile), "write it to a file; --type plain streams")
	}
	op := &opened{path: job.out, format: format}
	need := plan.Need
	need.Prompt = "the new passphrase for " + job.out
	sec, err := readSecrets(a, f, op, &need)
	if err != nil {
		out.Abort()
		return err
	}
	defer sec.Wipe()
	// The key derivation and the data are phases of their own: the data's
	// clock starts when the format says the data starts (Total).
	prog := newPhases(a)
	o.KDF.Info, o.KDF.Warn, o.Warn = prog.say(o.KDF.Info), prog.say(o.KDF.Warn), prog.say(o.Warn)
	if plan.Need.Passphrase != disk.WantNone {
		prog.kdf("deriving the new passphrase's key", o.DataSize)
	}
	o.Total = func(n int64) { prog.data(phaseData, verb, 0, n, false) }
	o.Progress = prog.update
	var input *disk.CreateInput
	if job.in != "" {
		input = &disk.CreateInput{Name: in.Name, R: in}
		if in.File != nil && in.Size >= 0 {
			input.RA = in.File
		}
	}
	dst := &disk.CreateOutput{Name: out.FinalName(), W: out}
	if out.File != nil {
		dst.File = out.File.File
	}
	res, err := creator.Create(a.ctx, plan, input, dst, sec)
	prog.end(err)
	if err := finish(out, err); err != nil {
		return err
	}
	if job.in == "" {
		a.resultf("%s", res.UUID)
		a.infof("formatted %s: %s of data (image %s), %s%s", job.out, bytesize.Human(res.DataBytes), bytesize.Human(res.ImageSize), res.Summary, prefixed(", ", res.Where))
		return nil
	}
	if res.Digest != nil {
		printDigest(a, res.Digest)
	}
	id := ""
	if res.UUID != "" {
		id = ", UUID " + res.UUID
	}
	a.infof("encrypted %s (%s) to %s%s: %s%s%s", in.Name, res.Sizes, res.Into, out.FinalName(), res.Summary, id, prefixed(", ", res.Where))
	for _, n := range res.Notes {
		a.infof("%s", n)
	}
	return nil
}

// prefixed is s after prefix, or "" for an empty s.
func prefixed(prefix, s string) string {
	if s == "" {
		return ""
	}
	return prefix + s
}

// roundUp is n rounded up to a multiple of m.
func roundUp(n, m int64) int64 { return (n + m - 1) / m * m }
