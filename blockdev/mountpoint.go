package blockdev

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/xtsctl/xtsctl/internal/mount"
	"golang.org/x/sys/unix"
)

// A Mountpoint is a directory to mount on, checked by CheckMountpoint and
// held open from then on: Open mounts on that very directory, through its
// descriptor, and refuses if Path no longer leads to it. Whoever owns a
// directory on the path can swap it for a symlink while the passphrase is
// asked for or the server starts; the mount still goes where the check
// looked, or nowhere.
type Mountpoint struct {
	// Path is the directory's real path (absolute, symlinks resolved):
	// what Request.Mount takes and the state records. close unmounts
	// what is mounted there, wherever a symlink on the way points by then.
	Path string
	// Occupied says the directory holds something, which mounting hides
	// until close (mount(8) says nothing of it).
	Occupied bool

	dir      *os.File // O_PATH, opened without following any symlink
	dev, ino uint64
}

// Close lets go of the directory.
func (m *Mountpoint) Close() error {
	if m == nil || m.dir == nil {
		return nil
	}
	return m.dir.Close()
}

// CheckMountpoint checks dir, where a Request is to mount its filesystem,
// before anything is unlocked, and holds it open until Close (which the
// caller defers; Open mounts on it meanwhile). Errors are *Error: KindUsage
// when dir does not exist or is not a directory, KindDevice when it cannot
// be examined or changed while it was checked.
func CheckMountpoint(dir string) (*Mountpoint, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, usageError(err)
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		abs = r
	}
	fi, err := os.Stat(abs)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, usageError(fmt.Errorf("mountpoint %s does not exist", dir), "create it: mkdir -p "+dir)
	case err != nil:
		return nil, withKind(KindDevice, err)
	case !fi.IsDir():
		return nil, usageError(fmt.Errorf("mountpoint %s is not a directory", dir))
	case abs == "/":
		return nil, usageError(errors.New("cannot mount on /"))
	}
	// The real path has no symlinks: one there now was swapped in.
	f, err := mount.OpenDir(abs)
	if err != nil {
		return nil, withKind(KindDevice, fmt.Errorf("mountpoint %s changed while it was checked: %w", dir, err))
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		f.Close()
		return nil, withKind(KindDevice, err)
	}
	m := &Mountpoint{Path: abs, dir: f, dev: st.Dev, ino: st.Ino}
	if fd, err := unix.Openat(int(f.Fd()), ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err == nil {
		d := os.NewFile(uintptr(fd), abs)
		names, _ := d.Readdirnames(1)
		d.Close()
		m.Occupied = len(names) > 0
	}
	return m, nil
}
