// Package safefile writes output files so that nothing named like the
// output exists until it is complete, and a dead process leaves nothing
// named at all: data goes to an unnamed file (O_TMPFILE) in the output's
// directory, which is synced and then linked in under its final name.
// Where the filesystem has no unnamed files (some FUSE, NFS and overlay
// setups), a hidden temporary file beside the output takes its place: it
// is named TempPrefix+name+".random", readable by its owner only, and
// removed on every exit the process controls (Abort, RemoveTemporaries);
// only SIGKILL or a crash can leave it.
//
// Around that, CreateOutput decides what an output path is (a file to
// write that way, a stream or an open descriptor to write through, or
// something to refuse) and OpenInput what an input path is (a file or
// block device of known size, or a stream).
package safefile

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"

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
	perm      fs.FileMode
	// tmp is the fallback's temporary name; "" for an unnamed file.
	tmp  string
	done bool
}

// TempPrefix starts the name of every temporary file, so that users (and
// tests) can recognise what a killed run left.
const TempPrefix = ".xtsctl-tmp-"

// Create starts writing path. Unless overwrite is set, an existing path is
// an error wrapping ErrExists. The output gets mode perm when it is
// committed; until then only its owner can read it.
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
	dir := filepath.Dir(path)
	f := &File{final: path, overwrite: overwrite, perm: perm}
	fd, err := openUnnamed(dir)
	if noUnnamedFiles(err) {
		fd, f.tmp, err = createTemp(dir, filepath.Base(path))
	}
	if err != nil {
		return nil, fmt.Errorf("cannot create output in %s: %w", dir, err)
	}
	// Named after the output, so that write errors name it.
	f.File = os.NewFile(uintptr(fd), path)
	return f, nil
}

// openUnnamed opens an unnamed file in dir (a variable, so that tests can
// take O_TMPFILE away).
var openUnnamed = func(dir string) (int, error) {
	return unix.Open(dir, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
}

// noUnnamedFiles recognises the errors of a filesystem or kernel without
// O_TMPFILE: EOPNOTSUPP from the filesystem, EISDIR from a kernel that
// sees only the O_DIRECTORY in O_TMPFILE, EINVAL from some others.
func noUnnamedFiles(err error) bool {
	return errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EISDIR) || errors.Is(err, unix.EINVAL)
}

// createTemp creates a new file named TempPrefix+base+".random" in dir,
// readable by its owner only, and records it for RemoveTemporaries.
func createTemp(dir, base string) (fd int, name string, err error) {
	for range 100 {
		name = tempName(dir, base)
		fd, err = unix.Open(name, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o600)
		if !errors.Is(err, unix.EEXIST) {
			break
		}
	}
	if err != nil {
		return -1, "", err
	}
	temporaries.add(name)
	return fd, name, nil
}

func tempName(dir, base string) string {
	var b [6]byte
	rand.Read(b[:])
	return filepath.Join(dir, TempPrefix+base+"."+hex.EncodeToString(b[:]))
}

// FinalName is the name the output gets on Commit.
func (f *File) FinalName() string { return f.final }

// Commit gives the output its mode, syncs it, gives it its final name and
// syncs the directory, so that the complete output survives a crash.
func (f *File) Commit() error {
	if f.done {
		return errors.New("safefile: Commit after Commit or Abort")
	}
	f.done = true
	if err := f.Chmod(f.perm); err != nil {
		f.discard()
		return fmt.Errorf("cannot set the mode of %s: %w", f.final, unwrapPath(err))
	}
	if err := f.Sync(); err != nil {
		f.discard()
		return fmt.Errorf("cannot sync %s: %w", f.final, unwrapPath(err))
	}
	var err error
	if f.tmp == "" {
		err = f.linkUnnamed()
		if cerr := f.Close(); err == nil && cerr != nil {
			// Synced and linked: the data is there whatever close says.
			err = fmt.Errorf("cannot close %s: %w", f.final, unwrapPath(cerr))
		}
	} else {
		err = f.renameTemp()
	}
	if err != nil {
		return err
	}
	return syncDir(filepath.Dir(f.final))
}

// linkUnnamed gives the unnamed file its final name. A new output is
// linked there directly. An output that replaces another is linked under
// a temporary name first and renamed over the old one, as no call links
// over an existing name: the data is complete and synced by then, so a
// crash between the two leaves the complete output under the temporary
// name, never partial data.
func (f *File) linkUnnamed() error {
	err := f.link(f.final)
	if err == nil {
		return nil
	}
	if !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("cannot link output to %s: %w", f.final, err)
	}
	if !f.overwrite {
		return fmt.Errorf("cannot link output to %s: %w (created by someone else while writing)", f.final, ErrExists)
	}
	var tmp string
	for range 100 {
		tmp = tempName(filepath.Dir(f.final), filepath.Base(f.final))
		if err = f.link(tmp); !errors.Is(err, unix.EEXIST) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("cannot link output beside %s: %w", f.final, err)
	}
	temporaries.add(tmp)
	defer temporaries.remove(tmp)
	if testHookLinked != nil {
		testHookLinked(tmp)
	}
	if err := os.Rename(tmp, f.final); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("cannot rename output to %s: %w", f.final, unwrapPath(err))
	}
	return nil
}

// testHookLinked, if set, is called with the temporary name an output
// that replaces another has before it is renamed.
var testHookLinked func(tmp string)

// link makes a name for the unnamed file. AT_EMPTY_PATH links the
// descriptor itself but needs CAP_DAC_READ_SEARCH (ENOENT without it);
// /proc/self/fd works for everyone where /proc is mounted.
func (f *File) link(name string) error {
	fd := int(f.Fd())
	err := unix.Linkat(fd, "", unix.AT_FDCWD, name, unix.AT_EMPTY_PATH)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EPERM) {
		err = unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd), unix.AT_FDCWD, name, unix.AT_SYMLINK_FOLLOW)
	}
	return err
}

// renameTemp moves the fallback's temporary file to the final name.
func (f *File) renameTemp() error {
	defer temporaries.remove(f.tmp)
	if err := f.Close(); err != nil {
		os.Remove(f.tmp)
		return fmt.Errorf("cannot write %s: %w", f.final, unwrapPath(err))
	}
	var err error
	if f.overwrite {
		err = os.Rename(f.tmp, f.final)
	} else {
		// Never replace a file that appeared while we were writing.
		err = renameNoReplace(f.tmp, f.final)
		if errors.Is(err, unix.EEXIST) {
			err = fmt.Errorf("%w (created by someone else while writing)", ErrExists)
		}
	}
	if err != nil {
		os.Remove(f.tmp)
		return fmt.Errorf("cannot rename output to %s: %w", f.final, unwrapPath(err))
	}
	return nil
}

// renameNoReplace renames from to to unless to exists (EEXIST). Where
// the filesystem has no RENAME_NOREPLACE (EINVAL), a hard link does the
// same; where it has no hard links either, a look before the rename
// leaves only a short race.
func renameNoReplace(from, to string) error {
	err := unix.Renameat2(unix.AT_FDCWD, from, unix.AT_FDCWD, to, unix.RENAME_NOREPLACE)
	if !errors.Is(err, unix.EINVAL) {
		return err
	}
	err = unix.Link(from, to)
	if err == nil || errors.Is(err, unix.EEXIST) {
		if err == nil {
			os.Remove(from)
		}
		return err
	}
	if _, err := os.Lstat(to); err == nil {
		return unix.EEXIST
	}
	return unix.Rename(from, to)
}

// Abort drops what was written: an unnamed file vanishes when closed, a
// temporary file is removed. It is safe to call after Commit (it does
// nothing then), so callers can defer it.
func (f *File) Abort() {
	if f.done {
		return
	}
	f.done = true
	f.discard()
}

func (f *File) discard() {
	f.Close()
	if f.tmp != "" {
		os.Remove(f.tmp)
		temporaries.remove(f.tmp)
	}
}

// temporaries holds the names of the temporary files this process has
// now, for RemoveTemporaries.
var temporaries = &tempSet{names: map[string]bool{}}

type tempSet struct {
	mu    sync.Mutex
	names map[string]bool
}

func (s *tempSet) add(name string) {
	s.mu.Lock()
	s.names[name] = true
	s.mu.Unlock()
}

func (s *tempSet) remove(name string) {
	s.mu.Lock()
	delete(s.names, name)
	s.mu.Unlock()
}

// RemoveTemporaries removes every temporary file this process still has
// under a name: a fallback file that was neither committed nor aborted.
// A command calls it on its way out, whatever way that is, so that only
// a process that dies without running it (SIGKILL, a crash) leaves one.
func RemoveTemporaries() {
	temporaries.mu.Lock()
	defer temporaries.mu.Unlock()
	for name := range temporaries.names {
		os.Remove(name)
		delete(temporaries.names, name)
	}
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

// unwrapPath drops the file's name from *PathError messages, which the
// caller's message names already.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
