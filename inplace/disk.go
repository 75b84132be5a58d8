package inplace

import (
	"context"
	"errors"
	"fmt"

	"github.com/xtsctl/xtsctl/disk"
	"github.com/xtsctl/xtsctl/internal/bytesize"
	"github.com/xtsctl/xtsctl/plain"
	"github.com/xtsctl/xtsctl/volume"
)

// The in-place conversions of the format layer (disk.InPlacer): into and
// out of an xtsctl volume, whose run keeps its records in the target, and
// of a plain image, whose run keeps them in a journal beside it.
func init() {
	disk.RegisterInPlace(volume.Format, volumeInPlacer{})
	disk.RegisterInPlace(plain.Format, plainInPlacer{})
}

// job is what both conversions share: the target, the direction, the
// options, and the progress of the key derivation of an unlock.
type job struct {
	o   *disk.InPlaceOptions
	t   *FileTarget
	dir Direction
	// secretErr is the error the caller's secret function returned: the
	// run stopped because of it, and it is returned as it is.
	secretErr error
}

func openJob(o *disk.InPlaceOptions) (*job, error) {
	if o.Encrypt && o.Create == nil {
		o.Create = &disk.CreateOptions{Name: o.Target} // the format's defaults
	}
	t, err := OpenTarget(o.Target)
	if err != nil {
		return nil, Error(o.Target, err)
	}
	j := &job{o: o, t: t, dir: Decrypt}
	if o.Encrypt {
		j.dir = Encrypt
	}
	return j, nil
}

func (j *job) Close() error { return j.t.Close() }

func (j *job) info(format string, args ...any) {
	if j.o.Info != nil {
		j.o.Info(format, args...)
	}
}

func (j *job) warn(format string, args ...any) {
	if j.o.Warn != nil {
		j.o.Warn(format, args...)
	}
}

// secret asks the caller for need, keeping its error.
func (j *job) secret(ask func(*disk.Need, error) (*disk.Secret, error), need *disk.Need, wrong error) (*disk.Secret, error) {
	s, err := ask(need, wrong)
	if err != nil {
		j.secretErr = err
	}
	return s, err
}

// result returns err classified, or the secret function's error.
func (j *job) result(res *disk.InPlaceResult, err error) (*disk.InPlaceResult, error) {
	if j.secretErr != nil {
		return nil, j.secretErr
	}
	return res, Error(j.o.Target, err)
}

func (j *job) options() Options {
	// NoDigest is a decryption's: an encryption's choice is the new
	// volume's (Create.Digest), and a resumed one keeps its own.
	return Options{Progress: j.o.Progress, Force: j.o.Force, NoDigest: !j.o.Encrypt && !j.o.Digest}
}

// describeStatus says how far an interrupted run got.
func describeStatus(st *Status) string {
	return fmt.Sprintf("%s of %s (%s) converted", bytesize.Human(st.Done), bytesize.Human(st.Length), st.Percent())
}

type volumeInPlacer struct{}

func (volumeInPlacer) InPlaceInfo() disk.InPlaceInfo {
	return disk.InPlaceInfo{Secret: disk.Need{Passphrase: disk.WantRequired}}
}

// volumeJob converts into a volume, or out of one.
type volumeJob struct {
	*job
	p *Plan
	// create is a new encryption's volume, planned before any passphrase
	// is asked for; length the data it converts.
	create volume.CreateOptions
	length int64
}

func (volumeInPlacer) PrepareInPlace(o *disk.InPlaceOptions) (disk.InPlaceJob, error) {
	j, err := openJob(o)
	if err != nil {
		return nil, err
	}
	vj := &volumeJob{job: j}
	if err := vj.prepare(); err != nil {
		j.Close()
		return nil, err
	}
	return vj, nil
}

func (vj *volumeJob) prepare() error {
	o, target := vj.o, vj.o.Target
	room := o.Room
	if !o.Encrypt {
		room = 0
	}
	p, err := PrepareVolume(vj.t, vj.dir, room)
	if err != nil {
		return Error(target, err)
	}
	vj.p = p
	switch {
	case p.Resume:
		vj.info("%s: resuming the interrupted in-place %s: %s", target, vj.dir, describeStatus(p.Status))
		if o.Encrypt && o.DigestGiven {
			vj.warn("--digest applies when a run starts: the interrupted one's choice stands")
		}
		return nil
	case !o.Encrypt:
		return nil
	case p.Status != nil:
		vj.info("%s: an in-place encryption stopped before it converted anything: starting again", target)
	}
	// A new volume: its options checked as for encrypt IN OUT, its sector
	// size fitted to the filesystem in the data, before any passphrase.
	size, err := vj.t.Size()
	if err != nil {
		return disk.WithKind(disk.KindInput, fmt.Errorf("%s: %w", target, err))
	}
	plan, err := disk.PlanFitted(volume.Format.(disk.Creator), o.Create, vj.fit(size))
	if err != nil {
		return err
	}
	vj.create = plan.Plan.(volume.CreateOptions)
	if vj.length, err = p.CheckVolume(vj.create); err != nil {
		return Error(target, err)
	}
	return nil
}

// fit is the sector-size choice of a new image whose plaintext is the
// target's size bytes.
func (j *job) fit(size int64) func(int) (int, error) {
	if j.o.FitSectorSize == nil {
		return nil
	}
	return func(def int) (int, error) { return j.o.FitSectorSize(j.t, size, def) }
}

func (vj *volumeJob) Resume() bool { return vj.p.Resume }

func (vj *volumeJob) Run(ctx context.Context, ask func(*disk.Need, error) (*disk.Secret, error)) (*disk.InPlaceResult, error) {
	if vj.o.Encrypt && !vj.p.Resume {
		return vj.encrypt(ctx, ask)
	}
	target := vj.o.Target
	started := false
	unlock := func(hs *volume.Headers) ([]byte, int, error) {
		need := &disk.Need{Passphrase: disk.WantRequired, Prompt: "the passphrase for " + target}
		var wrong error
		for {
			sec, err := vj.secret(ask, need, wrong)
			if err != nil {
				return nil, -1, err
			}
			if !started && !vj.o.Encrypt && !vj.p.Resume {
				vj.info("decrypting %s in place; if this is interrupted, run the same command again to resume", target)
			}
			started = true
			if vj.o.Progress != nil {
				vj.o.Progress("unlock", 0, hs.Header.DataLength)
			}
			key, slot, err := hs.UnlockWith(sec.Passphrase, volume.UnlockOptionsFor(ctx, vj.request(), target))
			sec.Wipe()
			if err == nil || !errors.Is(err, volume.ErrWrongPassphrase) || ctx.Err() != nil {
				return key, slot, err
			}
			wrong = volume.DiskError(target, err)
		}
	}
	opts := vj.options()
	if vj.o.Encrypt {
		res, err := vj.p.ResumeVolume(ctx, unlock, opts)
		return vj.result(vj.encrypted(res, err))
	}
	res, err := vj.p.DecryptVolume(ctx, unlock, opts)
	var dm *DigestMismatchError
	if errors.As(err, &dm) {
		// Every byte was converted: the check after failed.
		return &disk.InPlaceResult{Digest: res.Digest[:]}, disk.WithKind(disk.KindIntegrity,
			fmt.Errorf("%s: %w; it was decrypted all the same", target, err),
			"every sector's tag matched, yet the data is not what was encrypted: it was changed by someone with the volume key")
	}
	if err != nil {
		return vj.result(nil, err)
	}
	r := &disk.InPlaceResult{}
	if res.DigestComputed {
		r.Digest = res.Digest[:]
	}
	size := bytesize.Human(res.Length)
	switch {
	case res.AlreadyDone:
		r.Notes = []string{fmt.Sprintf("%s was already decrypted in place (the interrupted run had finished); removed what it left", target)}
	case res.DigestMatch:
		r.Notes = []string{fmt.Sprintf("decrypted %s in place (%s): every sector tag and the end-to-end digest verified", target, size)}
	case !res.DigestComputed:
		r.Notes = []string{fmt.Sprintf("decrypted %s in place (%s); the end-to-end digest was not computed (--digest none)", target, size)}
	default:
		r.Notes = []string{fmt.Sprintf("decrypted %s in place (%s); the end-to-end digest was not checked (none recorded, or the volume was written since)", target, size)}
	}
	return r, nil
}

// request is the unlock request of the options (every slot by default).
func (vj *volumeJob) request() *disk.Request {
	if vj.o.Request != nil {
		return vj.o.Request
	}
	return &disk.Request{Slot: -1}
}

// encrypt starts a new encryption into a volume, with a new passphrase.
func (vj *volumeJob) encrypt(ctx context.Context, ask func(*disk.Need, error) (*disk.Secret, error)) (*disk.InPlaceResult, error) {
	target := vj.o.Target
	sec, err := vj.secret(ask, &disk.Need{Passphrase: disk.WantRequired, Confirm: true, Prompt: "the new passphrase for " + target}, nil)
	if err != nil {
		return nil, err
	}
	defer sec.Wipe()
	create := vj.create
	create.Passphrase = sec.Passphrase
	if create.KDF, err = volume.NewSlotKDF(vj.o.Create.KDF); err != nil {
		return nil, err
	}
	vj.info("encrypting %s in place into a volume (%s of data); if this is interrupted, run the same command again to resume", target, bytesize.Human(vj.length))
	return vj.result(vj.encrypted(vj.p.EncryptVolume(ctx, create, vj.options())))
}

// encrypted is what an encryption into a volume tells the user.
func (vj *volumeJob) encrypted(res *VolumeResult, err error) (*disk.InPlaceResult, error) {
	if err != nil {
		return nil, err
	}
	target := vj.o.Target
	r := &disk.InPlaceResult{}
	if res.DigestComputed {
		r.Digest = res.Digest[:]
	} else {
		r.Notes = append(r.Notes, fmt.Sprintf("%s records no end-to-end digest (--digest none)", target))
	}
	h := &res.Header
	if res.AlreadyDone {
		r.Notes = append(r.Notes, fmt.Sprintf("%s was already encrypted in place (the interrupted run had finished); removed what it left", target))
	} else {
		r.Notes = append(r.Notes, fmt.Sprintf("encrypted %s in place (%s) into a volume: %s, UUID %s", target, bytesize.Human(res.Length), h.Summary(), h.UUIDString()))
	}
	return r, nil
}

type plainInPlacer struct{}

func (plainInPlacer) InPlaceInfo() disk.InPlaceInfo {
	return disk.InPlaceInfo{Takes: []string{"journal", "force"}, Secret: disk.Need{KeyFile: disk.WantRequired}}
}

// plainJob converts a plain image in place, its journal beside it.
type plainJob struct {
	*job
	p       plain.Mapping
	journal FileJournal
	plan    *Plan
	fresh   bool
}

func (plainInPlacer) PrepareInPlace(o *disk.InPlaceOptions) (disk.InPlaceJob, error) {
	opts := o.Options
	if o.Encrypt && o.Create != nil {
		opts = o.Create.Options
	}
	p, err := plain.ParamsOf(opts)
	if err != nil {
		return nil, err
	}
	j, err := openJob(o)
	if err != nil {
		return nil, err
	}
	pj := &plainJob{job: j, p: p}
	if err := pj.prepare(); err != nil {
		j.Close()
		return nil, err
	}
	return pj, nil
}

func (pj *plainJob) prepare() error {
	o, target := pj.o, pj.o.Target
	var err error
	if pj.journal, err = JournalFor(pj.t, o.Journal); err != nil {
		return Error(target, err)
	}
	// An interrupted run, or a new one, whose data must be whole sectors
	// (as encrypt and decrypt IN OUT require): said before the key is
	// read.
	if pj.plan, err = PreparePlain(pj.t, pj.journal, pj.p, pj.dir, o.Room); err != nil {
		return Error(target, err)
	}
	// A new run: none yet, or one whose journal says it finished the
	// other way (a resume keeps the sectors it started with).
	st := pj.plan.Status
	pj.fresh = st == nil || st.Finished && st.Direction != pj.dir
	if pj.dir == Encrypt && pj.fresh && o.FitSectorSize != nil {
		// Its sector size must suit the filesystem the data holds, as
		// for every new image (the default, 512, suits them all, so it
		// is never lowered here).
		size, err := pj.t.Size()
		if err != nil {
			return disk.WithKind(disk.KindInput, fmt.Errorf("%s: %w", target, err))
		}
		if _, err := o.FitSectorSize(pj.t, size, pj.p.Sector.Size); err != nil {
			return err
		}
	}
	return nil
}

func (pj *plainJob) Resume() bool { return pj.plan.Resume }

func (pj *plainJob) Run(ctx context.Context, ask func(*disk.Need, error) (*disk.Secret, error)) (*disk.InPlaceResult, error) {
	target, dir := pj.o.Target, pj.dir
	sec, err := pj.secret(ask, &disk.Need{KeyFile: disk.WantRequired}, nil)
	if err != nil {
		return nil, err
	}
	defer sec.Wipe()
	if len(sec.KeyFiles) != 1 {
		return nil, disk.WithKind(disk.KindUsage, errors.New("--type plain needs --key-file"), "make a key with: head -c 64 /dev/urandom > KEYFILE; chmod 600 KEYFILE")
	}
	key, name := sec.KeyFiles[0], "(unnamed)"
	if len(sec.KeyFileNames) > 0 {
		name = sec.KeyFileNames[0]
	}
	if err := plain.CheckKey(key, name); err != nil {
		return nil, err
	}
	verb := map[Direction]string{Encrypt: "encrypting", Decrypt: "decrypting"}[dir]
	done := map[Direction]string{Encrypt: "encrypted", Decrypt: "decrypted"}[dir]
	summary := plain.Summary(pj.p, 8*len(key))
	switch {
	case pj.fresh:
		pj.info("%s %s in place (%s); journal %s (keep it: it says how far the run got, then that it finished): if this is interrupted, run the same command again to resume",
			verb, target, summary, pj.journal.Path)
	case pj.plan.Resume:
		pj.info("%s: resuming the interrupted in-place %s (journal %s): %s", target, dir, pj.journal.Path, describeStatus(pj.plan.Status))
	}
	res, err := pj.plan.RunPlain(ctx, key, pj.options())
	if err != nil {
		return pj.result(nil, err)
	}
	if res.AlreadyDone {
		return &disk.InPlaceResult{Notes: []string{fmt.Sprintf("%s was %s in place already (its journal %s records the finished run): nothing was converted", target, done, pj.journal.Path)}}, nil
	}
	return &disk.InPlaceResult{Notes: []string{fmt.Sprintf("%s %s in place (%s, %d sectors): %s", done, target, bytesize.Human(res.Length), res.Length/int64(pj.p.Sector.Size), summary)}}, nil
}
