//go:build linux

package loopdev

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

const controlPath = "/dev/loop-control"

// attachTries bounds the retries when another program configures the free
// device we were handed between LOOP_CTL_GET_FREE and LOOP_CONFIGURE.
const attachTries = 8

// Attach attaches file to a free loop device and returns it. The device
// stays attached while the returned Device is open, and after Close for as
// long as anything else (a mount, a device-mapper table) holds it.
func Attach(file string, opts Options) (*Device, error) {
	if err := opts.check(); err != nil {
		return nil, err
	}
	// Opened without the Go runtime's poller: os.OpenFile registers the
	// descriptor with epoll, which on a FUSE file sends FUSE_POLL to the
	// filesystem's server. That server is this very process when it serves
	// its own file (blockdev/fusefile, whose /dev/fd mount skips go-fuse's
	// poll hack); a FUSE_POLL it does not answer, while its queues start
	// or stop, holds the thread in the kernel for good, and the process
	// can then not even be killed (seen once in CI: a server in
	// request_wait_answer under epoll_ctl, its open waiting for ever).
	fd, err := unix.Open(file, fileMode(opts)|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("loopdev: %w", &os.PathError{Op: "open", Path: file, Err: err})
	}
	backing := os.NewFile(uintptr(fd), file) // blocking: never polled
	// The kernel takes its own reference to the file in LOOP_CONFIGURE.
	defer backing.Close()
	return AttachFile(backing, opts)
}

func fileMode(opts Options) int {
	if opts.ReadOnly {
		return os.O_RDONLY
	}
	return os.O_RDWR
}

// AttachFile is Attach for a file the caller opened (for reading, and for
// writing unless opts.ReadOnly); the caller may close it afterwards. The
// device keeps a reference to the caller's open file description, so a
// flock(2) taken on backing stays in force while the device is attached,
// even after backing is closed, and is released when the device lets go of
// the file: that is how an image stays locked against other writers while
// a device-mapper table on the device serves it.
func AttachFile(backing *os.File, opts Options) (*Device, error) {
	if err := opts.check(); err != nil {
		return nil, err
	}
	mode := fileMode(opts)
	// The kernel would quietly make the device read-only.
	if fl, err := unix.FcntlInt(backing.Fd(), unix.F_GETFL, 0); err == nil && !opts.ReadOnly && fl&unix.O_ACCMODE != unix.O_RDWR {
		return nil, fmt.Errorf("loopdev: %s is not open for reading and writing (attach it read-only)", backing.Name())
	}
	defer runtime.KeepAlive(backing) // its fd is in cfg until the ioctl is done
	ctl, err := os.OpenFile(controlPath, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("loopdev: loop devices are not available: %s missing (is the loop module loaded?): %w", controlPath, err)
	}
	if err != nil {
		return nil, fmt.Errorf("loopdev: %w", err)
	}
	defer ctl.Close()

	cfg := unix.LoopConfig{Fd: uint32(backing.Fd()), Size: opts.BlockSize}
	cfg.Info.Offset = opts.Offset
	cfg.Info.Sizelimit = opts.SizeLimit
	cfg.Info.Flags = unix.LO_FLAGS_AUTOCLEAR
	if opts.ReadOnly {
		cfg.Info.Flags |= unix.LO_FLAGS_READ_ONLY
	}
	if opts.DirectIO {
		cfg.Info.Flags |= unix.LO_FLAGS_DIRECT_IO
	}
	// lo_file_name is informational (LOOP_GET_STATUS64 shows it); the
	// kernel keeps at most 63 bytes of it.
	if abs, err := filepath.Abs(backing.Name()); err == nil {
		copy(cfg.Info.File_name[:len(cfg.Info.File_name)-1], abs)
	}

	for range attachTries {
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return nil, fmt.Errorf("loopdev: find a free loop device: %w", err)
		}
		path := fmt.Sprintf("/dev/loop%d", n)
		dev, err := os.OpenFile(path, mode, 0)
		if err != nil {
			return nil, fmt.Errorf("loopdev: %w", err)
		}
		err = unix.IoctlLoopConfigure(int(dev.Fd()), &cfg)
		if err == nil {
			d := &Device{Path: path, Number: n, f: dev, mode: mode}
			var st unix.Stat_t
			if err := unix.Fstat(int(dev.Fd()), &st); err != nil {
				d.Detach()
				return nil, fmt.Errorf("loopdev: stat %s: %w", path, err)
			}
			d.Major, d.Minor = unix.Major(st.Rdev), unix.Minor(st.Rdev)
			return d, nil
		}
		dev.Close()
		switch {
		case errors.Is(err, unix.EBUSY):
			continue // taken by someone else meanwhile: ask for another
		case errors.Is(err, unix.ENOTTY):
			return nil, fmt.Errorf("loopdev: configure %s: %w (LOOP_CONFIGURE needs Linux 5.8 or later)", path, err)
		}
		return nil, fmt.Errorf("loopdev: configure %s: %w", path, err)
	}
	return nil, fmt.Errorf("loopdev: no free loop device after %d tries: other programs keep taking them", attachTries)
}

// Close releases our handle on the device. The kernel detaches it as soon as
// nothing else holds it open, which is at once if nothing does.
func (d *Device) Close() error {
	if d.f == nil {
		return nil
	}
	err := d.f.Close()
	d.f = nil
	return err
}

// Detach detaches the file from the device and releases our handle. If a
// mount or a device-mapper table still holds the device, the kernel
// completes the detach when they let go.
func (d *Device) Detach() error {
	if d.f == nil {
		return nil
	}
	err := unix.IoctlSetInt(int(d.f.Fd()), unix.LOOP_CLR_FD, 0)
	if errors.Is(err, unix.ENXIO) {
		err = nil // already detached
	}
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("loopdev: detach %s: %w", d.Path, err)
	}
	return nil
}

// ErrBusy means that something besides us holds the loop device: a mount
// (perhaps in another mount namespace), a device-mapper table or another
// block device on it, or a program that has it open.
var ErrBusy = errors.New("the loop device is in use")

// Release lets go of the device as Close does and waits, up to wait, for
// the kernel to detach it, which it does (the device being auto-clearing)
// when its last user lets go: at once if that was us. If something else
// still holds it then, Release opens it again, so that it stays as it was,
// attached and ours, and returns ErrBusy: the caller can go on serving it.
// Short-lived holders (a blkid probe) are what the wait is for.
func (d *Device) Release(wait time.Duration) error {
	if d.f == nil {
		return nil
	}
	before, err := unix.IoctlLoopGetStatus64(int(d.f.Fd()))
	if err != nil {
		return fmt.Errorf("loopdev: status of %s: %w", d.Path, err)
	}
	if err := d.Close(); err != nil {
		return fmt.Errorf("loopdev: %w", err)
	}
	attached := fmt.Sprintf("/sys/block/loop%d/loop", d.Number)
	for deadline := time.Now().Add(wait); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(attached); errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if time.Now().After(deadline) {
			break
		}
	}
	f, err := os.OpenFile(d.Path, d.mode|unix.O_CLOEXEC, 0)
	if err != nil {
		// Detached meanwhile (ENXIO while it is torn down), or
		// beyond our reach: either way no longer ours to keep.
		if _, serr := os.Stat(attached); errors.Is(serr, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("loopdev: %s: %w, and it cannot be opened again: %v", d.Path, ErrBusy, err)
	}
	now, err := unix.IoctlLoopGetStatus64(int(f.Fd()))
	if err != nil || now.Device != before.Device || now.Inode != before.Inode {
		// Detached at the last moment (ENXIO), or already serving
		// another file: what we attached is gone.
		f.Close()
		return nil
	}
	d.f = f
	return fmt.Errorf("loopdev: %s: %w", d.Path, ErrBusy)
}

// BackedBy lists the loop devices (as /dev/loopN) whose backing file is
// file, as sysfs reports it. It finds what a program that died left
// attached.
func BackedBy(file string) ([]string, error) {
	files, err := filepath.Glob("/sys/block/loop*/loop/backing_file")
	if err != nil {
		return nil, err
	}
	var devs []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil || strings.TrimSuffix(string(b), "\n") != file {
			continue
		}
		devs = append(devs, "/dev/"+filepath.Base(filepath.Dir(filepath.Dir(f))))
	}
	return devs, nil
}

// BackedByFile lists the loop devices (as /dev/loopN) whose backing file
// is the file fi describes (from os.Stat or File.Stat), compared by device
// and inode number as LOOP_GET_STATUS64 reports them: another name of the
// file (a hard link, a path in another mount namespace, a name removed
// since the device was attached) is found too, where a comparison of the
// path sysfs shows is not. A device whose node cannot be opened is
// compared by that path.
func BackedByFile(fi fs.FileInfo) ([]string, error) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil, fmt.Errorf("loopdev: no device and inode number for %s", fi.Name())
	}
	files, err := filepath.Glob("/sys/block/loop*/loop/backing_file")
	if err != nil {
		return nil, err
	}
	var devs []string
	for _, f := range files {
		dev := "/dev/" + filepath.Base(filepath.Dir(filepath.Dir(f)))
		if sameBacking(dev, f, fi, st) {
			devs = append(devs, dev)
		}
	}
	return devs, nil
}

// sameBacking reports whether loop device dev (whose sysfs backing_file
// is sysfsFile) is backed by the file fi, with stat st. The path sysfs
// shows is compared first (by device and inode, so a hard link is found
// too); only where it names nothing (the name was removed, or lives in
// another mount namespace) is the device itself asked. Either may hang
// when the backing file hangs (a loop device on the FUSE file of a stuck
// server): the answer is waited for ioctlWait at most, and a device that
// does not answer is taken for another file's.
func sameBacking(dev, sysfsFile string, fi fs.FileInfo, st *syscall.Stat_t) bool {
	got := make(chan bool, 1)
	go func() { got <- compareBacking(dev, sysfsFile, fi, st) }()
	select {
	case same := <-got:
		return same
	case <-time.After(ioctlWait):
		return false
	}
}

func compareBacking(dev, sysfsFile string, fi fs.FileInfo, st *syscall.Stat_t) bool {
	if b, err := os.ReadFile(sysfsFile); err == nil {
		if bfi, err := os.Stat(strings.TrimSuffix(string(b), "\n")); err == nil {
			return os.SameFile(fi, bfi)
		}
	}
	f, err := os.OpenFile(dev, os.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	info, err := unix.IoctlLoopGetStatus64(int(f.Fd()))
	if err != nil {
		return false
	}
	// The kernel encodes lo_device as stat(2) encodes st_dev
	// (new_encode_dev); compare the numbers, not the encodings.
	return info.Inode == uint64(st.Ino) && unix.Major(info.Device) == unix.Major(uint64(st.Dev)) && unix.Minor(info.Device) == unix.Minor(uint64(st.Dev))
}

// ioctlWait bounds how long sameBacking waits for a loop device to answer.
const ioctlWait = 2 * time.Second

// DetachPath detaches the loop device at path (e.g. /dev/loop3) from its
// file; a device that is not attached is not an error. As with Detach,
// the kernel completes it once no mount or table holds the device.
func DetachPath(path string) error {
	f, err := os.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return fmt.Errorf("loopdev: %w", err)
	}
	d := &Device{Path: path, f: f}
	return d.Detach()
}
