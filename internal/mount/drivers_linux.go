package mount

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// A Driver says how one filesystem is mounted: by the kernel's driver, or,
// where the kernel has none (a kernel built without it, no module to
// load), by a FUSE program that serves it from userspace.
type Driver struct {
	FS     string // the filesystem, as Detect names it
	Kernel string // the kernel's name of its driver (fsopen, /proc/filesystems)
	// Helper is the FUSE program that mounts it where the kernel cannot
	// ("": none), found in the system's program directories only;
	// Package is the Debian package that installs it ("": none does).
	Helper, Package string
	// ReadOnly: Helper is used for read-only mounts only, because it
	// cannot write (hfsfuse) or its writing is experimental (fusefat).
	ReadOnly bool
	// args are Helper's arguments to mount device on dir.
	args func(device, dir string, readOnly bool) []string
}

// helperArgs returns the arguments of a FUSE program that takes libfuse's
// -o options before the device and the directory; fsname makes mountinfo
// name the device as the mount's source (close and cleanup recognise
// their mounts by it), for the programs that do not say so themselves.
func helperArgs(fsname bool) func(device, dir string, readOnly bool) []string {
	return func(device, dir string, readOnly bool) []string {
		var opts []string
		if readOnly {
			opts = append(opts, "ro")
		}
		if fsname {
			opts = append(opts, "fsname="+device)
		}
		if len(opts) == 0 {
			return []string{device, dir}
		}
		return []string{"-o", strings.Join(opts, ","), device, dir}
	}
}

// drivers are the filesystems Detect knows; those with a FUSE program can
// be mounted where the kernel lacks the driver. Every program here mounts
// and then detaches (daemonizes), the mount done by the time the command
// it was started as exits.
var drivers = []Driver{
	{FS: FSExt4, Kernel: "ext4"},
	{FS: FSXFS, Kernel: "xfs"},
	{FS: FSBtrfs, Kernel: "btrfs"},
	{FS: FSSquashfs, Kernel: "squashfs"},
	{FS: FSEROFS, Kernel: "erofs"},
	{FS: FSNTFS, Kernel: "ntfs3", Helper: "ntfs-3g", Package: "ntfs-3g", args: helperArgs(false)},
	{FS: FSExFAT, Kernel: "exfat", Helper: "mount.exfat-fuse", Package: "exfat-fuse", args: helperArgs(false)},
	{FS: FSVFAT, Kernel: "vfat", Helper: "fusefat", Package: "fusefat", ReadOnly: true, args: helperArgs(true)},
	// hfsfuse is not packaged by Debian 12; it is used where installed.
	{FS: FSHFSPlus, Kernel: "hfsplus", Helper: "hfsfuse", ReadOnly: true, args: helperArgs(true)},
}

// DriverFor returns the driver of a filesystem named by Detect's name,
// the kernel's name of its driver, or its FUSE program's name.
func DriverFor(name string) (Driver, bool) {
	for _, d := range drivers {
		if name == d.FS || name == d.Kernel || d.Helper != "" && name == d.Helper {
			return d, true
		}
	}
	return Driver{}, false
}

// helperDirs are where FUSE programs are looked for: the system's program
// directories, never the caller's PATH (the program runs as root, and is
// given the device), as mount(8) looks for its helpers in /sbin alone.
var helperDirs = []string{"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"}

// findHelper returns the path of d's FUSE program, its symlinks resolved.
func findHelper(d Driver) (string, error) {
	for _, dir := range helperDirs {
		p := filepath.Join(dir, d.Helper)
		fi, err := os.Stat(p)
		if err != nil || !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0 {
			continue
		}
		if r, err := filepath.EvalSymlinks(p); err == nil {
			p = r
		}
		return p, nil
	}
	return "", &NoDriverError{Driver: d}
}

// HelperAvailable reports whether the FUSE program of the filesystem
// name (as DriverFor takes it) is installed.
func HelperAvailable(name string) bool {
	d, ok := DriverFor(name)
	if !ok || d.Helper == "" {
		return false
	}
	_, err := findHelper(d)
	return err == nil
}

// NoDriverError means that neither the kernel nor a FUSE program can
// mount a filesystem here: the kernel has no driver for it, and its FUSE
// program (if it has one) is not installed.
type NoDriverError struct{ Driver Driver }

func (e *NoDriverError) Error() string {
	d := e.Driver
	msg := fmt.Sprintf("the kernel has no %s driver (not built in, no module to load)", d.Kernel)
	if d.Kernel != d.FS {
		msg = fmt.Sprintf("the kernel has no %s driver for %s (not built in, no module to load)", d.Kernel, d.FS)
	}
	switch {
	case d.Helper == "":
		return msg + ", and no FUSE program for it is known"
	case d.Package == "":
		return fmt.Sprintf("%s, and its FUSE driver %s is not installed (no Debian 12 package has it)", msg, d.Helper)
	}
	return fmt.Sprintf("%s, and its FUSE driver %s is not installed (Debian package %s)", msg, d.Helper, d.Package)
}

// ErrHelperReadOnly: the FUSE program that would mount a filesystem is
// used for read-only mounts only (Driver.ReadOnly).
var ErrHelperReadOnly = errors.New("its FUSE driver mounts it read-only only")

// ErrNoHelpers: a FUSE program was needed, but the caller has nowhere to
// run one (MountFS without HelperOptions).
var ErrNoHelpers = errors.New("a FUSE driver cannot be run here")
