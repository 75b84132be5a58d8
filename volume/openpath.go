package volume

import (
	"io"
	"os"
)

// Opening an image by path for the commands that ask a user: the checks
// that need no passphrase come before it is asked for.

// OpenWithPassphrase opens the volume at path as OpenWith does, unlocked
// with the passphrase that passphrase returns and opts. It first reads
// the header copies without a lock and returns what makes the image
// unusable (ErrNotVolume, a *VersionError, a *HeadersDamagedError, a
// *TruncatedError, ...) before passphrase is called: nobody is asked for
// the passphrase of something that cannot be opened. The passphrase is
// wiped once tried; passphrase's errors are returned as they are.
func OpenWithPassphrase(path string, readOnly bool, passphrase func() ([]byte, error), opts UnlockOptions) (*Volume, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	size, err := f.Seek(0, io.SeekEnd)
	if err == nil {
		_, err = ReadHeaders(f, size)
	}
	f.Close()
	if err != nil {
		return nil, err
	}
	pass, err := passphrase()
	if err != nil {
		return nil, err
	}
	defer clear(pass)
	return OpenWith(path, readOnly, func(hs *Headers) ([]byte, int, error) { return hs.UnlockWith(pass, opts) })
}

// OpenForHeader opens the image at path read-write to rewrite its header
// (ChangeSlots, Restore), locked as a read-write Open locks it
// (LockImage): a volume that is open, served or being changed by another
// process is refused with ErrInUse rather than having its header
// rewritten underneath, and two rewrites never interleave. It returns the
// file, its size and what ReadHeaders found there.
//
// If the image cannot be opened, locked or sized, the file is nil and the
// error LockImage's (ErrInUse, or why it could not be opened). If
// ReadHeaders fails, the file comes back open, with its size and the
// error and Headers that ReadHeaders returned, since a header restore
// writes over headers that cannot be read; the caller closes it.
func OpenForHeader(path string) (*os.File, int64, *Headers, error) {
	f, err := LockImage(path, false, 0)
	if err != nil {
		return nil, 0, nil, err
	}
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		f.Close()
		return nil, 0, nil, err
	}
	hs, err := ReadHeaders(f, size)
	return f, size, hs, err
}
