package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/xtsctl/xtsctl/disk"
	"github.com/xtsctl/xtsctl/internal/bytesize"
)

// encrypt --in-place and decrypt --in-place: flags, prompts and messages,
// one path for every format converted in place (disk.InPlacer). The work,
// its journal and its crash safety are package inplace's
// (docs/INPLACE.md).

// inPlaceFlags are the flags of encrypt and decrypt that --in-place uses.
type inPlaceFlags struct {
	on      bool
	journal string
	reduce  string
}

// inPlaceOnly lists the flags that go with --in-place only.
var inPlaceOnly = []string{"journal", "reduce-device-size"}

func (f *inPlaceFlags) register(fs *pflag.FlagSet, encrypt bool) {
	fs.BoolVar(&f.on, "in-place", false, "convert TARGET itself, resumably: run the same command again after an interruption (docs/INPLACE.md)")
	fs.StringVar(&f.journal, "journal", "", "in place, plain: the journal file (default: TARGET.xtsctl-journal beside an image; required for a block device, on another device)")
	if encrypt {
		fs.StringVar(&f.reduce, "reduce-device-size", "", "in place, block device: bytes at its end that hold no data and may be overwritten (room for the volume's metadata, or the plain --offset), e.g. 32M")
	}
}

// inPlaceArgs checks the positional arguments: TARGET with --in-place,
// names otherwise.
func inPlaceArgs(f *inPlaceFlags, names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if f.on {
			return argsNamed("TARGET")(cmd, args)
		}
		for _, n := range inPlaceOnly {
			if cmd.Flags().Changed(n) {
				return usageError(fmt.Errorf("--%s goes with --in-place", n))
			}
		}
		return argsNamed(names...)(cmd, args)
	}
}

// inPlaceJob is what encrypt or decrypt --in-place was asked to do.
type inPlaceJob struct {
	target  string
	encrypt bool
	force   bool
	digest  bool
	ip      *inPlaceFlags
	cf      *createFlags // encrypt: the new image's options
}

// inPlace runs an in-place encryption or decryption: the format and the
// flags checked, the run prepared (every check that needs no secret),
// the secret it names asked for, the run.
func inPlace(a *app, f *imageFlags, job inPlaceJob) error {
	format, conv, err := inPlaceFormat(f, job.target, job.encrypt, job.force)
	if err != nil {
		return err
	}
	if err := checkInPlaceFlags(f, format, conv, job); err != nil {
		return err
	}
	flags := f.cmd.Flags()
	o := &disk.InPlaceOptions{Target: job.target, Encrypt: job.encrypt, Journal: job.ip.journal, Request: a.request(f),
		Force: job.force, Digest: job.digest, DigestGiven: flags.Changed("digest"), Options: f.options(), Info: a.infof, Warn: a.warningf}
	if job.ip.reduce != "" {
		if o.Room, err = bytesize.Parse(job.ip.reduce); err != nil {
			return usageError(fmt.Errorf("--reduce-device-size: %w", err))
		}
	}
	if job.encrypt {
		o.Create = &disk.CreateOptions{Name: job.target, TypeName: format.Info().Name, Digest: job.digest, Options: f.options(), Warn: a.warningf}
		job.cf.options(o.Create)
		if o.Create.KDF, err = job.cf.kdf.newKDF(a, format.Info().Name); err != nil {
			return err
		}
		o.FitSectorSize = func(r io.ReaderAt, size int64, def int) (int, error) {
			return fitSectorSize(a, flags, job.target, r, size, def)
		}
	}
	prog, phase, resumed := newPhases(a), "", false
	verb := map[bool]string{true: "encrypting", false: "decrypting"}[job.encrypt]
	o.Progress = func(ph string, done, total int64) {
		if ph != phase {
			phase = ph
			switch ph {
			case "kdf":
				prog.kdf("deriving the new passphrase's key", total)
				return
			case "unlock":
				prog.kdf("deriving the key from the passphrase", total)
				return
			}
			what := map[string]string{
				"hashing":    "hashing the plaintext for the end-to-end digest",
				"checking":   "checking every sector's tag",
				"converting": verb + " in place",
			}[ph]
			name := map[string]string{"hashing": phaseHash, "checking": phaseCheck}[ph]
			prog.data(cmp.Or(name, phaseData), cmp.Or(what, ph), done, total, resumed)
		}
		prog.update(done)
	}
	run, err := conv.PrepareInPlace(o)
	if err != nil {
		return err
	}
	defer run.Close()
	// A phase still going when this returns was interrupted (a run that
	// ends has ended its phase).
	defer func() { prog.end(errors.New("interrupted")) }()
	resumed = run.Resume()
	op := &opened{path: job.target, format: format}
	failed := 0
	res, err := run.Run(a.ctx, func(need *disk.Need, wrong error) (*disk.Secret, error) {
		notice := ""
		if wrong != nil {
			// A wrong passphrase typed at the terminal is asked for
			// again, up to --tries times in all; the spinner of the key
			// derivation that found it wrong goes first.
			failed++
			if !asksTerminal(f, op, need) || failed >= a.tries || a.ctx.Err() != nil {
				return nil, wrong
			}
			prog.end(wrong)
			phase = ""
			notice = retryNotice(a, wrong, failed+1)
		}
		sec, err := readKeyFiles(a, f, op)
		if err == nil {
			err = readPassphraseFor(a, f, op, need, sec, notice)
		}
		if err != nil {
			sec.Wipe()
			return nil, err
		}
		return sec, nil
	})
	if res == nil {
		prog.end(err)
		return err
	}
	// Every byte was converted (a failed digest check comes after).
	prog.end(nil)
	if res.Digest != nil {
		printDigest(a, res.Digest)
	}
	if err != nil {
		return err
	}
	for _, n := range res.Notes {
		a.infof("%s", n)
	}
	return nil
}

// inPlaceFormat is the format an in-place run converts, and its
// conversion: --type, else the target's header (decrypting), else a
// volume (decrypting) or the volume made (encrypting). A target whose
// header is another format's is refused, naming it, unless force:
// converting it would wrap or encrypt that header away (or decrypt
// garbage over the data).
func inPlaceFormat(f *imageFlags, target string, encrypting, force bool) (disk.Format, disk.InPlacer, error) {
	found, what := detectAt(target)
	var converts []string
	for _, fo := range disk.Formats() {
		if _, ok := disk.InPlacerOf(fo); ok {
			converts = append(converts, fo.Info().Name)
		}
	}
	want := found
	if f.typ != "" || encrypting || found == nil {
		var ok bool
		if want, ok = disk.Lookup(cmp.Or(f.typ, defaultType)); !ok {
			return nil, nil, usageError(fmt.Errorf("unknown --type %q (want %s)", f.typ, strings.Join(converts, " or ")))
		}
	}
	conv, ok := disk.InPlacerOf(want)
	if !ok {
		info := want.Info()
		hint := cmp.Or(info.InPlaceElsewhere, "xtsctl converts in place: --type "+strings.Join(converts, ", --type "))
		if f.typ == "" {
			return nil, nil, usageError(fmt.Errorf("--in-place does not apply to %s (%s is one)", cmp.Or(info.Refer, info.Name+" images"), target), hint)
		}
		return nil, nil, usageError(fmt.Errorf("--in-place does not apply to --type %s", info.Name), hint)
	}
	if found == nil || force || found == want {
		// The same format: the run itself says "already a volume", or
		// finds its own interrupted run.
		return want, conv, nil
	}
	verb, fix := "decrypting", "xtsctl decrypt "+target+" OUT reads it as it is"
	if encrypting {
		verb, fix = "encrypting", "decrypt it first (xtsctl decrypt --in-place, or its own tool), or encrypt a copy"
	}
	return nil, nil, withCode(exitInput, fmt.Errorf("%s is %s: %s it in place as --type %s would destroy that header", target, what, verb, want.Info().Name),
		fix, "if you are sure the header is stale, --force converts it all the same")
}

// checkInPlaceFlags refuses, before anything is read, the flags given that
// the format's conversion does not take: a new image's options as encrypt
// IN OUT checks them, an image's as decrypt IN OUT does, the secrets'
// flags against what the run will ask for, and the in-place flags.
func checkInPlaceFlags(f *imageFlags, format disk.Format, conv disk.InPlacer, job inPlaceJob) error {
	info, flags := format.Info(), f.cmd.Flags()
	if job.force && !disk.InPlaceTakes(conv, "force") {
		if found, _ := detectAt(job.target); found == nil || found == format {
			return usageError(fmt.Errorf("--force does not apply to --in-place of %s: there is no output file", info.Title))
		}
	}
	if job.encrypt {
		if err := checkCreateFlags(f.cmd, format); err != nil {
			return err
		}
	} else if err := f.checkFlags(format); err != nil {
		return err
	}
	need := conv.InPlaceInfo().Secret
	if err := checkSecretFlags(f, info, &need); err != nil {
		return err
	}
	if flags.Changed("journal") && !disk.InPlaceTakes(conv, "journal") {
		return usageError(fmt.Errorf("--journal does not apply to --type %s", info.Name))
	}
	return nil
}
