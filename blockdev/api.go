package blockdev

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/xtsctl/xtsctl/blockdev/fusefile"
	"github.com/xtsctl/xtsctl/internal/imagelock"
	"golang.org/x/sys/unix"
)

// ServeCommand is the hidden command under which the program must call
// Serve: the FUSE backend starts its server by running this very binary
// (/proc/self/exe) with it.
const ServeCommand = "internal-serve"

// Open serves req, unlocked by the caller, as the block device NAME: it
// picks the backend, refuses a NAME or an image that is open already
// (cleaning up after servers that died, with a warning), serves, mounts
// when asked, and returns the record of what it did. A volume that was
// not closed cleanly is recovered first (State.Recovered says what was
// found) and a version-1 volume upgraded (State.Upgraded).
func Open(ctx context.Context, req *Request, opt Options) (*State, error) {
	a := &run{ctx: ctx, Options: opt}
	if err := CheckName(req.Name); err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(req.Image.Fd()), &st); err != nil {
		return nil, withKind(KindInput, fmt.Errorf("image %s: %w", req.Path, err))
	}
	req.dev, req.ino = st.Dev, st.Ino
	if err := checkWritable(req); err != nil {
		return nil, err
	}
	if req.Mount != "" || req.MountDir != nil {
		r := *req // the caller's request stays as it was
		if r.MountDir == nil {
			mp, err := CheckMountpoint(r.Mount)
			if err != nil {
				return nil, err
			}
			defer mp.Close()
			r.MountDir = mp
		}
		r.Mount = r.MountDir.Path
		req = &r
	}
	if err := checkUnlocked(req); err != nil {
		return nil, err
	}
	bname, b, err := pickBackend(req.Backend, req)
	if err != nil {
		return nil, err
	}
	unlock, err := lockRunDir()
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := checkNotOpen(a, req); err != nil {
		return nil, err
	}
	dir := stateDir(req.Name)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, withKind(KindDevice, fmt.Errorf("cannot create %s: %w", dir, err))
	}
	state, err := b.open(a, req)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	state.Backend = bname
	if state.Device != "" {
		link, err := makeLink(req.Name, state.Device)
		if err != nil {
			a.warningf("no stable name for %s: %v", state.Device, err)
		}
		state.Link = link
	}
	return state, nil
}

// CheckOpen runs the checks of Open that need no key, so that a caller
// can refuse before it asks for a passphrase and runs a key derivation:
// NAME is valid and free, the image is not open already (what dead
// servers left is cleaned up, with a warning, as Open does), and a
// read-write request is not for an image on a read-only filesystem or
// device. req needs Name, Image, Path and ReadOnly. Open checks all of it
// again, under the run directory's lock.
func CheckOpen(ctx context.Context, req *Request, opt Options) error {
	a := &run{ctx: ctx, Options: opt}
	if err := CheckName(req.Name); err != nil {
		return err
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(req.Image.Fd()), &st); err != nil {
		return withKind(KindInput, fmt.Errorf("image %s: %w", req.Path, err))
	}
	r := *req // the caller's request stays as it was
	r.dev, r.ino = st.Dev, st.Ino
	if err := checkWritable(&r); err != nil {
		return err
	}
	unlock, err := lockRunDir()
	if err != nil {
		return err
	}
	defer unlock()
	return checkNotOpen(a, &r)
}

// checkWritable refuses a read-write request for an image that cannot be
// written: on a read-only filesystem, or a read-only block device. It
// says so, and names -r, rather than failing later to open it for
// writing.
func checkWritable(req *Request) error {
	if req.ReadOnly {
		return nil
	}
	fd := int(req.Image.Fd())
	what := ""
	var fs unix.Statfs_t
	if err := unix.Fstatfs(fd, &fs); err == nil && fs.Flags&unix.ST_RDONLY != 0 {
		what = "is on a read-only filesystem"
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err == nil && st.Mode&unix.S_IFMT == unix.S_IFBLK {
		if ro, err := unix.IoctlGetInt(fd, unix.BLKROGET); err == nil && ro != 0 {
			what = "is a read-only block device"
		}
	}
	if what == "" {
		return nil
	}
	return withKind(KindInput, fmt.Errorf("image %s %s: it cannot be opened read-write", req.Path, what),
		"open it read-only: add -r (--read-only)")
}

// checkNotOpen refuses a NAME or an image that is already open, and cleans
// up after servers that died (with a warning). The caller holds the lock.
func checkNotOpen(a *run, req *Request) error {
	entries, err := listEntries()
	if err != nil {
		return withKind(KindDevice, fmt.Errorf("cannot read %s: %w", runDir(), err))
	}
	for _, e := range entries {
		b := backendOf(e)
		if !b.alive(e) {
			if err := removeStale(a, e); err != nil {
				return err
			}
			continue
		}
		if e.name == req.Name {
			what := "it"
			if e.state != nil {
				what = fmt.Sprintf("%s on %s", e.state.Image, e.state.Device)
			}
			return withKind(KindDevice, fmt.Errorf("%s is already open (%s)", req.Name, what),
				"close it first: xtsctl close "+req.Name)
		}
		if e.state != nil && e.state.ImageDev == req.dev && e.state.ImageIno == req.ino {
			return withKind(KindDevice, fmt.Errorf("image %s is already open as %s (%s)", req.Path, e.name, e.state.Device),
				"close it first: xtsctl close "+e.name)
		}
	}
	return nil
}

// removeStale cleans what a dead server left and removes its record.
func removeStale(a *run, e *entry) error {
	if err := backendOf(e).cleanup(a, e); err != nil {
		return withKind(KindDevice, fmt.Errorf("cannot clean up after %s: %w", e.name, err))
	}
	if e.state != nil {
		removeLink(e.name, e.state.Device)
	}
	if err := os.RemoveAll(stateDir(e.name)); err != nil {
		return withKind(KindDevice, err)
	}
	if e.state != nil && e.state.Backend == "dm" {
		a.warningf("%s was left open, but its device-mapper device is gone (removed by hand, or its open was interrupted); cleaned up", e.name)
		return nil
	}
	a.warningf("%s was left open by a server that died (%s); cleaned up", e.name, describeLeftovers(e))
	return nil
}

// WaitForDeadServer waits, a few seconds at most, for a server of image
// (the open file) that was killed a moment ago to let go of the image's
// lock: the kernel tears a dead process's io_uring down asynchronously,
// and its requests in flight keep the image open until then. Without the
// wait, unlocking the image again right after a crash would fail with
// "in use". Call it before unlocking.
func WaitForDeadServer(image *os.File) {
	var st unix.Stat_t
	if unix.Fstat(int(image.Fd()), &st) != nil {
		return
	}
	entries, err := listEntries()
	if err != nil {
		return
	}
	path := fmt.Sprintf("/proc/self/fd/%d", image.Fd())
	for _, e := range entries {
		if e.state == nil || e.state.ImageDev != st.Dev || e.state.ImageIno != st.Ino || backendOf(e).alive(e) {
			continue
		}
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			f, err := imagelock.Open(path, true, 0)
			if f != nil {
				f.Close()
			}
			if !errors.Is(err, imagelock.ErrInUse) {
				return
			}
		}
		return
	}
}

// Close undoes Open for NAME: unmounts what it mounted, releases the
// device, flushes, marks the image clean and stops serving; it returns the
// record of what was closed. If the filesystem or the device is busy,
// nothing changes. A NAME whose server died (or whose device-mapper device
// is gone) is cleaned up instead, with a warning, and its record returned.
func Close(ctx context.Context, name string, opt Options) (*State, error) {
	a := &run{ctx: ctx, Options: opt}
	if err := CheckName(name); err != nil {
		return nil, err
	}
	unlock, err := lockRunDir()
	if err != nil {
		return nil, err
	}
	defer unlock()
	e, err := readEntry(name)
	if errors.Is(err, ErrNotOpen) {
		return nil, withKind(KindUsage, fmt.Errorf("%s is not open", name), "'xtsctl status' lists open volumes")
	}
	if err != nil {
		return nil, withKind(KindDevice, err)
	}
	b := backendOf(e)
	if !b.alive(e) {
		return e.state, removeStale(a, e)
	}
	if e.state == nil {
		return nil, withKind(KindDevice, fmt.Errorf("%s is still being opened (server pid %d)", name, e.pid))
	}
	if err := b.close(a, e.state); err != nil {
		return nil, err
	}
	removeLink(name, e.state.Device)
	if err := os.RemoveAll(stateDir(name)); err != nil {
		return nil, withKind(KindDevice, err)
	}
	return e.state, nil
}

// Stats are the I/O counters of an image the fuse backend serves.
type Stats = fusefile.Stats

// Status is one open NAME as Status and List report it.
type Status struct {
	State               // zero but for Name while an image is being opened or its record was lost
	Condition string    `json:"state"` // "open", "opening", "dead", or "unreachable"
	Stats     *Stats    `json:"stats,omitempty"`
	DM        *DMStatus `json:"dm,omitempty"` // the dm backend's table, from the kernel
}

// A kernelStatuser is a backend whose device the kernel describes (dm).
type kernelStatuser interface {
	kernelStatus(st *State) (*DMStatus, error)
}

// StatusOf reports on NAME (ErrNotOpen if it is not open).
func StatusOf(name string, opt Options) (Status, error) {
	if err := CheckName(name); err != nil {
		return Status{}, err
	}
	e, err := readEntry(name)
	if err != nil {
		return Status{}, err
	}
	return statusOf(e, &run{Options: opt}), nil
}

// List reports on every open NAME, in order.
func List(opt Options) ([]Status, error) {
	entries, err := listEntries()
	if err != nil {
		return nil, withKind(KindDevice, fmt.Errorf("cannot read %s: %w", runDir(), err))
	}
	out := make([]Status, 0, len(entries))
	for _, e := range entries {
		out = append(out, statusOf(e, &run{Options: opt}))
	}
	return out, nil
}

func statusOf(e *entry, a *run) Status {
	vs := Status{State: State{Name: e.name}}
	if e.state != nil {
		vs.State = *e.state
		vs.Link = linkOf(e.name, e.state.Device)
	}
	b := backendOf(e)
	switch {
	case !b.alive(e):
		vs.Condition = "dead"
	case e.state == nil, e.state.Device == "": // dm records its device once made
		vs.Condition = "opening"
	default:
		vs.Condition = "open"
		stats, err := b.stats(e.state)
		if err != nil {
			vs.Condition = "unreachable"
			a.warningf("%s: cannot read counters: %v", e.name, err)
		}
		vs.Stats = stats
		if k, ok := b.(kernelStatuser); ok {
			dm, err := k.kernelStatus(e.state)
			if err != nil {
				vs.Condition = "unreachable"
				a.warningf("%s: cannot read the device-mapper table: %v", e.name, err)
			}
			vs.DM = dm
		}
	}
	return vs
}

// Available reports what this host lacks to serve images through the FUSE
// backend (root, /dev/fuse, loop devices), or nil.
func Available() error { return backends["fuse"].available() }

// NameOf returns the NAME of the open image that arg names, as close and
// status take it (as cryptsetup takes /dev/mapper/NAME): the NAME itself,
// the device open printed (/dev/loopN, /dev/mapper/NAME), its link
// /dev/xtsctl/NAME, or the directory it is mounted on. A path that is
// none of these for any open image is refused, saying so.
func NameOf(arg string) (string, error) {
	if nameRE.MatchString(arg) {
		if _, err := os.Stat(stateDir(arg)); err == nil {
			return arg, nil
		}
		// Taken as a path only when it is a directory or a block device
		// here: else the caller says NAME is not open.
		var st unix.Stat_t
		if err := unix.Stat(arg, &st); err != nil || (st.Mode&unix.S_IFMT != unix.S_IFDIR && st.Mode&unix.S_IFMT != unix.S_IFBLK) {
			return arg, nil
		}
	}
	if !strings.Contains(arg, "/") {
		if _, err := os.Lstat(arg); err != nil {
			return "", CheckName(arg)
		}
	}
	abs, err := filepath.Abs(arg)
	if err != nil {
		return "", usageError(err)
	}
	entries, err := listEntries()
	if err != nil {
		return "", withKind(KindDevice, fmt.Errorf("cannot read %s: %w", runDir(), err))
	}
	// As recorded: also for a server that died, whose device may be gone.
	for _, e := range entries {
		if s := e.state; s != nil && (abs == s.Device || abs == s.Mountpoint || abs == LinkPath(e.name)) {
			return e.name, nil
		}
	}
	var st unix.Stat_t
	if err := unix.Stat(abs, &st); err != nil {
		return "", usageError(fmt.Errorf("%s is not the NAME, device or mountpoint of an open image: %w", arg, err),
			"'xtsctl status' lists open images")
	}
	real, _ := filepath.EvalSymlinks(abs)
	for _, e := range entries {
		s := e.state
		if s == nil {
			continue
		}
		var dst unix.Stat_t
		if st.Mode&unix.S_IFMT == unix.S_IFBLK && s.Device != "" && unix.Stat(s.Device, &dst) == nil && dst.Rdev == st.Rdev {
			return e.name, nil
		}
		if st.Mode&unix.S_IFMT == unix.S_IFDIR && s.Mountpoint != "" && real == s.Mountpoint {
			return e.name, nil
		}
	}
	what := "a path"
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFBLK:
		what = "a block device"
	case unix.S_IFDIR:
		what = "a directory"
	}
	return "", usageError(fmt.Errorf("%s is %s, but not the device or mountpoint of an image xtsctl opened", arg, what),
		"'xtsctl status' lists open images with their devices and mountpoints")
}

// OpenImage opens the image to serve (Request.Image): every later access goes
// through this one open file (as /proc/self/fd/N, and handed to the
// server), so a path swapped after the checks cannot change what is
// unlocked and served.
func OpenImage(image string) (*os.File, string, error) {
	abs, err := filepath.Abs(image)
	if err != nil {
		return nil, "", withKind(KindInput, err)
	}
	img, err := os.Open(abs)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, "", withKind(KindInput, fmt.Errorf("image %s does not exist", image))
	case err != nil:
		return nil, "", withKind(KindInput, fmt.Errorf("cannot read image: %w", err))
	}
	fi, err := img.Stat()
	switch {
	case err != nil:
		err = withKind(KindInput, fmt.Errorf("cannot read image: %w", err))
	case fi.IsDir():
		err = withKind(KindInput, fmt.Errorf("image %s is a directory", image))
	case !fi.Mode().IsRegular() && fi.Mode()&fs.ModeDevice == 0:
		err = withKind(KindInput, fmt.Errorf("image %s is not a regular file or block device", image))
	}
	if err != nil {
		img.Close()
		return nil, "", err
	}
	return img, abs, nil
}
