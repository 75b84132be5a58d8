package devmapper

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

const controlPath = mapperDir + "/control"

// miscMajor is the character major of misc devices, /dev/mapper/control's.
const miscMajor = 10

// Available reports whether device-mapper can be used: nil, or an error
// wrapping ErrUnavailable that names what is missing.
func Available() error {
	return withClient(func(c *client) error {
		v, err := c.version()
		if err != nil {
			return fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		if v[0] != interfaceVersion[0] {
			return fmt.Errorf("%w: kernel speaks ioctl interface %d.%d.%d, we speak %d.x", ErrUnavailable, v[0], v[1], v[2], interfaceVersion[0])
		}
		return nil
	})
}

// Version returns the kernel's device-mapper ioctl interface version.
func Version() (major, minor, patch uint32, err error) {
	err = withClient(func(c *client) error {
		v, err := c.version()
		major, minor, patch = v[0], v[1], v[2]
		return err
	})
	return major, minor, patch, err
}

// CreateCrypt creates device name with the one crypt target t, activates it
// and returns its node, /dev/mapper/NAME. On failure nothing is left behind.
func CreateCrypt(name string, t *CryptTable) (devPath string, err error) {
	if err := CheckName(name); err != nil {
		return "", err
	}
	if err := t.Validate(); err != nil {
		return "", err
	}
	return createDevice(name, t.ReadOnly, []loadTarget{cryptTarget(t)})
}

func createDevice(name string, readOnly bool, targets []loadTarget) (devPath string, err error) {
	err = withClient(func(c *client) error {
		info, err := c.createDevice(name, uuidPrefix+name, readOnly, targets)
		if err != nil {
			return err
		}
		devPath, err = makeNode(mapperDir, name, info.Major, info.Minor)
		if err != nil {
			if _, rerr := c.remove(name); rerr != nil {
				err = errors.Join(err, fmt.Errorf("devmapper: undo the creation: %w", rerr))
			}
		}
		return err
	})
	return devPath, err
}

// Remove removes device name and its node. It fails with ErrBusy while the
// device is mounted or open, and with ErrNotFound if there is no such device.
func Remove(name string) error {
	if err := CheckName(name); err != nil {
		return err
	}
	return withClient(func(c *client) error {
		info, err := c.remove(name)
		if err != nil {
			return err
		}
		return removeNode(mapperDir, name, info.Major, info.Minor)
	})
}

// Status returns what the kernel reports about device name and the status of
// each target of its live table.
func Status(name string) (*DeviceStatus, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	var st DeviceStatus
	err := withClient(func(c *client) error {
		info, targets, err := c.tableStatus(name, false)
		st = DeviceStatus{Info: info, Targets: targets}
		return err
	})
	if err != nil {
		return nil, err
	}
	return &st, nil
}

// Table returns the live table of device name, one Target per line, with
// the hex digits of crypt keys replaced by 0. dmtable.ParseCrypt reads the
// parameters of a crypt target.
func Table(name string) ([]Target, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	var targets []Target
	err := withClient(func(c *client) error {
		var err error
		_, targets, err = c.tableStatus(name, true)
		return err
	})
	return targets, err
}

// withClient opens the control device for the duration of f.
func withClient(f func(c *client) error) error {
	ctl, err := openControl()
	if err != nil {
		return err
	}
	defer ctl.Close()
	return f(newClient(func(cmd uint32, buf []byte) error {
		for {
			_, _, errno := unix.Syscall(unix.SYS_IOCTL, ctl.Fd(), uintptr(cmd), uintptr(unsafe.Pointer(&buf[0])))
			if errno == unix.EINTR {
				continue
			}
			if errno != 0 {
				return errno
			}
			return nil
		}
	}))
}

// openControl opens /dev/mapper/control. If the node is missing while the
// kernel has device-mapper (no devtmpfs and no udev made it), it is created,
// as libdevmapper does.
func openControl() (*os.File, error) {
	f, err := os.OpenFile(controlPath, os.O_RDWR, 0)
	switch {
	case err == nil:
		return f, nil
	case errors.Is(err, fs.ErrPermission):
		return nil, fmt.Errorf("%w: %w (device-mapper needs root: CAP_SYS_ADMIN)", ErrUnavailable, err)
	case errors.Is(err, unix.ENODEV), errors.Is(err, unix.ENXIO):
		// A static node whose driver is not loaded and cannot be.
		return nil, fmt.Errorf("%w: %w (dm_mod not loaded; try modprobe dm_mod)", ErrUnavailable, err)
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	minor, ok := miscMinor("device-mapper")
	if !ok {
		if _, err := os.Stat("/sys/module/dm_mod"); err != nil {
			return nil, fmt.Errorf("%w: %s missing and dm_mod not loaded (try modprobe dm_mod)", ErrUnavailable, controlPath)
		}
		return nil, fmt.Errorf("%w: %s missing and the kernel lists no device-mapper in /proc/misc", ErrUnavailable, controlPath)
	}
	if err := os.MkdirAll(mapperDir, 0o755); err != nil {
		return nil, fmt.Errorf("%w: %s missing and cannot be created: %w", ErrUnavailable, controlPath, err)
	}
	err = unix.Mknod(controlPath, unix.S_IFCHR|0o600, int(unix.Mkdev(miscMajor, minor)))
	if err != nil && !errors.Is(err, unix.EEXIST) {
		return nil, fmt.Errorf("%w: %s missing and cannot be created: %w", ErrUnavailable, controlPath, err)
	}
	f, err = os.OpenFile(controlPath, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return f, nil
}

// miscMinor looks up the minor of a misc device in /proc/misc, whose lines
// are "MINOR NAME".
func miscMinor(name string) (uint32, bool) {
	f, err := os.Open("/proc/misc")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) == 2 && fields[1] == name {
			n, err := strconv.ParseUint(fields[0], 10, 32)
			return uint32(n), err == nil
		}
	}
	return 0, false
}

// makeNode makes dir/name (dir is mapperDir but in tests) the block device
// major:minor. A node that already is that device (udev was faster, or a
// symlink to /dev/dm-N) is kept; a stale node or link left by an earlier
// device is replaced.
func makeNode(dir, name string, major, minor uint32) (string, error) {
	path := dir + "/" + name
	dev := unix.Mkdev(major, minor)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("devmapper: create device node: %w", err)
	}
	var st unix.Stat_t
	if unix.Stat(path, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFBLK && st.Rdev == dev {
		return path, nil
	}
	if unix.Lstat(path, &st) == nil {
		if t := st.Mode & unix.S_IFMT; t != unix.S_IFBLK && t != unix.S_IFLNK {
			return "", fmt.Errorf("devmapper: create device node: %s exists and is not a device node", path)
		}
		if err := unix.Unlink(path); err != nil && !errors.Is(err, unix.ENOENT) {
			return "", fmt.Errorf("devmapper: replace stale device node: %w", err)
		}
	}
	if err := unix.Mknod(path, unix.S_IFBLK|0o600, int(dev)); err != nil {
		return "", fmt.Errorf("devmapper: create device node %s: %w", path, err)
	}
	return path, nil
}

// removeNode removes dir/name if it is the block device major:minor, or a
// link to it or to nothing; anything else there belongs to someone else and
// stays.
func removeNode(dir, name string, major, minor uint32) error {
	path := dir + "/" + name
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return nil // nothing there
	}
	t := st.Mode & unix.S_IFMT
	if t == unix.S_IFLNK {
		err := unix.Stat(path, &st)
		if err == nil && (st.Mode&unix.S_IFMT != unix.S_IFBLK || st.Rdev != unix.Mkdev(major, minor)) {
			return nil // points at something else that exists
		}
	} else if t != unix.S_IFBLK || st.Rdev != unix.Mkdev(major, minor) {
		return nil
	}
	if err := unix.Unlink(path); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("devmapper: remove device node: %w", err)
	}
	return nil
}
