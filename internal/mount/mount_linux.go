// Package mount mounts and unmounts the filesystem on a block device and
// tells what is mounted where. It knows nothing of images or encryption.
//
// Paths are resolved so that whoever owns a directory on the way cannot
// redirect a mount or an unmount by swapping a directory for a symlink, or
// moving it, between a check and the mount(2) or umount2(2) that follows:
// a directory to mount on is opened once, following no symlink (OpenDir),
// and mounted on through that descriptor (MountAt); a mount is looked up
// and unmounted through its parent directory, opened the same way, and
// only if it is the mount the caller names by its ID (At, UnmountID).
//
// A filesystem the kernel has no driver for is mounted through its FUSE
// program where one is installed (MountFS; helper_linux.go says how that
// mount reaches the directory checked, and no other).
package mount

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/xtsctl/xtsctl/internal/testhooks"
	"golang.org/x/sys/unix"
)

// ErrPathChanged means that a path no longer leads where it led when it
// was checked: a directory on it was moved away or replaced (by a symlink,
// say), or something else is mounted there now.
var ErrPathChanged = errors.New("the path no longer leads to the directory that was checked")

// OpenDir opens the directory at path, which must be absolute, as an O_PATH
// descriptor, following no symlink anywhere on the way (openat2 with
// RESOLVE_NO_SYMLINKS; component by component, each O_NOFOLLOW, where
// openat2 is missing): a symlink on the path fails with ELOOP or ENOTDIR.
// Mounts on the way are crossed as usual: a path that is a mountpoint opens
// the root of the topmost mount there.
func OpenDir(path string) (*os.File, error) {
	if !filepath.IsAbs(path) {
		return nil, &os.PathError{Op: "open", Path: path, Err: errors.New("not an absolute path")}
	}
	fd, err := openDir(path)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}

// noOpenat2 makes openDir walk the path itself, as it does on kernels
// before 5.6 (openat2): for its tests.
var noOpenat2 bool

func openDir(path string) (int, error) {
	const flags = unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	if !noOpenat2 {
		how := unix.OpenHow{Flags: flags, Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
		fd, err := unix.Openat2(unix.AT_FDCWD, path, &how)
		if !errors.Is(err, unix.ENOSYS) {
			return fd, err
		}
	}
	fd, err := unix.Open("/", flags, 0)
	if err != nil {
		return -1, err
	}
	for name := range strings.SplitSeq(path, "/") {
		if name == "" || name == "." {
			continue
		}
		next, err := unix.Openat(fd, name, flags, 0)
		unix.Close(fd)
		if err != nil {
			return -1, err
		}
		fd = next
	}
	return fd, nil
}

// Info is one mount, as /proc/self/mountinfo describes it.
type Info struct {
	ID, Parent uint64 // mount IDs (statx's stx_mnt_id)
	Dev        uint64 // st_dev of the files in it (major:minor)
	Point      string // where it is mounted
	FSType     string
	Source     string // the device, named as it was when mounted
	Flags      Flags  // how it is mounted
	// Shared and Master are the peer groups it shares mount events
	// with and receives them from (0: none, a private mount): an
	// unmount of a mount it is a copy of may take it away too.
	Shared, Master uint64
}

// Flags say how a filesystem is mounted, in MS_ bits: Super for the
// filesystem (MS_RDONLY, MS_SYNCHRONOUS, MS_DIRSYNC, MS_LAZYTIME), Mount
// for the one mount (MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, the atime
// bits). The zero value mounts read-write with the kernel's defaults.
type Flags struct{ Super, Mount uintptr }

// ReadOnly mounts a filesystem read-only, as mount -o ro does.
var ReadOnly = Flags{Super: unix.MS_RDONLY, Mount: unix.MS_RDONLY}

// List returns the mounts of this process's mount namespace, in the
// kernel's order (a mount comes after the one it is mounted on).
func List() ([]Info, error) { return listFile("/proc/self/mountinfo") }

// ListPID is List for the mount namespace of process pid.
func ListPID(pid int) ([]Info, error) { return listFile(fmt.Sprintf("/proc/%d/mountinfo", pid)) }

func listFile(name string) ([]Info, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	var out []Info
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		// id parent major:minor root mountpoint options [optional...] - fstype source superoptions
		f := strings.Fields(string(line))
		sep := slices.Index(f, "-")
		if sep < 6 || sep+2 >= len(f) {
			continue
		}
		id, err1 := strconv.ParseUint(f[0], 10, 64)
		parent, err2 := strconv.ParseUint(f[1], 10, 64)
		major, minor, ok := strings.Cut(f[2], ":")
		maj, err3 := strconv.ParseUint(major, 10, 32)
		minr, err4 := strconv.ParseUint(minor, 10, 32)
		if err1 != nil || err2 != nil || err3 != nil || err4 != nil || !ok {
			continue
		}
		m := Info{
			ID: id, Parent: parent, Dev: unix.Mkdev(uint32(maj), uint32(minr)),
			Point: unescapeMountinfo(f[4]), FSType: unescapeMountinfo(f[sep+1]), Source: unescapeMountinfo(f[sep+2]),
		}
		m.Flags.Mount = mountFlags(f[5])
		for _, tag := range f[6:sep] {
			name, group, _ := strings.Cut(tag, ":")
			n, _ := strconv.ParseUint(group, 10, 64)
			switch name {
			case "shared":
				m.Shared = n
			case "master":
				m.Master = n
			}
		}
		if sep+3 < len(f) {
			m.Flags.Super = superFlags(f[sep+3])
		}
		out = append(out, m)
	}
	return out, nil
}

func mountFlags(opts string) uintptr {
	var fl uintptr = unix.MS_STRICTATIME // unless relatime or noatime says otherwise
	for o := range strings.SplitSeq(opts, ",") {
		switch o {
		case "ro":
			fl |= unix.MS_RDONLY
		case "nosuid":
			fl |= unix.MS_NOSUID
		case "nodev":
			fl |= unix.MS_NODEV
		case "noexec":
			fl |= unix.MS_NOEXEC
		case "nodiratime":
			fl |= unix.MS_NODIRATIME
		case "relatime":
			fl = fl&^unix.MS_STRICTATIME | unix.MS_RELATIME
		case "noatime":
			fl = fl&^unix.MS_STRICTATIME | unix.MS_NOATIME
		}
	}
	return fl
}

// superOptions are the filesystem flags Mount passes on, by their fsconfig
// names (which are also how mountinfo shows them).
var superOptions = []struct {
	bit  uintptr
	name string
}{{unix.MS_RDONLY, "ro"}, {unix.MS_SYNCHRONOUS, "sync"}, {unix.MS_DIRSYNC, "dirsync"}, {unix.MS_LAZYTIME, "lazytime"}}

func superFlags(opts string) uintptr {
	var fl uintptr
	for o := range strings.SplitSeq(opts, ",") {
		for _, so := range superOptions {
			if o == so.name {
				fl |= so.bit
			}
		}
	}
	return fl
}

// byID returns the mount whose ID is id, or nil.
func byID(id uint64) (*Info, error) {
	mounts, err := List()
	if err != nil {
		return nil, err
	}
	for i := range mounts {
		if mounts[i].ID == id {
			return &mounts[i], nil
		}
	}
	return nil, nil
}

// openParent opens the directory holding path (absolute, not "/") as
// OpenDir does, and returns it with path's last component.
func openParent(path string) (*os.File, string, error) {
	clean := filepath.Clean(path)
	if !filepath.IsAbs(clean) || clean == "/" {
		return nil, "", &os.PathError{Op: "open", Path: path, Err: errors.New("not an absolute path below /")}
	}
	parent, err := OpenDir(filepath.Dir(clean))
	return parent, filepath.Base(clean), err
}

// topmost returns the ID of the topmost mount at name in parent, or 0 if
// name is no mountpoint. name itself is never followed if it is a symlink.
func topmost(parent *os.File, name string) (uint64, error) {
	// Cached attributes will do (AT_STATX_DONT_SYNC): the type and the
	// mount ID are all that is asked, and a FUSE mount whose server died
	// answers nothing else.
	const flags = unix.AT_SYMLINK_NOFOLLOW | unix.AT_NO_AUTOMOUNT | unix.AT_STATX_DONT_SYNC
	var p, c unix.Statx_t
	if err := unix.Statx(int(parent.Fd()), "", unix.AT_EMPTY_PATH|flags, unix.STATX_MNT_ID, &p); err != nil {
		return 0, err
	}
	if p.Mask&unix.STATX_MNT_ID == 0 {
		return 0, errors.New("the kernel reports no mount IDs (statx STATX_MNT_ID needs Linux 5.8)")
	}
	err := unix.Statx(int(parent.Fd()), name, flags, unix.STATX_TYPE|unix.STATX_MNT_ID, &c)
	switch {
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR):
		return 0, err
	case err != nil:
		// The filesystem mounted there fails even that (a dead FUSE
		// server, a bad inode): mountinfo still knows what is there.
		return topmostListed(parent, name, p.Mnt_id)
	case c.Mask&unix.STATX_MNT_ID == 0:
		return 0, errors.New("the kernel reports no mount IDs (statx STATX_MNT_ID needs Linux 5.8)")
	case c.Mode&unix.S_IFMT != unix.S_IFDIR:
		return 0, unix.ENOTDIR
	case c.Mnt_id == p.Mnt_id:
		return 0, nil
	}
	return c.Mnt_id, nil
}

// topmostListed is topmost from mountinfo: the mounts stacked at name in
// parent, whose mount ID is parentID, the first on parent's mount, each
// next on the one before.
func topmostListed(parent *os.File, name string, parentID uint64) (uint64, error) {
	dir, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", parent.Fd()))
	if err != nil {
		return 0, err
	}
	point := filepath.Join(dir, name)
	mounts, err := List()
	if err != nil {
		return 0, err
	}
	id := parentID
	for found := true; found; {
		found = false
		for _, m := range mounts {
			if m.Parent == id && m.Point == point && m.ID != id {
				id, found = m.ID, true
				break
			}
		}
	}
	if id == parentID {
		return 0, nil
	}
	return id, nil
}

// At returns the topmost mount at path, looked up as OpenDir does (no
// symlink followed, path itself included), or nil if path is no mountpoint.
func At(path string) (*Info, error) {
	parent, name, err := openParent(path)
	if err != nil {
		return nil, err
	}
	defer parent.Close()
	id, err := topmost(parent, name)
	if err != nil || id == 0 {
		if err != nil {
			err = &os.PathError{Op: "statx", Path: path, Err: err}
		}
		return nil, err
	}
	m, err := byID(id)
	if err == nil && m == nil {
		err = fmt.Errorf("mount %d at %s is not in /proc/self/mountinfo", id, path)
	}
	return m, err
}

// Source returns the source (the device) of the topmost mount at dir (see
// At), or "" when nothing is mounted there or dir cannot be looked up.
func Source(dir string) string {
	m, err := At(dir)
	if err != nil || m == nil {
		return ""
	}
	return m.Source
}

// useNewAPI makes MountAt mount with fsopen, fsmount and move_mount (Linux
// 5.2); where the kernel or a seccomp filter refuses them, and in their
// tests, it mounts with mount(2) on /proc/self/fd/N of the directory.
var useNewAPI = true

// errNoNewAPI: fsopen is missing or forbidden here.
var errNoNewAPI = errors.New("no fsopen")

// MountAt mounts the filesystem of type fstype on device with flags over
// dir, a directory OpenDir opened at path, and returns the new mount's ID.
// The mount is made on dir itself, through its descriptor, never on what
// path leads to by then. path must still lead to dir before (by device and
// inode), and to the new mount after; otherwise nothing stays mounted and
// the error is ErrPathChanged, so that neither a directory swapped in on
// the way nor dir at another path gets the filesystem.
func MountAt(device string, dir *os.File, path, fstype string, flags Flags) (uint64, error) {
	fail := func(err error) error { return fmt.Errorf("mount %s (%s) on %s: %w", device, fstype, path, err) }
	if err := leadsTo(path, dir); err != nil {
		return 0, fail(err)
	}
	if hook := testhooks.BeforeMount; hook != nil {
		hook(path)
	}
	var id uint64
	mfd, err := -1, errNoNewAPI
	if useNewAPI {
		id, mfd, err = mountNew(device, dir, fstype, flags)
	}
	if errors.Is(err, errNoNewAPI) {
		id, err = mountOld(device, dir, fstype, flags)
	}
	if err != nil {
		return 0, fail(err)
	}
	if err := keepIfAt(path, id, mfd); err != nil {
		return 0, fail(err)
	}
	return id, nil
}

// leadsTo checks that path, looked up as OpenDir does, is dir.
func leadsTo(path string, dir *os.File) error {
	d, err := OpenDir(path)
	if err != nil {
		return fmt.Errorf("%w (%v)", ErrPathChanged, err)
	}
	defer d.Close()
	var a, b unix.Stat_t
	if err := unix.Fstat(int(d.Fd()), &a); err != nil {
		return err
	}
	if err := unix.Fstat(int(dir.Fd()), &b); err != nil {
		return err
	}
	if a.Dev != b.Dev || a.Ino != b.Ino {
		return ErrPathChanged
	}
	return nil
}

// mountNew mounts with the new mount API and returns the new mount's ID
// and a descriptor of it (the caller closes it); errNoNewAPI where fsopen
// is missing or forbidden.
func mountNew(device string, dir *os.File, fstype string, flags Flags) (id uint64, mfd int, err error) {
	fsfd, err := unix.Fsopen(fstype, unix.FSOPEN_CLOEXEC)
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) {
		return 0, -1, errNoNewAPI
	}
	if err != nil {
		return 0, -1, err
	}
	defer unix.Close(fsfd)
	err = unix.FsconfigSetString(fsfd, "source", device)
	for _, so := range superOptions {
		if err == nil && flags.Super&so.bit != 0 {
			err = unix.FsconfigSetFlag(fsfd, so.name)
		}
	}
	if err == nil {
		err = unix.FsconfigCreate(fsfd)
	}
	if err != nil {
		return 0, -1, withContextLog(fsfd, err)
	}
	mfd, err = unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC, mountAttrs(flags.Mount))
	if err != nil {
		return 0, -1, withContextLog(fsfd, err)
	}
	var stx unix.Statx_t
	err = unix.Statx(mfd, "", unix.AT_EMPTY_PATH, unix.STATX_MNT_ID, &stx)
	if err == nil && stx.Mask&unix.STATX_MNT_ID == 0 {
		err = errors.New("the kernel reports no mount IDs (statx STATX_MNT_ID needs Linux 5.8)")
	}
	if err == nil {
		err = unix.MoveMount(mfd, "", int(dir.Fd()), "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH)
	}
	if err != nil {
		unix.Close(mfd) // a mount not attached goes with its descriptor
		return 0, -1, err
	}
	return stx.Mnt_id, mfd, nil
}

// mountAttrs translates a mount's MS_ flags for fsmount.
func mountAttrs(fl uintptr) int {
	var attrs int
	for _, a := range []struct {
		ms   uintptr
		attr int
	}{
		{unix.MS_RDONLY, unix.MOUNT_ATTR_RDONLY}, {unix.MS_NOSUID, unix.MOUNT_ATTR_NOSUID},
		{unix.MS_NODEV, unix.MOUNT_ATTR_NODEV}, {unix.MS_NOEXEC, unix.MOUNT_ATTR_NOEXEC},
		{unix.MS_NODIRATIME, unix.MOUNT_ATTR_NODIRATIME},
	} {
		if fl&a.ms != 0 {
			attrs |= a.attr
		}
	}
	switch { // one atime mode; relatime is the default (0)
	case fl&unix.MS_NOATIME != 0:
		attrs |= unix.MOUNT_ATTR_NOATIME
	case fl&unix.MS_STRICTATIME != 0:
		attrs |= unix.MOUNT_ATTR_STRICTATIME
	}
	return attrs
}

// withContextLog adds what the filesystem said while setting up (its
// messages, read from the filesystem context) to err: they say why, where
// mount(2) leaves it to the kernel log.
func withContextLog(fsfd int, err error) error {
	var msgs []string
	buf := make([]byte, 1024)
	for range 16 {
		n, rerr := unix.Read(fsfd, buf)
		if rerr != nil || n <= 0 {
			break
		}
		m := strings.TrimSpace(string(buf[:n]))
		if len(m) > 2 && m[1] == ' ' { // "e ", "w " or "i "
			m = m[2:]
		}
		msgs = append(msgs, m)
	}
	if len(msgs) == 0 {
		return err
	}
	return fmt.Errorf("%w (%s)", err, strings.Join(msgs, "; "))
}

// keepIfAt keeps mount id if path leads to it, and otherwise takes it
// away again, lazily (no one was told of it), through the mount itself
// where fsmount gave a descriptor of it (mfd; -1 without), returning
// ErrPathChanged. mfd is closed either way.
func keepIfAt(path string, id uint64, mfd int) error {
	if m, err := At(path); err == nil && m != nil && m.ID == id {
		if mfd >= 0 {
			unix.Close(mfd)
		}
		return nil
	}
	var uerr error
	if mfd >= 0 {
		uerr = unix.Unmount(fmt.Sprintf("/proc/self/fd/%d", mfd), unix.MNT_DETACH)
		unix.Close(mfd)
	} else if m, err := byID(id); err != nil || m == nil {
		uerr = fmt.Errorf("mount %d is not in /proc/self/mountinfo", id)
	} else {
		uerr = unmountID(m.Point, id, unix.MNT_DETACH)
	}
	if uerr != nil {
		return fmt.Errorf("%w; and the mount made on the directory that was checked could not be undone: %v", ErrPathChanged, uerr)
	}
	return ErrPathChanged
}

// mountOld mounts with mount(2) on /proc/self/fd/N of dir, and finds the
// new mount's ID in mountinfo (newMountOf).
func mountOld(device string, dir *os.File, fstype string, flags Flags) (uint64, error) {
	return newMountOf(device, func() error {
		return unix.Mount(device, fmt.Sprintf("/proc/self/fd/%d", dir.Fd()), fstype, flags.Super|flags.Mount, "")
	})
}

// newMountOf runs mount, which mounts from device with mount(2), and
// returns the new mount's ID: the one from device in mountinfo that was
// not there before (mount(2) does not say).
func newMountOf(device string, mount func() error) (uint64, error) {
	before, err := List()
	if err != nil {
		return 0, err
	}
	if err := mount(); err != nil {
		return 0, err
	}
	after, err := List()
	if err != nil {
		return 0, err
	}
	seen := make(map[uint64]bool, len(before))
	for _, m := range before {
		seen[m.ID] = true
	}
	for i := len(after) - 1; i >= 0; i-- {
		if !seen[after[i].ID] && after[i].Source == device {
			return after[i].ID, nil
		}
	}
	return 0, errors.New("mounted, but the new mount is not in /proc/self/mountinfo")
}

// Mount mounts the filesystem of type fstype on device at dir, an absolute
// path looked up as OpenDir does (MountAt with the directory opened now).
func Mount(device, dir, fstype string, readOnly bool) error {
	d, err := OpenDir(dir)
	if err != nil {
		return fmt.Errorf("mount %s (%s) on %s: %w", device, fstype, dir, err)
	}
	defer d.Close()
	var flags Flags
	if readOnly {
		flags = ReadOnly
	}
	_, err = MountAt(device, d, dir, fstype, flags)
	return err
}

// ErrNotMounted: the mount to unmount is not (or no longer) the topmost at
// its path.
var ErrNotMounted = errors.New("not mounted there")

// UnmountID unmounts the mount whose ID is id at path and nothing else: it
// must be the topmost mount there, looked up as At does, and umount2 runs
// on that very directory, reached through its parent opened for the check
// (/proc/self/fd/N/name), so that a directory swapped on the path cannot
// redirect it. A busy filesystem is retried briefly (udev and blkid
// probes hold new devices open for a moment), then fails with EBUSY.
func UnmountID(path string, id uint64) error { return unmountID(path, id, 0) }

// DetachID is UnmountID with MNT_DETACH: a busy mount is taken out of the
// tree at once and goes when its last user lets go.
func DetachID(path string, id uint64) error { return unmountID(path, id, unix.MNT_DETACH) }

func unmountID(path string, id uint64, flags int) error {
	parent, name, err := openParent(path)
	if err != nil {
		return fmt.Errorf("unmount %s: %w", path, err)
	}
	defer parent.Close()
	target := fmt.Sprintf("/proc/self/fd/%d/%s", parent.Fd(), name)
	for range 50 {
		var top uint64
		if top, err = topmost(parent, name); err != nil {
			break
		}
		if top != id {
			err = ErrNotMounted
			break
		}
		err = unix.Unmount(target, unix.UMOUNT_NOFOLLOW|flags)
		if !errors.Is(err, unix.EBUSY) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("unmount %s: %w", path, err)
	}
	return nil
}

// Unmount unmounts the topmost mount at dir (At, UnmountID); EINVAL if
// nothing is mounted there.
func Unmount(dir string) error {
	m, err := At(dir)
	switch {
	case err != nil:
		return fmt.Errorf("unmount %s: %w", dir, err)
	case m == nil:
		return fmt.Errorf("unmount %s: %w (not a mountpoint)", dir, unix.EINVAL)
	}
	return UnmountID(dir, m.ID)
}

// unescapeMountinfo undoes the octal escapes (\040 for space, ...) the
// kernel puts in mountinfo paths.
func unescapeMountinfo(s string) string {
	if !bytes.ContainsRune([]byte(s), '\\') {
		return s
	}
	var out []byte
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v byte
			ok := true
			for _, c := range []byte(s[i+1 : i+4]) {
				if c < '0' || c > '7' {
					ok = false
					break
				}
				v = v*8 + (c - '0')
			}
			if ok {
				out = append(out, v)
				i += 3
				continue
			}
		}
		out = append(out, s[i])
	}
	return string(out)
}
