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

	"github.com/xtsctl/xtsctl/disk"
	"github.com/xtsctl/xtsctl/sector"
)

// A Request asks Open to serve an unlocked image as NAME.
type Request struct {
	Name string
	// Image is the image, opened by the caller, which checked it: every
	// later access goes through this file (as /proc/self/fd/N, and handed
	// to the server), so a path swapped since cannot change what is
	// served. Path is its absolute path, for the record and messages.
	Image *os.File
	Path  string
	// Unlocked is what to serve: the format's description of the
	// plaintext (its layout and key), from the one unlock the caller ran.
	// The caller wipes it.
	Unlocked *disk.Unlocked
	ReadOnly bool
	Mount    string // the real path of the directory to mount on, or ""
	// MountDir is that directory as CheckMountpoint checked it, held
	// open by the caller: the filesystem is mounted on it and nowhere
	// else. nil: Open checks Mount itself.
	MountDir *Mountpoint
	FSType   string // filesystem type for Mount; "" detects it
	// Recover re-tags, after an unclean shutdown, the sectors whose tags
	// do not match (accepting what they hold); otherwise they are only
	// reported (formats that check integrity).
	Recover bool
	Backend string // "fuse", "dm" or "auto"

	dev, ino uint64 // the image file's identity, from Image
}

// checkUnlocked checks what is to be served against the image: a layout
// that lies inside it, data the format can serve.
func checkUnlocked(req *Request) error {
	u := req.Unlocked
	if u == nil {
		return usageError(errors.New("nothing unlocked to serve"))
	}
	if u.Unservable != "" {
		return withKind(KindInput, fmt.Errorf("image %s: %s: %w", req.Path, u.Unservable, disk.ErrUnsupported))
	}
	size, err := imageSize(req.path())
	if err != nil {
		return withKind(KindInput, fmt.Errorf("image %s: %w", req.Path, err))
	}
	if err := u.Layout.Check(size); err != nil {
		return withKind(KindInput, fmt.Errorf("image %s: %w", req.Path, err))
	}
	if len(u.Key)*8 != u.Layout.KeyBits {
		return withKind(KindKey, fmt.Errorf("image %s: a %d-byte key for a %d-bit cipher key", req.Path, len(u.Key), u.Layout.KeyBits))
	}
	if u.Layout.ReadOnly != "" && !req.ReadOnly {
		return usageError(fmt.Errorf("image %s is served read-only: %s", req.Path, u.Layout.ReadOnly), "open it with --readonly")
	}
	return nil
}

// cipherOf describes what is served, for the record (status).
func cipherOf(u *disk.Unlocked) Cipher {
	l := u.Layout
	c := Cipher{Name: l.Cipher, KeyBits: l.KeyBits, SectorSize: l.SectorSize, Integrity: l.Integrity, TagSize: l.TagSize}
	for _, e := range l.Extents {
		if e.Kind == disk.Crypt {
			c.IVLargeSectors = e.Sector.IVMode == sector.Plain64LargeSectors
			c.IVOffset, c.DataOffset = e.Sector.IVOffset, e.Source
			break
		}
	}
	if c.Integrity == "" && u.Format == "volume" {
		c.Integrity = "none" // status has always said so for volumes without tags
	}
	return c
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

// Kind classifies an *Error for the command line's exit codes: the
// format layer's kinds, one set for every package.
type Kind = disk.Kind

const (
	KindFailure     = disk.KindFailure
	KindUsage       = disk.KindUsage
	KindInput       = disk.KindInput
	KindKey         = disk.KindKey
	KindIntegrity   = disk.KindIntegrity
	KindDevice      = disk.KindDevice
	KindInterrupted = disk.KindInterrupted
)

// An Error is a failure with its kind and hints (disk.Error).
type Error = disk.Error

// withKind marks err with a kind and hints.
func withKind(kind Kind, err error, hints ...string) error { return disk.WithKind(kind, err, hints...) }

func usageError(err error, hints ...string) error { return withKind(KindUsage, err, hints...) }

func kindOf(err error) Kind      { return disk.KindOf(err) }
func hintsOf(err error) []string { return disk.HintsOf(err) }

// imageError names the image in an error of serving it, keeping the
// kind a package gave it.
func imageError(image string, err error) error {
	switch {
	case errors.Is(err, disk.ErrInUse):
		return withKind(KindDevice, fmt.Errorf("image %s: %w", image, err), "it is open elsewhere ('xtsctl status' lists open volumes); close it first")
	case kindOf(err) != KindFailure:
		return err
	}
	return withKind(KindInput, fmt.Errorf("image %s: %w", image, err))
}
