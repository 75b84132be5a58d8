package disk

import (
	"context"
	"io"
	"slices"
)

// In place: a target converted where it lies, resumably, from its
// plaintext into an image of a format (encrypt) or back (decrypt). The
// work, its journal and its crash safety belong to the package that
// provides the capability (package inplace, docs/INPLACE.md), which
// registers it for each format it converts; the command line runs one
// path for all of them: prepare (every check that needs no secret), ask
// for the secret the job names, run.

// An InPlacer converts targets in place for one format.
type InPlacer interface {
	// InPlaceInfo says what the conversion takes.
	InPlaceInfo() InPlaceInfo
	// PrepareInPlace opens the target (refusing one that is read-only,
	// mounted or in use), finds what an interrupted run left, and makes
	// every check that needs no secret. Nothing is changed. The caller
	// closes the job.
	PrepareInPlace(o *InPlaceOptions) (InPlaceJob, error)
}

// InPlaceInfo describes an InPlacer.
type InPlaceInfo struct {
	// Takes lists the in-place flags of the command line that apply:
	// "journal" (a journal file beside the target), "force" (skip the
	// guards that guess whether the target is converted already).
	Takes []string
	// Secret is what a run asks for (Passphrase, KeyFile), so that the
	// command line's secret flags are checked before anything is read.
	Secret Need
}

// InPlaceOptions are what an in-place run is asked to do.
type InPlaceOptions struct {
	Target  string // the image file or block device, as the user named it
	Encrypt bool   // encrypt the plaintext into an image; otherwise decrypt
	// Room is the number of bytes at the end of a block device that hold
	// no data and may be overwritten (cryptsetup's --reduce-device-size).
	Room int64
	// Journal is the journal file the user named; "" for the default.
	Journal string
	// Create describes the new image of an encryption, as for encrypt
	// IN OUT (its Options hold the format's options); Options are the
	// format's options of a decryption.
	Create  *CreateOptions
	Options Options
	// Request is the unlock request of a run that opens an existing
	// header (a resumed encryption, a decryption): slot, KDF bounds.
	Request *Request
	// Force skips the guards that guess from the data that the target is
	// converted already.
	Force bool
	// Digest: a decryption hashes the plaintext to check the recorded
	// end-to-end digest; an encryption records one (Create.Digest).
	// DigestGiven: the user chose (a resumed run keeps its own choice).
	Digest, DigestGiven bool
	// FitSectorSize chooses the sector size of a new image from the
	// filesystem in its plaintext (size bytes of r): def, or lower;
	// nil keeps def.
	FitSectorSize func(r io.ReaderAt, size int64, def int) (int, error)
	// Progress is told how far each phase got: "kdf" (a new key slot's
	// key derivation), "unlock" (deriving the key to resume or decrypt),
	// "hashing", "checking" (passes that only read), "converting".
	Progress func(phase string, done, total int64)
	// Info and Warn are messages for the user.
	Info, Warn func(format string, args ...any)
}

// An InPlaceJob is a prepared in-place run.
type InPlaceJob interface {
	// Resume says whether the job continues an interrupted run.
	Resume() bool
	// Run converts the target. It calls secret for the key when it needs
	// it, with what to ask for; after a wrong one, again with the error
	// (which wraps ErrWrongSecret), until secret fails. An error secret
	// returns is returned as it is.
	Run(ctx context.Context, secret func(need *Need, wrong error) (*Secret, error)) (*InPlaceResult, error)
	Close() error
}

// InPlaceResult says what a run did.
type InPlaceResult struct {
	// Digest is the plaintext's end-to-end digest, for the user (nil:
	// none computed). A decryption whose digest does not match returns it
	// with its error.
	Digest []byte
	// Notes are what to tell the user: the result, in words.
	Notes []string
}

// inPlacers are the in-place conversions, by format name.
var inPlacers = map[string]InPlacer{}

// RegisterInPlace makes ip the in-place conversion of format f.
func RegisterInPlace(f Format, ip InPlacer) {
	registry.Lock()
	defer registry.Unlock()
	inPlacers[f.Info().Name] = ip
}

// InPlacerOf is the in-place conversion of f, if it has one.
func InPlacerOf(f Format) (InPlacer, bool) {
	registry.RLock()
	defer registry.RUnlock()
	ip, ok := inPlacers[f.Info().Name]
	return ip, ok
}

// InPlaceTakes reports whether ip takes the in-place flag name.
func InPlaceTakes(ip InPlacer, name string) bool {
	return slices.Contains(ip.InPlaceInfo().Takes, name)
}

// PlanFitted is c.PlanCreate with the new image's sector size fitted by
// fit (the filesystem in the plaintext decides; nil keeps the format's):
// the options are checked first, then the format's sector size (its
// default, or the one asked for) goes through fit, and the plan is made
// again if fit lowered it.
func PlanFitted(c Creator, o *CreateOptions, fit func(def int) (int, error)) (*CreatePlan, error) {
	plan, err := c.PlanCreate(o)
	if err != nil || fit == nil {
		return plan, err
	}
	ss, err := fit(plan.SectorSize)
	if err != nil || ss == plan.SectorSize {
		return plan, err
	}
	o.SectorSize = ss
	if plan, err = c.PlanCreate(o); err == nil && plan.SectorSize != ss {
		// Only a default above 512 is lowered, and the formats with one
		// take CreateOptions.SectorSize.
		return nil, Errorf(KindFailure, "%s: the %s format did not take %d-byte sectors", o.Name, o.TypeName, ss)
	}
	return plan, err
}
