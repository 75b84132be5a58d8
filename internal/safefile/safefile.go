// Package safefile writes output files so that nothing named like the
// output exists until it is complete: data goes to a temporary file in the
// same directory, which is synced and then renamed over the final name.
// An interrupted or failed run leaves no file under the final name (a killed
// process can leave only the hidden temporary file, never the output).
//
// Around that, CreateOutput decides what an output path is (a file to
// write that way, a stream to write through, or something to refuse) and
// OpenInput what an input path is (a file or block device of known size,
// or a stream).
package safefile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// ErrExists is returned (wrapped) when the output exists and overwriting
// was not asked for.
var ErrExists = errors.New("output already exists")

// File is an output being written. Write to it, then Commit or Abort.
type File struct {
	*os.File
	final     string
	overwrite bool
	done      bool
}

// TempPrefix starts the name of every temporary file, so that users (and
// tests) can recognise leftovers of a killed run.
const TempPrefix = ".xtsctl-tmp-"

// Create starts writing path. Unless overwrite is set, an existing path is
// an error wrapping ErrExists. The temporary file is created with mode perm.
func Create(path string, overwrite bool, perm fs.FileMode) (*File, error) {
	if fi, err := os.Lstat(path); err == nil {
		if !overwrite {
			return nil, fmt.Errorf("%s: %w (use --force to overwrite)", path, ErrExists)
		}
		if fi.IsDir() {
			return nil, fmt.Errorf("%s: is a directory", path)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, TempPrefix+base+".")
	if err != nil {
		return nil, fmt.Errorf("cannot create output in %s: %w", dir, unwrapPath(err))
	}
	if err := f.Chmod(perm); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	return &File{File: f, final: path, overwrite: overwrite}, nil
}

// FinalName is the name the output gets on Commit.
func (f *File) FinalName() string { return f.final }

// Commit syncs the data, moves the file to its final name and syncs the
// directory, so that the complete output survives a crash.
func (f *File) Commit() error {
	if f.done {
		return errors.New("safefile: Commit after Commit or Abort")
	}
	f.done = true
	tmp := f.Name()
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("cannot sync %s: %w", f.final, unwrapPath(err))
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("cannot write %s: %w", f.final, unwrapPath(err))
	}
	var err error
	if f.overwrite {
		err = os.Rename(tmp, f.final)
	} else {
		// Never replace a file that appeared while we were writing.
		err = unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, f.final, unix.RENAME_NOREPLACE)
		if errors.Is(err, unix.EEXIST) {
			err = fmt.Errorf("%w (created by someone else while writing)", ErrExists)
		}
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("cannot rename output to %s: %w", f.final, err)
	}
	return syncDir(filepath.Dir(f.final))
}

// Abort removes the temporary file. It is safe to call after Commit (it
// does nothing then), so callers can defer it.
func (f *File) Abort() {
	if f.done {
		return
	}
	f.done = true
	f.Close()
	os.Remove(f.Name())
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("cannot sync directory %s: %w", dir, err)
	}
	return nil
}

// unwrapPath drops the temporary file's name from *PathError messages: users
// should read about their output, not our temporary name.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
