package blockdev

// A stable name for an open image's device, as /dev/mapper/NAME is for
// dm-crypt: the symlink /dev/xtsctl/NAME to the device open printed
// (/dev/loopN, or /dev/mapper/NAME for the dm backend). Open makes it;
// close, and the cleanup after a server that died, remove it.
//
// The link directory is trusted only when it is a real directory (not a
// symlink) owned by us and writable by nobody else; otherwise no link is
// made, with a warning. A link is made, replaced and removed only through
// that directory's descriptor, never through a path that could be
// swapped, and nothing that is not a symlink to the device we serve is
// ever replaced or removed.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// linkDir holds the links: /dev/xtsctl, or, when XTSCTL_RUNDIR moves the
// run directory (tests), .dev inside it (no NAME starts with a dot).
func linkDir() string {
	if os.Getenv("XTSCTL_RUNDIR") != "" {
		return filepath.Join(runDir(), ".dev")
	}
	return "/dev/xtsctl"
}

// LinkPath is the stable name of the device of NAME.
func LinkPath(name string) string { return filepath.Join(linkDir(), name) }

// openLinkDir opens the link directory, making it if create, and checks
// that it can be trusted.
func openLinkDir(create bool) (int, error) {
	dir := linkDir()
	if create {
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return -1, err
		}
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			return -1, fmt.Errorf("%s is not a directory", dir)
		}
		return -1, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if int(st.Uid) != os.Geteuid() || st.Mode&0o022 != 0 {
		unix.Close(fd)
		return -1, fmt.Errorf("%s is not ours (owner uid %d, mode %#o): someone else can write in it", dir, st.Uid, st.Mode&0o7777)
	}
	return fd, nil
}

// ourTarget reports whether a link's target is one that open makes for
// NAME: a loop device, or NAME's device-mapper device.
func ourTarget(name, target string) bool {
	if rest, ok := strings.CutPrefix(target, "/dev/loop"); ok && rest != "" && strings.Trim(rest, "0123456789") == "" {
		return true
	}
	return target == filepath.Join("/dev/mapper", name)
}

// makeLink points /dev/xtsctl/NAME at device. A symlink of ours left
// behind (a crash before close removed it: it points at a loop device or
// at NAME's device-mapper device, and NAME is free, which the caller
// checked under the run directory's lock) is replaced; anything else
// there is left alone and no link is made.
func makeLink(name, device string) (string, error) {
	fd, err := openLinkDir(true)
	if err != nil {
		return "", err
	}
	defer unix.Close(fd)
	err = unix.Symlinkat(device, fd, name)
	if errors.Is(err, unix.EEXIST) {
		old, rerr := readlinkat(fd, name)
		if rerr != nil || !ourTarget(name, old) {
			return "", fmt.Errorf("%s exists and is not a link xtsctl made", LinkPath(name))
		}
		// Replaced at once (rename), so the name never points elsewhere.
		tmp := "." + name + ".new"
		unix.Unlinkat(fd, tmp, 0)
		if err = unix.Symlinkat(device, fd, tmp); err == nil {
			if err = unix.Renameat(fd, tmp, fd, name); err != nil {
				unix.Unlinkat(fd, tmp, 0)
			}
		}
	}
	if err != nil {
		return "", err
	}
	return LinkPath(name), nil
}

// removeLink removes /dev/xtsctl/NAME if it is a symlink to device (what
// open made); anything else there is left alone.
func removeLink(name, device string) {
	if device == "" {
		return
	}
	fd, err := openLinkDir(false)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	if target, err := readlinkat(fd, name); err == nil && target == device {
		unix.Unlinkat(fd, name, 0)
	}
}

// linkOf is /dev/xtsctl/NAME if it points at device, else "".
func linkOf(name, device string) string {
	if device == "" {
		return ""
	}
	fd, err := openLinkDir(false)
	if err != nil {
		return ""
	}
	defer unix.Close(fd)
	if target, err := readlinkat(fd, name); err == nil && target == device {
		return LinkPath(name)
	}
	return ""
}

// readlinkat reads the symlink name in dirfd (EINVAL if it is none).
func readlinkat(dirfd int, name string) (string, error) {
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(dirfd, name, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}
