// Package luksimage opens LUKS images on disk for package luks: the image
// (a file or block device) and a detached header file if there is one,
// locked the way every xtsctl process locks an image (volume.LockImage),
// their sizes found, the header read. It also opens header backups and
// changes keyslots in one transaction whose passphrases come from the
// caller.
//
// Package luks itself works on io.ReaderAt and io.WriterAt and knows
// nothing of files and locks; this package is where those meet, for the
// command line and any other caller (a server, a GUI).
package luksimage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/xtsctl/xtsctl/internal/safefile"
	"github.com/xtsctl/xtsctl/luks"
	"github.com/xtsctl/xtsctl/volume"
)

// Access says how Open opens the files and locks them.
type Access int

const (
	// Inspect reads without a lock (info, header backup).
	Inspect Access = iota
	// Read reads, with a shared lock on the image and on the header file:
	// an image open read-write, or being changed, is refused (decrypt).
	Read
	// WriteHeader locks the header device exclusively, read-write: an
	// image open at all is refused (keyslot changes, header restore). The
	// data device of a detached header is not opened.
	WriteHeader
)

// Problem names what is wrong with a file in a *FileError.
type Problem int

const (
	Missing   Problem = iota + 1 // the path does not exist
	Directory                    // the path is a directory
	NotImage                     // neither a regular file nor a block device
	InUse                        // another process holds a conflicting lock (errors.Is volume.ErrInUse)
	NoAccess                     // it cannot be examined, opened or read (Err says why)
)

// FileError is a problem with the image, the header file or a backup
// itself, before or instead of reading a LUKS header from it.
type FileError struct {
	Role    string // "image", "header file", "header backup"
	Path    string
	Problem Problem
	Err     error // the cause, for NoAccess and InUse
	msg     string
}

func (e *FileError) Error() string { return e.msg }

func (e *FileError) Unwrap() error { return e.Err }

// HeaderError is a LUKS header that could not be read from Path (the image,
// or the detached header file): Err is package luks's error (ErrNotLUKS, a
// *CorruptError, ...), which errors.Is and errors.As see.
type HeaderError struct {
	Path string
	Err  error
}

func (e *HeaderError) Error() string { return e.Path + ": " + e.Err.Error() }

func (e *HeaderError) Unwrap() error { return e.Err }

// CheckPath names what is wrong with path, the role one of an input (for
// messages: "image", "header file", "header backup"), before it is
// opened: missing, a directory, neither a regular file nor a block device.
// It returns nil or a *FileError.
func CheckPath(path, role string) error {
	_, err := safefile.CheckPath(path, role)
	if err == nil {
		return nil
	}
	fe := &FileError{Role: role, Path: path, msg: err.Error()}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		fe.Problem = Missing
	case errors.Is(err, safefile.ErrDirectory):
		fe.Problem = Directory
	case errors.Is(err, safefile.ErrNotImage), errors.Is(err, safefile.ErrPipe):
		fe.Problem = NotImage
	default:
		fe.Problem, fe.Err = NoAccess, errors.Unwrap(err)
	}
	return fe
}

// Image is a LUKS image opened by Open: its header, read from the image
// or from a detached header file, and the data device.
type Image struct {
	Path       string // the image as given
	HeaderPath string // where the header is: the detached header file, or Path
	Detached   bool

	Header     *luks.Header
	HeaderFile *os.File // the header device: the data device unless Detached
	HeaderSize int64
	Data       *os.File // the data device; nil under WriteHeader with a detached header
	DataSize   int64
	DataInfo   os.FileInfo // nil when Data is nil

	files []*os.File // what Close closes
}

// Close closes the files Open opened.
func (img *Image) Close() error {
	var errs []error
	for _, f := range img.files {
		errs = append(errs, f.Close())
	}
	img.files = nil
	return errors.Join(errs...)
}

// Open opens the LUKS image at path, with its header in the detached
// header file headerPath ("" when the header is in the image), as access
// says, and reads the header. The errors are *FileError (errors.Is
// volume.ErrInUse when the lock is held) and *HeaderError.
func Open(path, headerPath string, access Access) (*Image, error) {
	img := &Image{Path: path, HeaderPath: path}
	if headerPath != "" {
		img.HeaderPath, img.Detached = headerPath, true
	}
	var err error
	if !img.Detached || access != WriteHeader {
		if img.Data, img.DataSize, err = img.open(path, "image", access); err != nil {
			img.Close()
			return nil, err
		}
		img.DataInfo, _ = img.Data.Stat()
	}
	if err := img.readHeader(access); err != nil {
		img.Close()
		return nil, err
	}
	return img, nil
}

// OpenOn is Open for an image the caller has opened and locked already
// (data, of path): the header is read from it, or from the detached header
// file headerPath, which is opened without a lock. Close leaves data open.
func OpenOn(data *os.File, path, headerPath string) (*Image, error) {
	img := &Image{Path: path, HeaderPath: path, Data: data}
	if headerPath != "" {
		img.HeaderPath, img.Detached = headerPath, true
	}
	var err error
	if img.DataSize, err = size(data, path, "image"); err != nil {
		return nil, err
	}
	img.DataInfo, _ = data.Stat()
	if err := img.readHeader(Inspect); err != nil {
		img.Close()
		return nil, err
	}
	return img, nil
}

// readHeader opens the detached header file, if any, and reads the header.
func (img *Image) readHeader(access Access) error {
	if img.Detached {
		var err error
		if img.HeaderFile, img.HeaderSize, err = img.open(img.HeaderPath, "header file", access); err != nil {
			return err
		}
	} else {
		img.HeaderFile, img.HeaderSize = img.Data, img.DataSize
	}
	h, err := luks.ReadHeader(img.HeaderFile, img.HeaderSize)
	if err != nil {
		return &HeaderError{Path: img.HeaderPath, Err: err}
	}
	img.Header = h
	return nil
}

// open opens one of the image's files as access says and finds its size
// (block devices report 0 in Stat).
func (img *Image) open(path, role string, access Access) (*os.File, int64, error) {
	if err := CheckPath(path, role); err != nil {
		return nil, 0, err
	}
	var f *os.File
	var err error
	switch access {
	case Inspect:
		f, err = os.Open(path)
	case Read:
		f, err = volume.LockImage(path, true, 0)
	case WriteHeader:
		f, err = volume.LockImage(path, false, 0)
	}
	switch {
	case errors.Is(err, volume.ErrInUse):
		return nil, 0, &FileError{Role: role, Path: path, Problem: InUse, Err: err, msg: fmt.Sprintf("%s %s is in use", role, path)}
	case err != nil:
		return nil, 0, &FileError{Role: role, Path: path, Problem: NoAccess, Err: err, msg: fmt.Sprintf("cannot open %s %s: %v", role, path, err)}
	}
	img.files = append(img.files, f)
	n, err := size(f, path, role)
	return f, n, err
}

func size(f *os.File, path, role string) (int64, error) {
	n, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return 0, &FileError{Role: role, Path: path, Problem: NoAccess, Err: err, msg: fmt.Sprintf("cannot read %s %s: %v", role, path, err)}
	}
	return n, nil
}

// Unlock recovers the volume key with passphrase (luks.Header.Unlock on
// the header device), trying keyslots (nil: any, see CheckUnlock) within
// limits (nil: luks.DefaultLimits). The caller wipes the key.
func (img *Image) Unlock(ctx context.Context, passphrase []byte, keyslots []int, limits *luks.Limits) ([]byte, int, error) {
	return img.Header.Unlock(ctx, img.HeaderFile, passphrase, luks.UnlockOptions{Keyslots: keyslots, Limits: limits})
}

// IsLUKS reports whether the file at path holds a LUKS header, even one
// package luks cannot use (luks.Detect); false if it cannot be read.
func IsLUKS(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	n, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return false
	}
	return luks.Detect(f, n)
}

// Backup is a LUKS header backup file opened by OpenBackup.
type Backup struct {
	Path   string
	File   *os.File
	Size   int64
	Header *luks.Header
}

// Close closes the backup file.
func (b *Backup) Close() error { return b.File.Close() }

// OpenBackup opens a LUKS header backup (ours or cryptsetup
// luksHeaderBackup's) and reads its header, for luks.Restore. The errors
// are *FileError and *HeaderError.
func OpenBackup(path string) (*Backup, error) {
	const role = "header backup"
	if err := CheckPath(path, role); err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, &FileError{Role: role, Path: path, Problem: NoAccess, Err: err, msg: fmt.Sprintf("cannot read %s: %v", role, err)}
	}
	b := &Backup{Path: path, File: f}
	if b.Size, err = size(f, path, role); err != nil {
		f.Close()
		return nil, err
	}
	if b.Header, err = luks.ReadHeader(f, b.Size); err != nil {
		f.Close()
		return nil, &HeaderError{Path: path, Err: err}
	}
	return b, nil
}
