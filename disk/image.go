package disk

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/xtsctl/xtsctl/internal/imagelock"
	"github.com/xtsctl/xtsctl/internal/safefile"
)

// ErrInUse: another process holds the image (it is served, or being
// changed by another xtsctl command). Its kind is KindDevice.
var ErrInUse = imagelock.ErrInUse

// Access says how OpenImage opens and locks an image.
type Access int

const (
	// Inspect: read-only and unlocked (info, a check before serving).
	Inspect Access = iota
	// Read: read-only, with a shared lock (decrypt, verify).
	Read
	// WriteHeader: the header read-write, exclusively locked; a detached
	// header's data device is not opened (passphrase and header
	// commands).
	WriteHeader
	// Write: everything read-write, exclusively locked (in-place work).
	Write
)

// ImageOptions say which image to open and how.
type ImageOptions struct {
	Access Access
	// HeaderPath is a detached header (cryptsetup --header): the header
	// is read from it, the data from the image.
	HeaderPath string
}

// OpenImage opens the image at path (a regular file or a block device),
// and its detached header if there is one, as opt says. Errors name the
// file and are *Error: KindInput for a missing or unusable path,
// KindDevice (wrapping ErrInUse) for one in use.
func OpenImage(path string, opt ImageOptions) (*Image, error) {
	img := &Image{Path: path, Writable: opt.Access >= WriteHeader}
	var err error
	if opt.HeaderPath == "" || opt.Access != WriteHeader {
		if img.File, img.Size, err = openFile(path, "image", opt.Access); err != nil {
			return nil, err
		}
	}
	if opt.HeaderPath != "" {
		img.HeaderPath = opt.HeaderPath
		if img.HeaderFile, img.HeaderSize, err = openFile(opt.HeaderPath, "header file", opt.Access); err != nil {
			img.Close()
			return nil, err
		}
	}
	return img, nil
}

// OpenImageOn makes an Image of a file the caller opened and checked
// (open serves through that one descriptor), with a detached header
// opened for inspection.
func OpenImageOn(f *os.File, path, headerPath string) (*Image, error) {
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return nil, WithKind(KindInput, fmt.Errorf("cannot read image %s: %w", path, err))
	}
	img := &Image{Path: path, File: f, Size: size, borrowed: true}
	if headerPath != "" {
		img.HeaderPath = headerPath
		if img.HeaderFile, img.HeaderSize, err = openFile(headerPath, "header file", Inspect); err != nil {
			return nil, err
		}
	}
	return img, nil
}

// Close closes what OpenImage opened.
func (img *Image) Close() error {
	var errs []error
	if img.File != nil && !img.borrowed {
		errs = append(errs, img.File.Close())
	}
	if img.HeaderFile != nil {
		errs = append(errs, img.HeaderFile.Close())
	}
	img.File, img.HeaderFile = nil, nil
	return errors.Join(errs...)
}

// openFile checks path as role ("image", "header file"), opens it and
// finds its size.
func openFile(path, role string, access Access) (*os.File, int64, error) {
	if _, err := safefile.CheckPath(path, role); err != nil {
		return nil, 0, WithKind(KindInput, err)
	}
	var f *os.File
	var err error
	switch access {
	case Inspect:
		f, err = os.Open(path)
	case Read:
		f, err = imagelock.Open(path, true, 0)
	default:
		f, err = imagelock.Open(path, false, 0)
	}
	switch {
	case errors.Is(err, ErrInUse):
		how := "being changed by another xtsctl command, or open read-write"
		if access >= WriteHeader {
			how = "open, or being changed by another xtsctl command"
		}
		return nil, 0, WithKind(KindDevice, fmt.Errorf("%s %s is in use (%s): %w", role, path, how, ErrInUse),
			"xtsctl status lists open images; close it first")
	case errors.Is(err, syscall.EROFS):
		// This verb writes (a header, the data): say so, rather than
		// "open PATH: read-only file system".
		return nil, 0, WithKind(KindInput, fmt.Errorf("%s %s is on a read-only filesystem, and this writes to it", role, path),
			"copy it to a writable place, or remount the filesystem read-write")
	case err != nil:
		return nil, 0, WithKind(KindInput, fmt.Errorf("cannot open %s %s: %w", role, path, err))
	}
	n, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		f.Close()
		return nil, 0, WithKind(KindInput, fmt.Errorf("cannot read %s %s: %w", role, path, err))
	}
	return f, n, nil
}
