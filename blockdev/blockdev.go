// Package blockdev serves unlocked images as block devices: it opens,
// closes and lists them, picks the backend (the kernel's dm-crypt on a
// loop device, or an xtsctl server that serves the plaintext through FUSE
// and a loop device, package fusefile), runs that background server and
// its control socket, keeps the run directory that records what is open,
// and recovers a volume that was not closed cleanly when it is opened.
//
// It takes plain requests (Request, Options) and reports failures as
// *Error values whose Kind the command line maps to exit codes; it prints
// nothing itself (warnings go to Options.Warn).
package blockdev

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/xtsctl/xtsctl/luks"
	"github.com/xtsctl/xtsctl/volume"
)

// Image types.
const (
	TypePlain  = "plain"  // cryptsetup plain mode: no header, a raw key
	TypeVolume = "volume" // an xtsctl volume
	TypeLUKS   = "luks"   // LUKS1 or LUKS2 (package luks): its data segment, served like a plain image
)

// A Request asks Open to serve an unlocked image as NAME.
type Request struct {
	Name string
	// Image is the image, opened by the caller, which checked it: every
	// later access goes through this file (as /proc/self/fd/N, and handed
	// to the server), so a path swapped since cannot change what is
	// served. Path is its absolute path, for the record and messages.
	Image  *os.File
	Path   string
	Type   string         // TypePlain, TypeVolume or TypeLUKS
	Plain  volume.Plain   // TypePlain: the mapping
	Header *volume.Header // TypeVolume: the unlocked volume's header
	// LUKS (TypeLUKS) is the image's LUKS header, read from the image or
	// from a detached header file (cryptsetup --header; Image is then the
	// data device). The data segment it describes is served.
	LUKS *luks.Header
	// Key is the XTS key of a plain image, the master key of a volume or
	// the volume key of a LUKS image (the caller unlocked it). The caller
	// wipes it.
	Key      []byte
	Cipher   Cipher // the encryption, for status
	ReadOnly bool
	Mount    string // the real path of the directory to mount on, or ""
	// MountDir is that directory as CheckMountpoint checked it, held
	// open by the caller: the filesystem is mounted on it and nowhere
	// else. nil: Open checks Mount itself.
	MountDir *Mountpoint
	FSType   string // filesystem type for Mount; "" detects it
	// Recover re-tags, after an unclean shutdown, the sectors whose tags
	// do not match (accepting what they hold); otherwise they are only
	// reported (volume.Volume.Recover).
	Recover bool
	Backend string // "fuse", "dm" or "auto"

	dev, ino uint64   // the image file's identity, from Image
	segment  *segment // TypeLUKS: the data segment, from LUKS (checkLUKS)
}

// checkLUKS checks a TypeLUKS request against its image and finds the data
// segment to serve: the header must be one package luks decrypts, the
// segment must lie in the image, and the key must have the header's size.
func checkLUKS(req *Request) error {
	if req.LUKS == nil {
		return usageError(errors.New("a LUKS image to open without its header"))
	}
	size, err := imageSize(req.path())
	if err != nil {
		return withKind(KindInput, fmt.Errorf("image %s: %w", req.Path, err))
	}
	off, n, err := req.LUKS.DataRange(size)
	if err != nil {
		return withKind(KindInput, fmt.Errorf("image %s: %w", req.Path, err))
	}
	if k := req.LUKS.KeySize; k != 0 && len(req.Key) != k {
		return withKind(KindKey, fmt.Errorf("image %s: a %d-byte key for a %d-byte volume key", req.Path, len(req.Key), k))
	}
	req.segment = &segment{Offset: off, Length: n, Sector: req.LUKS.SectorParams()}
	return nil
}

// path names the image through the file the caller checked.
func (r *Request) path() string { return fmt.Sprintf("/proc/self/fd/%d", r.Image.Fd()) }

// Options are the caller's side of an operation.
type Options struct {
	// Warn receives warnings for the user, one line each without a
	// prefix; nil discards them.
	Warn func(format string, args ...any)
}

// run is one operation: its context and options.
type run struct {
	ctx context.Context
	Options
}

func (r *run) warningf(format string, args ...any) {
	if r.Warn != nil {
		r.Warn(format, args...)
	}
}

// Kind classifies an *Error for the command line's exit codes.
type Kind int

const (
	KindFailure     Kind = iota // anything else: I/O error, internal error
	KindUsage                   // the request is wrong: a bad NAME, options that do not go together
	KindInput                   // the image is unusable: missing, unreadable, not what it claims to be
	KindKey                     // the key does not fit
	KindIntegrity               // the image failed an integrity check
	KindDevice                  // loop, FUSE, device-mapper or mount; busy; already open
	KindInterrupted             // stopped by a signal; nothing was left behind
)

// An Error is a failure of this package, with its kind and hints for the
// user (what they can do about it).
type Error struct {
	Kind  Kind
	Err   error
	Hints []string
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// withKind marks err with a kind and hints.
func withKind(kind Kind, err error, hints ...string) error {
	if err == nil {
		return nil
	}
	return &Error{Kind: kind, Err: err, Hints: hints}
}

func usageError(err error, hints ...string) error { return withKind(KindUsage, err, hints...) }

// kindOf returns err's kind: KindInterrupted for a cancelled context,
// KindFailure for an error without one.
func kindOf(err error) Kind {
	var e *Error
	switch {
	case errors.As(err, &e):
		return e.Kind
	case errors.Is(err, context.Canceled):
		return KindInterrupted
	}
	return KindFailure
}

func hintsOf(err error) []string {
	var e *Error
	if errors.As(err, &e) {
		return e.Hints
	}
	return nil
}

// imageError classifies an error from opening a volume or plain image
// with its key: the lock, the key check, the header.
func imageError(image string, err error) error {
	err = fmt.Errorf("image %s: %w", image, err)
	var (
		ve *volume.VersionError
		fe *volume.FeatureError
		hd *volume.HeadersDamagedError
	)
	switch {
	case errors.Is(err, volume.ErrInUse):
		return withKind(KindDevice, err, "it is open elsewhere ('xtsctl status' lists open volumes); close it first")
	case errors.Is(err, volume.ErrHeaderMAC), errors.As(err, &hd):
		return withKind(KindIntegrity, err)
	case errors.As(err, &ve), errors.As(err, &fe), errors.Is(err, volume.ErrNotVolume):
		return withKind(KindInput, err)
	}
	return withKind(KindInput, err)
}
