package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"slices"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/xtsctl/xtsctl/disk"
	"github.com/xtsctl/xtsctl/inplace"
	"github.com/xtsctl/xtsctl/internal/bytesize"
	"github.com/xtsctl/xtsctl/internal/safefile"
	"github.com/xtsctl/xtsctl/internal/secret"
	"github.com/xtsctl/xtsctl/plain"
	"github.com/xtsctl/xtsctl/volume"
)

// encrypt --in-place and decrypt --in-place: flags, prompts and messages.
// The work, its journal and its crash safety are package inplace's
// (docs/INPLACE.md).

// inPlaceFlags are the flags of encrypt and decrypt that --in-place uses.
// createOnly lists the flags of a new volume that a plain run refuses.
var createOnly = []string{"key-size", "integrity", "tag-size", "label", "passphrase-file", "kdf-time", "kdf-memory", "kdf-iterations"}

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

// inPlaceRun is what the in-place commands share: the target, the room
// at its end, and the progress of the phase being run.
type inPlaceRun struct {
	a       *app
	target  string
	t       *inplace.FileTarget
	room    int64 // --reduce-device-size
	phase   string
	prog    *phases
	verb    string // "encrypting" or "decrypting"
	resumed bool   // the run continues an interrupted one
}

// openInPlace opens the target, refusing (before anything changes) what
// is read-only, mounted or in use, and reads --reduce-device-size for it.
func openInPlace(a *app, ip *inPlaceFlags, target string, verb string) (*inPlaceRun, error) {
	t, err := inplace.OpenTarget(target)
	if err != nil {
		return nil, inPlaceError(target, err)
	}
	r := &inPlaceRun{a: a, target: target, t: t, verb: verb, prog: newPhases(a)}
	if ip.reduce != "" {
		if r.room, err = bytesize.Parse(ip.reduce); err != nil {
			err = usageError(fmt.Errorf("--reduce-device-size: %w", err))
		} else if t.Resizable() {
			err = usageError(errors.New("--reduce-device-size applies to block devices: an image file grows by what it needs"))
		}
	}
	if err != nil {
		t.Close()
		return nil, err
	}
	return r, nil
}

// close ends the run; a phase still going was interrupted (every path
// that completes ends its phase first, with finishProgress).
func (r *inPlaceRun) close() {
	r.prog.end(errors.New("interrupted"))
	r.t.Close()
}

// options reports each phase of the run with its own bar or JSON lines:
// the key derivation, then each pass over the data, each on its own clock.
func (r *inPlaceRun) options() inplace.Options {
	return inplace.Options{Progress: func(phase string, done, total int64) {
		if phase != r.phase {
			r.phase = phase
			if phase == "kdf" {
				r.prog.kdf("deriving the new passphrase's key", total)
				return
			}
			what := map[string]string{
				"hashing":    "hashing the plaintext for the end-to-end digest",
				"checking":   "checking every sector's tag",
				"converting": r.verb + " in place",
			}[phase]
			name := map[string]string{"hashing": phaseHash, "checking": phaseCheck}[phase]
			r.prog.data(cmp.Or(name, phaseData), cmp.Or(what, phase), done, total, r.resumed)
		}
		r.prog.update(done)
	}}
}

// finishProgress ends the phase being run: finished when err is nil.
func (r *inPlaceRun) finishProgress(err error) {
	r.prog.end(err)
}

// unlock opens a volume's header with *pass, as every unlock of the
// target does; each key derivation is a phase of the run. A wrong
// passphrase asked for on the terminal (ask not nil) is asked for again,
// up to --tries times in all; *pass is then the one that opened, for the
// caller to wipe.
func (r *inPlaceRun) unlock(pass *[]byte, ask *passphraseRequest) func(*volume.Headers) ([]byte, int, error) {
	return func(hs *volume.Headers) ([]byte, int, error) {
		for try := 1; ; try++ {
			r.phase = "kdf"
			r.prog.kdf("deriving the key from the passphrase", hs.Header.DataLength)
			key, slot, err := hs.UnlockWith(*pass, r.a.unlockOptions(r.target))
			if err == nil || ask == nil || try >= r.a.tries || !errors.Is(err, volume.ErrWrongPassphrase) || r.a.ctx.Err() != nil {
				return key, slot, err
			}
			// The spinner goes before the prompt: that key derivation
			// ended with the wrong passphrase.
			r.prog.end(err)
			again := *ask
			again.notice = retryNotice(r.a, fmt.Errorf("%s: %w", r.target, err), try+1)
			p, perr := readPassphrase(r.a, again)
			if perr != nil {
				return nil, -1, perr
			}
			clear(*pass)
			*pass = p
		}
	}
}

// terminalAsk is req when the passphrase comes from the terminal (to ask
// again after a wrong one), else nil.
func terminalAsk(req passphraseRequest) *passphraseRequest {
	if req.file != "" {
		return nil
	}
	return &req
}

// describeStatus says how far an interrupted run got.
func describeStatus(st *inplace.Status) string {
	return fmt.Sprintf("%s of %s (%s) converted", bytesize.Human(st.Done), bytesize.Human(st.Length), st.Percent())
}

func encryptInPlace(a *app, cmd *cobra.Command, f *encryptFlags, target string, withDigest bool) error {
	typ, err := inPlaceType(&f.img, target, true, f.force)
	if err != nil {
		return err
	}
	ip := &f.ip
	pf, err := f.img.plainFlags(cmd)
	if err != nil {
		return err
	}
	if typ == typePlain {
		if err := rejectFlags(cmd, typ, slices.Concat(createOnly, []string{"digest"})); err != nil {
			return err
		}
		return plainInPlace(a, pf, ip, target, inplace.Encrypt, f.force)
	}
	if found, _ := detectAt(target); f.force && (found == nil || found.Info().Name == typ) {
		return usageError(errors.New("--force does not apply to --in-place of a volume: there is no output file"))
	}
	if err := rejectFlags(cmd, typ, slices.Concat(plainOnly, []string{"journal"})); err != nil {
		return err
	}
	r, err := openInPlace(a, ip, target, "encrypting")
	if err != nil {
		return err
	}
	defer r.close()
	p, err := inplace.PrepareVolume(r.t, inplace.Encrypt, r.room)
	if err != nil {
		return inPlaceError(target, err)
	}
	var res *inplace.VolumeResult
	r.resumed = p.Resume
	if p.Resume {
		a.infof("%s: resuming the interrupted in-place encryption: %s", target, describeStatus(p.Status))
		if cmd.Flags().Changed("digest") {
			a.warningf("--digest applies when a run starts: the interrupted one's choice stands")
		}
		ask := passphraseRequest{file: f.img.passFile, flag: "passphrase-file", prompt: "the passphrase for " + target}
		pass, err := readPassphrase(a, ask)
		if err != nil {
			return err
		}
		defer func() { clear(pass) }()
		res, err = p.ResumeVolume(a.ctx, r.unlock(&pass, terminalAsk(ask)), r.options())
		if err != nil {
			return inPlaceError(target, err)
		}
	} else {
		if p.Status != nil {
			a.infof("%s: an in-place encryption stopped before it converted anything: starting again", target)
		}
		if res, err = startVolumeEncryption(r, p, cmd, f, withDigest); err != nil {
			return err
		}
	}
	r.finishProgress(nil)
	if res.DigestComputed {
		printDigest(a, res.Digest[:])
	} else {
		a.infof("%s records no end-to-end digest (--digest none)", target)
	}
	h := &res.Header
	switch {
	case res.AlreadyDone:
		a.infof("%s was already encrypted in place (the interrupted run had finished); removed what it left", target)
	default:
		a.infof("encrypted %s in place (%s) into a volume: %s, UUID %s", target, bytesize.Human(res.Length), h.Summary(), h.UUIDString())
	}
	return nil
}

// startVolumeEncryption reads the new volume's flags, makes the checks that
// need no passphrase, asks for the new passphrase and runs.
func startVolumeEncryption(r *inPlaceRun, p *inplace.Plan, cmd *cobra.Command, f *encryptFlags, withDigest bool) (*inplace.VolumeResult, error) {
	a := r.a
	cf := &f.cf
	// The volume format checks the options as for encrypt IN OUT.
	do := &disk.CreateOptions{Name: r.target, TypeName: "volume", Digest: withDigest, Warn: a.warningf}
	cf.options(do)
	size, err := r.t.Size()
	if err != nil {
		return nil, withCode(exitInput, fmt.Errorf("%s: %w", r.target, err))
	}
	plan, err := planFitted(a, cmd.Flags(), volume.Format.(disk.Creator), do, r.target, r.t, size)
	if err != nil {
		return nil, err
	}
	opts := plan.Plan.(volume.CreateOptions)
	length, err := p.CheckVolume(opts)
	if err != nil {
		return nil, inPlaceError(r.target, err)
	}
	pass, err := readPassphrase(a, passphraseRequest{file: f.img.passFile, flag: "passphrase-file",
		prompt: "the new passphrase for " + r.target, confirm: true})
	if err != nil {
		return nil, err
	}
	defer clear(pass)
	opts.Passphrase = pass
	kdf, err := cf.kdf.newKDF(a, "volume")
	if err != nil {
		return nil, err
	}
	if opts.KDF, err = volume.NewSlotKDF(kdf); err != nil {
		return nil, err
	}
	a.infof("encrypting %s in place into a volume (%s of data); if this is interrupted, run the same command again to resume", r.target, bytesize.Human(length))
	res, err := p.EncryptVolume(a.ctx, opts, r.options())
	return res, inPlaceError(r.target, err)
}

func decryptInPlace(a *app, cmd *cobra.Command, f *decryptFlags, target string, withDigest bool) error {
	typ, err := inPlaceType(&f.img, target, false, f.force)
	if err != nil {
		return err
	}
	passFile, ip := f.img.passFile, &f.ip
	pf, err := f.img.plainFlags(cmd)
	if err != nil {
		return err
	}
	if err := rejectFlags(cmd, typ, []string{"header"}); err != nil {
		return err
	}
	if typ == typePlain {
		if err := rejectFlags(cmd, typ, []string{"passphrase-file", "digest"}); err != nil {
			return err
		}
		return plainInPlace(a, pf, ip, target, inplace.Decrypt, f.force)
	}
	if found, _ := detectAt(target); f.force && (found == nil || found.Info().Name == typ) {
		return usageError(errors.New("--force does not apply to --in-place of a volume: there is no output file"))
	}
	if err := rejectFlags(cmd, typ, slices.Concat(plainOnly, []string{"journal"})); err != nil {
		return err
	}
	if cmd.Flags().Changed("sector-size") {
		return usageError(errors.New("--sector-size does not apply to volumes: the header records it"))
	}
	r, err := openInPlace(a, ip, target, "decrypting")
	if err != nil {
		return err
	}
	defer r.close()
	p, err := inplace.PrepareVolume(r.t, inplace.Decrypt, 0)
	if err != nil {
		return inPlaceError(target, err)
	}
	if p.Resume {
		a.infof("%s: resuming the interrupted in-place decryption: %s", target, describeStatus(p.Status))
	}
	ask := passphraseRequest{file: passFile, flag: "passphrase-file", prompt: "the passphrase for " + target}
	pass, err := readPassphrase(a, ask)
	if err != nil {
		return err
	}
	defer func() { clear(pass) }()
	if !p.Resume {
		a.infof("decrypting %s in place; if this is interrupted, run the same command again to resume", target)
	}
	r.resumed = p.Resume
	opts := r.options()
	opts.NoDigest = !withDigest
	res, err := p.DecryptVolume(a.ctx, r.unlock(&pass, terminalAsk(ask)), opts)
	var dm *inplace.DigestMismatchError
	if errors.As(err, &dm) {
		r.finishProgress(nil) // every byte was converted: the check after failed
		printDigest(a, res.Digest[:])
		return withCode(exitIntegrity, fmt.Errorf("%s: %w; it was decrypted all the same", target, err),
			"every sector's tag matched, yet the data is not what was encrypted: it was changed by someone with the volume key")
	}
	if err != nil {
		return inPlaceError(target, err)
	}
	r.finishProgress(nil)
	if res.DigestComputed {
		printDigest(a, res.Digest[:])
	}
	switch {
	case res.AlreadyDone:
		a.infof("%s was already decrypted in place (the interrupted run had finished); removed what it left", target)
	case res.DigestMatch:
		a.infof("decrypted %s in place (%s): every sector tag and the end-to-end digest verified", target, bytesize.Human(res.Length))
	case !res.DigestComputed:
		a.infof("decrypted %s in place (%s); the end-to-end digest was not computed (--digest none)", target, bytesize.Human(res.Length))
	default:
		a.infof("decrypted %s in place (%s); the end-to-end digest was not checked (none recorded, or the volume was written since)", target, bytesize.Human(res.Length))
	}
	return nil
}

// plainInPlace runs a plain in-place encryption or decryption; force skips
// the guards that guess from the data that the target is converted
// already.
func plainInPlace(a *app, pf *plainFlags, ip *inPlaceFlags, target string, dir inplace.Direction, force bool) error {
	p, err := pf.params()
	if err != nil {
		return err
	}
	verb := map[inplace.Direction]string{inplace.Encrypt: "encrypting", inplace.Decrypt: "decrypting"}[dir]
	r, err := openInPlace(a, ip, target, verb)
	if err != nil {
		return err
	}
	defer r.close()
	j, err := inplace.JournalFor(r.t, ip.journal)
	if err != nil {
		return inPlaceError(target, err)
	}
	// An interrupted run, or a new one, whose data must be whole sectors
	// (as encrypt and decrypt IN OUT require): said before the key is read.
	plan, err := inplace.PreparePlain(r.t, j, p, dir, r.room)
	if err != nil {
		return inPlaceError(target, err)
	}
	// A new run: none yet, or one whose journal says it finished the
	// other way (a resume keeps the sectors it started with).
	fresh := plan.Status == nil || plan.Status.Finished && plan.Status.Direction != dir
	if dir == inplace.Encrypt && fresh {
		// Its --sector-size must suit the filesystem the data holds, as
		// for every new image (fitSectorSize; the default, 512, suits
		// them all, so it is never lowered here).
		size, err := r.t.Size()
		if err != nil {
			return withCode(exitInput, fmt.Errorf("%s: %w", target, err))
		}
		if _, err := fitSectorSize(a, pf.fs, target, r.t, size, p.Sector.Size); err != nil {
			return err
		}
	}
	key, err := readKeyFile(a, pf.keyFile)
	if err != nil {
		return err
	}
	defer secret.Wipe(key)
	switch {
	case fresh:
		a.infof("%s %s in place (%s); journal %s (keep it: it says how far the run got, then that it finished): if this is interrupted, run the same command again to resume",
			verb, target, plain.Summary(p, 8*len(key)), j.Path)
	case plan.Resume:
		a.infof("%s: resuming the interrupted in-place %s (journal %s): %s", target, dir, j.Path, describeStatus(plan.Status))
	}
	r.resumed = plan.Resume
	opts := r.options()
	opts.Force = force
	res, err := plan.RunPlain(a.ctx, key, opts)
	r.finishProgress(err)
	if err != nil {
		return inPlaceError(target, err)
	}
	if res.AlreadyDone {
		a.infof("%s was %s in place already (its journal %s records the finished run): nothing was converted", target,
			map[inplace.Direction]string{inplace.Encrypt: "encrypted", inplace.Decrypt: "decrypted"}[dir], j.Path)
		return nil
	}
	a.infof("%s %s in place (%s, %d sectors): %s", map[inplace.Direction]string{inplace.Encrypt: "encrypted", inplace.Decrypt: "decrypted"}[dir],
		target, bytesize.Human(res.Length), res.Length/int64(p.Sector.Size), plain.Summary(p, 8*len(key)))
	return nil
}

// inPlaceError maps the errors of package inplace to exit codes and hints.
func inPlaceError(target string, err error) error {
	if err == nil {
		return nil
	}
	var (
		cle *cliError
		be  *inplace.BusyError
		fe  *inplace.FinishedError
		ce  *inplace.ConvertedError
		ne  *inplace.NeedRoomError
		me  *inplace.MismatchError
		de  *inplace.DirectionError
		ie  *inplace.InterruptedError
		re  *inplace.ReadError
		we  *inplace.WriteError
		dme *inplace.DigestMismatchError
		je  *inplace.JournalError
		nd  *inplace.NoDataError
		se  *inplace.SectorsError
		le  *inplace.LayoutError
		pe  *fs.PathError
	)
	wrap := func(code int, hints ...string) error {
		return withCode(code, fmt.Errorf("%s: %w", target, err), hints...)
	}
	switch {
	case errors.As(err, &cle):
		return err
	case errors.Is(err, context.Canceled):
		return withCode(exitInterrupted, fmt.Errorf("%s: interrupted: run the same command again to resume (xtsctl info %s shows how far it got)", target, target))
	case errors.As(err, &be):
		return wrap(exitDevice, "unmount it, close it (xtsctl close NAME) or detach it (losetup -d) first; nothing was changed")
	case errors.Is(err, inplace.ErrReadOnly):
		return withCode(exitOutput, fmt.Errorf("%s is read-only: nothing was changed", target))
	case errors.As(err, &ne):
		return wrap(exitInput, fmt.Sprintf("a block device does not grow: shrink the filesystem on it so that its last %d bytes (%s) are free, then give --reduce-device-size %d; nothing was changed", ne.Need, bytesize.Human(ne.Need), ne.Need))
	case errors.Is(err, inplace.ErrWrongKey):
		return wrap(exitKey, "give the key (or passphrase) the interrupted run was started with")
	case errors.Is(err, inplace.ErrNotThisTarget):
		return wrap(exitInput, "resume the run on the target it was started on; nothing was changed")
	case errors.Is(err, inplace.ErrRolledBack):
		return wrap(exitInput, "put back the newest copy of the journal (or of the image) if there is one; nothing was changed")
	case errors.As(err, &fe) && fe.OtherKey:
		return wrap(exitKey, "give the key that run used; if "+target+" no longer holds what it left, move "+fe.Journal+" away first; nothing was changed")
	case errors.As(err, &fe):
		return wrap(exitInput, "if "+target+" now holds other data to "+fe.Direction.Verb()+", move "+fe.Journal+" away first; nothing was changed")
	case errors.As(err, &ce):
		return wrap(exitInput, fmt.Sprintf("nothing was changed; if you are sure it is not %sed, give --force", ce.Direction.Verb()))
	case errors.As(err, &me) && me.Finished:
		return wrap(exitUsage, "give the options that run used (if "+target+" no longer holds what it left, move its journal away); nothing was changed")
	case errors.As(err, &me):
		return wrap(exitUsage, "give the options the interrupted run was started with; nothing was changed")
	case errors.As(err, &de):
		return wrap(exitUsage, fmt.Sprintf("xtsctl info %s shows how far it got", target))
	case errors.As(err, &ie):
		return wrap(exitUsage)
	case errors.Is(err, inplace.ErrAlreadyVolume):
		return wrap(exitInput, "xtsctl info "+target+" describes it")
	case errors.Is(err, inplace.ErrJournalIsTarget):
		return usageError(errors.New("--journal cannot be the target itself"))
	case errors.Is(err, inplace.ErrJournalRequired):
		return usageError(fmt.Errorf("%s is a block device: a plain in-place run needs --journal FILE, a file on another device (it holds up to %s)", target, bytesize.Human(inplace.MaxJournalSize)),
			"the journal must survive what the device might not: keep it on another disk, and keep it until the run finishes")
	case errors.As(err, &je):
		return wrap(exitInput, "if no in-place run of "+target+" was interrupted, the file is not xtsctl's: move it away")
	case errors.As(err, &nd):
		return withCode(exitInput, fmt.Errorf("%s is %d bytes: nothing to convert after the offset of %d bytes", target, nd.Size, nd.Offset))
	case errors.As(err, &se) && se.Kind == inplace.KindPlain:
		return withCode(exitInput, fmt.Errorf("%s holds %d bytes of data, not a whole number of %d-byte sectors", target, se.Length, se.SectorSize),
			"pad it to a multiple of the sector size, or choose a smaller --sector-size")
	case errors.As(err, &se):
		return withCode(exitInput, fmt.Errorf("%s holds %d bytes of data, not a whole number of %d-byte sectors", target, se.Length, se.SectorSize),
			"choose a smaller --sector-size, or pad it to a multiple of the sector size")
	case errors.As(err, &le):
		return usageError(le.Err)
	case errors.Is(err, inplace.ErrNotClean):
		return wrap(exitInput)
	case errors.Is(err, inplace.ErrHeaderLost):
		return wrap(exitIntegrity)
	case errors.As(err, &dme):
		return wrap(exitIntegrity)
	case errors.As(err, &we):
		return wrap(exitOutput, "the run can be resumed once the problem is fixed: run the same command again")
	case errors.As(err, &re):
		return wrap(exitInput)
	case errors.As(err, &pe) && errors.Is(err, fs.ErrNotExist):
		return withCode(exitInput, fmt.Errorf("%s does not exist", pe.Path))
	}
	return volume.DiskError(target, err)
}

// inPlaceJSON describes an interrupted in-place run in info --json.
type inPlaceJSON struct {
	Kind       string  `json:"kind"`      // "volume" or "plain"
	Direction  string  `json:"direction"` // "encrypt" or "decrypt"
	DataLength int64   `json:"data_length"`
	Done       int64   `json:"done"`
	Percent    float64 `json:"percent"`
	// Recorded: an intact record says Done; not authenticated without
	// the key.
	Recorded bool `json:"recorded"`
	// Started: false for a run that stopped while starting (nothing was
	// converted).
	Started bool `json:"started"`
	// Finished: a plain run's journal says it finished (which only the
	// key authenticates); Resume is then "".
	Finished bool   `json:"finished,omitempty"`
	Journal  string `json:"journal,omitempty"`
	Resume   string `json:"resume"`
}

// infoInPlace shows an interrupted in-place run of image (a volume's run
// area at its end, or a plain run's journal), and the header when there is
// one; shown is false when there is no run.
func infoInPlace(a *app, f *infoFlags, image string, in *safefile.Input) (shown bool, err error) {
	st, err := inplace.FindRun(in, in.Size, image, f.journal, in.Info.Mode().IsRegular())
	switch {
	case errors.Is(err, inplace.ErrJournalInTarget):
		return true, usageError(fmt.Errorf("%s is a volume being converted in place: its journal is in it, --journal does not apply", image))
	case err != nil:
		return true, withCode(exitInput, err)
	case st == nil:
		return false, nil
	}
	resume := st.ResumeCommand(image)
	if st.Finished {
		resume = ""
	}
	j := &inPlaceJSON{Kind: st.Kind.String(), Direction: st.Direction.Verb(), DataLength: st.Length, Done: st.Done,
		Recorded: st.Recorded, Started: st.Started, Finished: st.Finished, Journal: st.Journal, Resume: resume}
	if st.Length > 0 {
		j.Percent = math.Round(1000*float64(st.Done)/float64(st.Length)) / 10
	}
	// A volume's header, where it can be read, says the rest.
	var vol *volume.InfoDoc
	if hs := st.Headers; hs != nil {
		v := volume.Info(image, in.Size, hs, st.State)
		// The run moves the data over the primary copy and the state
		// area: say so rather than call them damaged.
		for i := range v.HeaderCopies {
			if c := &v.HeaderCopies[i]; c.Name == "primary" && !c.OK {
				c.Error = "its place holds data during the in-place " + st.Direction.String()
			}
		}
		if st.Direction == inplace.Encrypt && hs.Header.Flags&volume.FlagDigest != 0 {
			v.Digest = "recorded"
		}
		vol = v
	}
	if f.json {
		enc := json.NewEncoder(a.stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		if vol != nil {
			vol.InPlace = j
			return true, enc.Encode(vol)
		}
		return true, enc.Encode(struct {
			Image   string       `json:"image"`
			Format  string       `json:"format"`
			InPlace *inPlaceJSON `json:"in_place"`
		}{image, map[inplace.Kind]string{inplace.KindPlain: "plain", inplace.KindVolume: "xtsctl-volume"}[st.Kind], j})
	}
	if vol != nil {
		printLines(a, vol.Lines())
	} else {
		a.resultf("%-16s %s (%d bytes)", "image:", image, in.Size)
	}
	what := "an xtsctl volume"
	if st.Kind == inplace.KindPlain {
		what = "plain (cryptsetup plain mode)"
	}
	progress := fmt.Sprintf("%s of %s (%.1f%%) converted, as its last record says (which only the key authenticates)", bytesize.Human(st.Done), bytesize.Human(st.Length), j.Percent)
	switch {
	case st.Finished:
		a.resultf("%-16s %s %s, finished, as its journal says (which only the key authenticates): running it again converts nothing", "in-place run:", what, st.Direction)
		a.resultf("%-16s %s", "journal:", st.Journal)
		return true, nil
	case !st.Started:
		progress = "stopped while starting: nothing was converted"
	case !st.Recorded:
		progress = "how far it got is unknown (no intact record)"
	}
	a.resultf("%-16s %s %s, interrupted: %s", "in-place run:", what, st.Direction, progress)
	if st.Journal != "" {
		a.resultf("%-16s %s", "journal:", st.Journal)
	}
	a.resultf("%-16s %s", "resume with:", resume)
	return true, nil
}
