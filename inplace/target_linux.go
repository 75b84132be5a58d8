package inplace

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/xtsctl/xtsctl/internal/bytesize"
	"github.com/xtsctl/xtsctl/internal/loopdev"
	"github.com/xtsctl/xtsctl/volume"
	"golang.org/x/sys/unix"
)

// FileTarget is an image file or block device opened for an in-place run:
// locked the way every xtsctl process locks an image (volume.LockImage,
// exclusively), and, for a block device, opened O_EXCL, which the kernel
// refuses while the device is mounted or held by device-mapper.
type FileTarget struct {
	*os.File
	Path   string
	device bool
}

// Why OpenTarget refuses a target.
var (
	// ErrReadOnly: the target cannot be opened for writing.
	ErrReadOnly = errors.New("the target is read-only")
	// ErrBusy: the target is in use: mounted, attached to a loop device,
	// held by device-mapper, or open in xtsctl.
	ErrBusy = errors.New("the target is in use")
)

// BusyError says what holds the target.
type BusyError struct{ Why string }

func (e *BusyError) Error() string { return "the target is in use: " + e.Why }
func (e *BusyError) Unwrap() error { return ErrBusy }

// OpenTarget opens path for an in-place run, refusing (before anything is
// written) a target that is read-only, mounted, attached to a loop device,
// held by device-mapper or open in xtsctl.
func OpenTarget(path string) (*FileTarget, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	isDev := fi.Mode()&fs.ModeDevice != 0 && fi.Mode()&fs.ModeCharDevice == 0
	switch {
	case fi.IsDir():
		return nil, fmt.Errorf("%s is a directory, not an image", path)
	case !fi.Mode().IsRegular() && !isDev:
		return nil, fmt.Errorf("%s is not a regular file or block device", path)
	}
	if !isDev {
		if loops := loopsBackedBy(fi); len(loops) > 0 {
			return nil, &BusyError{Why: fmt.Sprintf("attached to %s (mounted, or open in xtsctl with the fuse backend)", strings.Join(loops, ", "))}
		}
	}
	flag := 0
	if isDev {
		flag = unix.O_EXCL
	}
	f, err := volume.LockImage(path, false, flag)
	switch {
	case errors.Is(err, volume.ErrInUse):
		return nil, &BusyError{Why: "it is open in xtsctl (xtsctl status lists open volumes), or being changed by another xtsctl command"}
	case errors.Is(err, unix.EBUSY):
		why := "held by device-mapper or another program"
		if mp := mountpointOf(fi); mp != "" {
			why = "mounted at " + mp
		}
		return nil, &BusyError{Why: why}
	case errors.Is(err, unix.EROFS), errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		return nil, fmt.Errorf("%w: %v", ErrReadOnly, err)
	case err != nil:
		return nil, err
	}
	if isDev {
		// A read-only block device (losetup -r, blockdev --setro) opens
		// for writing and fails the first write: ask it.
		if ro, err := unix.IoctlGetInt(int(f.Fd()), unix.BLKROGET); err == nil && ro != 0 {
			f.Close()
			return nil, fmt.Errorf("%w: the block device is set read-only", ErrReadOnly)
		}
	}
	return &FileTarget{File: f, Path: path, device: isDev}, nil
}

// Size is the current size of the file or device.
func (t *FileTarget) Size() (int64, error) { return t.File.Seek(0, io.SeekEnd) }

// Resizable: an image file.
func (t *FileTarget) Resizable() bool { return !t.device }

// Truncate sets the size of an image file, allocating what it adds so that
// a full filesystem is found now rather than half-way.
func (t *FileTarget) Truncate(size int64) error {
	if t.device {
		return errors.New("a block device cannot change size")
	}
	cur, err := t.Size()
	if err != nil {
		return err
	}
	if size > cur {
		err := unix.Fallocate(int(t.Fd()), 0, cur, size-cur)
		if err == nil {
			return nil
		}
		if !errors.Is(err, unix.EOPNOTSUPP) {
			return fmt.Errorf("cannot grow %s to %d bytes: %w", t.Path, size, err)
		}
	}
	return t.File.Truncate(size)
}

// Reserve allocates the bytes from the current end to size without
// changing the size (FALLOC_FL_KEEP_SIZE), where the filesystem can: a
// full filesystem is then found before anything changes.
func (t *FileTarget) Reserve(size int64) error {
	if t.device {
		return nil
	}
	cur, err := t.Size()
	if err != nil || size <= cur {
		return err
	}
	err = unix.Fallocate(int(t.Fd()), unix.FALLOC_FL_KEEP_SIZE, cur, size-cur)
	if errors.Is(err, unix.EOPNOTSUPP) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cannot reserve %d bytes for %s: %w", size-cur, t.Path, err)
	}
	return nil
}

// loopsBackedBy lists the loop devices whose backing file is fi, by its
// device and inode (a hard link of the file is the file).
func loopsBackedBy(fi fs.FileInfo) []string {
	devs, _ := loopdev.BackedByFile(fi)
	return devs
}

// mountpointOf names where the block device fi is mounted, from
// /proc/self/mountinfo ("" if it finds none).
func mountpointOf(fi fs.FileInfo) string {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	want := fmt.Sprintf("%d:%d", unix.Major(st.Rdev), unix.Minor(st.Rdev))
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		// ID parent MAJ:MIN root mountpoint ...
		fields := strings.Fields(s.Text())
		if len(fields) > 4 && fields[2] == want {
			return fields[4]
		}
	}
	return ""
}

// FileJournal is the journal of a plain run, a file at Path.
type FileJournal struct{ Path string }

// DefaultJournal is the journal of an image file: beside it, named after it.
func DefaultJournal(image string) string { return image + ".xtsctl-journal" }

type lockedFile struct{ *os.File }

// lockJournal takes the journal's lock: one run at a time per journal,
// whatever target it converts (the target has a lock of its own).
func lockJournal(f *os.File) error {
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) {
			return &BusyError{Why: "its journal " + f.Name() + " is in use by another xtsctl"}
		}
		return err
	}
	return nil
}

// Open opens the journal of a run and locks it. The lock is on the file
// that was opened; a run that replaced the journal meanwhile (Create) put
// another file at the path, so Open checks that the path still names the
// file it locked.
func (j FileJournal) Open() (JournalFile, error) {
	for range 3 {
		f, err := os.OpenFile(j.Path, os.O_RDWR, 0)
		if err != nil {
			return nil, err
		}
		if err := lockJournal(f); err != nil {
			f.Close()
			return nil, err
		}
		locked, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, err
		}
		now, err := os.Stat(j.Path)
		if err == nil && os.SameFile(locked, now) {
			return lockedFile{f}, nil
		}
		f.Close()
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	return nil, &BusyError{Why: "its journal " + j.Path + " keeps being replaced by another xtsctl"}
}

// Create writes a new journal under a temporary name, locked, syncs it
// and puts it in place, so that Open never finds one that is not
// complete: with replace over the journal the caller holds (open and
// locked, so no other run can be using it), otherwise only if there is
// none (RENAME_NOREPLACE, or a hard link where the filesystem lacks it):
// two runs that found no journal cannot both start.
func (j FileJournal) Create(size int64, init func(Device) error, replace bool) (JournalFile, error) {
	dir, base := filepath.Split(j.Path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, ".xtsctl-tmp-"+base+".")
	if err != nil {
		return nil, fmt.Errorf("cannot create the journal: %w", err)
	}
	fail := func(err error) (JournalFile, error) {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	if err := lockJournal(f); err != nil {
		return fail(err)
	}
	if err := unix.Fallocate(int(f.Fd()), 0, 0, size); err != nil && !errors.Is(err, unix.EOPNOTSUPP) {
		return fail(fmt.Errorf("cannot make the journal (%s): %w", bytesize.Human(size), err))
	}
	if err := f.Truncate(size); err != nil {
		return fail(err)
	}
	if err := init(f); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if replace {
		err = os.Rename(f.Name(), j.Path)
	} else {
		err = renameNoReplace(f.Name(), j.Path)
	}
	if errors.Is(err, fs.ErrExist) {
		return fail(&BusyError{Why: "its journal " + j.Path + " appeared while this run was starting: another xtsctl run uses it"})
	}
	if err != nil {
		return fail(err)
	}
	if err := syncDir(dir); err != nil {
		// The journal is in place and complete: a run found it if this
		// one stopped now. Only its directory entry may not be durable.
		f.Close()
		return nil, err
	}
	return lockedFile{f}, nil
}

// renameNoReplace renames from to to unless to exists (fs.ErrExist).
func renameNoReplace(from, to string) error {
	err := unix.Renameat2(unix.AT_FDCWD, from, unix.AT_FDCWD, to, unix.RENAME_NOREPLACE)
	if !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.ENOTSUP) {
		if errors.Is(err, unix.EEXIST) {
			return fs.ErrExist
		}
		return err
	}
	// No RENAME_NOREPLACE here: link(2) fails where the name exists.
	if err := os.Link(from, to); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fs.ErrExist
		}
		return err
	}
	return os.Remove(from)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
