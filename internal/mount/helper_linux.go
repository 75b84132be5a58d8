package mount

// Mounting through a FUSE program (ntfs-3g, exfat-fuse, ...) where the
// kernel has no driver for a filesystem.
//
// Such a program takes its mountpoint as a path and resolves it itself
// (libfuse calls realpath on it), so it cannot be handed the directory
// that was checked as a descriptor: /proc/self/fd/N would be turned back
// into a path that whoever owns a directory on the way can redirect. So it
// mounts on a staging directory that only root can reach (under xtsctl's
// run directory), and the mount is then moved onto the directory checked,
// through descriptors (open_tree and move_mount, or a bind mount on
// /proc/self/fd/N), and checked as MountAt checks its own: the path must
// lead to the new mount afterwards, else it is undone.
//
// The programs detach from the command that starts them once they have
// mounted (libfuse's fuse_daemonize, ntfs-3g's daemon(3)). The process
// that mounts is made a child subreaper, so the detached daemon becomes
// its child: it can be waited for, and close knows it has ended.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/xtsctl/xtsctl/internal/testhooks"
	"golang.org/x/sys/unix"
)

// HelperOptions are what MountFS needs to run a FUSE program.
type HelperOptions struct {
	// Staging is the directory the program mounts on first. It must be
	// reachable by root alone (every directory on the way root's and not
	// writable by others); MountFS creates it and removes it again.
	Staging string
	// Log receives what the program writes on its standard output and
	// error while it starts (why it failed, when it does).
	Log io.Writer
}

// helperStartTimeout bounds how long a FUSE program may take to mount (it
// reads the filesystem's metadata first; ntfs-3g replays nothing, but a
// large volume takes seconds).
const helperStartTimeout = 90 * time.Second

// MountFS mounts the filesystem fs on device over dir, a directory OpenDir
// opened at path, as MountAt does, and returns the new mount's ID. fs is a
// name Detect returns, a kernel type, or a FUSE program's name (DriverFor).
// The kernel's driver is used where the kernel has it; where it has not
// (ENODEV), or where fs names the FUSE program, that program mounts it
// (with hopt; nil: ErrNoHelpers) and MountFS returns it too: it serves the
// mount until the mount goes, and the caller waits for it then (Stop).
// Errors: *NoDriverError when neither can mount it, ErrHelperReadOnly for
// a read-write mount that the program does not do, ErrPathChanged as for
// MountAt.
func MountFS(device string, dir *os.File, path, fs string, flags Flags, hopt *HelperOptions) (uint64, *Helper, error) {
	d, known := DriverFor(fs)
	if !known {
		id, err := MountAt(device, dir, path, fs, flags)
		return id, nil, err
	}
	if d.Helper == "" || fs != d.Helper {
		id, err := MountAt(device, dir, path, d.Kernel, flags)
		if !errors.Is(err, unix.ENODEV) {
			return id, nil, err
		}
		if d.Helper == "" {
			return 0, nil, fmt.Errorf("mount %s (%s) on %s: %w", device, d.FS, path, &NoDriverError{Driver: d})
		}
	}
	return mountHelper(device, dir, path, d, flags, hopt)
}

// A Helper is the process of a FUSE program that serves a mount.
type Helper struct {
	Program string // its path
	PID     int    // the daemon's process ID; this process is its parent
	done    chan struct{}

	mu    sync.Mutex
	pidfd int // the daemon's pidfd (-1 once it is waited for): signals reach it and no process that reuses PID

}

// Done is closed when the process has ended (and been waited for).
func (h *Helper) Done() <-chan struct{} { return h.done }

// Stop waits up to grace for the program to end, which it does by itself
// once its mount is gone (unmounted everywhere); then it is sent SIGTERM
// and, if that does not end it either within 5 seconds, SIGKILL. It
// reports whether the program ended by itself, and fails if it has not
// ended at all.
func (h *Helper) Stop(grace time.Duration) (ended bool, err error) {
	if h == nil {
		return true, nil
	}
	select {
	case <-h.done:
		return true, nil
	case <-time.After(grace):
	}
	for _, sig := range []syscall.Signal{unix.SIGTERM, unix.SIGKILL} {
		h.signal(sig)
		select {
		case <-h.done:
			return false, nil
		case <-time.After(5 * time.Second):
		}
	}
	return false, fmt.Errorf("%s (pid %d) did not end, even on SIGKILL", filepath.Base(h.Program), h.PID)
}

// signal sends sig to the daemon, unless it has been waited for.
func (h *Helper) signal(sig syscall.Signal) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.pidfd >= 0 {
		unix.PidfdSendSignal(h.pidfd, sig, nil, 0)
	}
}

var subreaper struct {
	once sync.Once
	err  error
}

// becomeSubreaper makes this process the parent of the daemons its
// children leave behind (PR_SET_CHILD_SUBREAPER), so that it can wait for
// them. It applies to the whole process, for its lifetime.
func becomeSubreaper() error {
	subreaper.once.Do(func() {
		subreaper.err = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	})
	return subreaper.err
}

// children lists the processes whose parent is this process.
func children() map[int]bool {
	self := os.Getpid()
	out := map[int]bool{}
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + p.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may hold spaces and ')'.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) >= 2 && f[1] == strconv.Itoa(self) {
			out[pid] = true
		}
	}
	return out
}

// boundedBuffer keeps the last bytes written to it, for an error message.
type boundedBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - 2048; over > 0 {
		b.buf = b.buf[over:]
	}
	return len(p), nil
}

func (b *boundedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.TrimSpace(string(b.buf))
}

// mountHelper mounts through d's FUSE program (see the top of the file).
func mountHelper(device string, dir *os.File, path string, d Driver, flags Flags, hopt *HelperOptions) (id uint64, h *Helper, err error) {
	fail := func(err error) error { return fmt.Errorf("mount %s (%s) on %s: %w", device, d.FS, path, err) }
	readOnly := (flags.Super|flags.Mount)&unix.MS_RDONLY != 0
	prog, err := findHelper(d)
	switch {
	case err != nil:
		return 0, nil, fail(err)
	case hopt == nil:
		return 0, nil, fail(fmt.Errorf("the kernel has no %s driver, and %w", d.Kernel, ErrNoHelpers))
	case d.ReadOnly && !readOnly:
		return 0, nil, fail(fmt.Errorf("the kernel has no %s driver, and %w", d.Kernel, ErrHelperReadOnly))
	}
	if err := leadsTo(path, dir); err != nil {
		return 0, nil, fail(err)
	}
	if err := becomeSubreaper(); err != nil {
		return 0, nil, fail(fmt.Errorf("cannot wait for %s's daemon (PR_SET_CHILD_SUBREAPER): %w", d.Helper, err))
	}
	staging := hopt.Staging
	if err := checkRootOnly(filepath.Dir(staging)); err != nil {
		return 0, nil, fail(fmt.Errorf("staging directory %s: %w", staging, err))
	}
	// A staging directory left by a run that died is removed if it is
	// empty; one still mounted on (EBUSY) or holding files is refused.
	if err := os.Remove(staging); err != nil && !errors.Is(err, os.ErrNotExist) {
		return 0, nil, fail(fmt.Errorf("staging directory: %w", err))
	}
	if err := os.Mkdir(staging, 0o700); err != nil {
		return 0, nil, fail(fmt.Errorf("staging directory: %w", err))
	}
	parent, name, err := openParent(staging)
	if err != nil {
		os.Remove(staging)
		return 0, nil, fail(err)
	}
	defer parent.Close()

	h, err = startHelper(prog, d.args(device, staging, readOnly), hopt.Log)
	var stagedID uint64
	if err == nil {
		stagedID, err = stagedMount(parent, name, device)
	}
	if err == nil && readOnly {
		if m, _ := byID(stagedID); m == nil || (m.Flags.Mount|m.Flags.Super)&unix.MS_RDONLY == 0 {
			err = fmt.Errorf("%s mounted it read-write, asked for read-only", d.Helper)
		}
	}
	if err == nil {
		id, err = moveStaged(device, staging, dir, path)
	}
	// The staging mount goes whatever happened: the moved copy holds
	// the filesystem now, or nothing does and the program ends.
	if stagedID != 0 {
		if uerr := unmountID(staging, stagedID, unix.MNT_DETACH); uerr != nil && err == nil {
			err = uerr
		}
	}
	os.Remove(staging)
	if err != nil {
		if h != nil {
			if _, serr := h.Stop(5 * time.Second); serr != nil {
				err = fmt.Errorf("%w; and %v", err, serr)
			}
		}
		return 0, nil, fail(err)
	}
	return id, h, nil
}

// checkRootOnly makes sure that only root can change where path, an
// absolute path, leads: every directory on it is root's, and writable by
// others only where the sticky bit keeps them from renaming or removing
// root's entries (/tmp).
func checkRootOnly(path string) error {
	if !filepath.IsAbs(path) {
		return errors.New("not an absolute path")
	}
	for p := filepath.Clean(path); ; p = filepath.Dir(p) {
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		switch {
		case st.Mode&unix.S_IFMT != unix.S_IFDIR:
			return fmt.Errorf("%s is not a directory", p)
		case st.Uid != 0:
			return fmt.Errorf("%s belongs to user %d, not root", p, st.Uid)
		case st.Mode&0o022 != 0 && st.Mode&unix.S_ISVTX == 0:
			return fmt.Errorf("%s is writable by others", p)
		}
		if p == "/" {
			return nil
		}
	}
}

// startHelper runs prog with args and waits for the command to exit,
// which the FUSE programs do once they have mounted and detached; it
// returns the daemon they left, now this process's child. On error nothing
// of the program runs any more.
func startHelper(prog string, args []string, log io.Writer) (*Helper, error) {
	name := filepath.Base(prog)
	before := children()
	// Its output goes through a pipe of ours that is read to its end:
	// the daemon may keep writing after the command exited, and must
	// not be killed by SIGPIPE for it.
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	var out boundedBuffer
	copied := make(chan struct{})
	go func() {
		dst := io.Writer(&out)
		if log != nil {
			dst = io.MultiWriter(&out, log)
		}
		io.Copy(dst, r)
		r.Close()
		close(copied)
	}()
	cmd := exec.Command(prog, args...)
	cmd.Dir = "/"
	cmd.Stdout, cmd.Stderr = w, w
	if err := closeOnExec(); err != nil {
		w.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	err = cmd.Start()
	w.Close()
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err = <-exited:
	case <-time.After(helperStartTimeout):
		cmd.Process.Kill()
		<-exited
		err = fmt.Errorf("it did not finish mounting in %v", helperStartTimeout)
	}
	var daemons []int
	for pid := range children() {
		if !before[pid] {
			daemons = append(daemons, pid)
		}
	}
	if err == nil && len(daemons) != 1 {
		err = fmt.Errorf("it left %d processes behind, expected its one daemon", len(daemons))
	}
	if err == nil {
		if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", daemons[0])); exe != prog {
			err = fmt.Errorf("the process it left behind runs %q, not %s", exe, prog)
		}
	}
	var pidfd int
	if err == nil {
		// The daemon is our child and not waited for: its PID is its
		// own until reap, and the descriptor stays its own after.
		if pidfd, err = unix.PidfdOpen(daemons[0], 0); err != nil {
			err = fmt.Errorf("pidfd_open of its daemon: %w", err)
		}
	}
	if err != nil {
		for _, pid := range daemons {
			unix.Kill(pid, unix.SIGKILL)
			reap(pid)
		}
		select { // all its output, now that nothing of it runs
		case <-copied:
		case <-time.After(time.Second):
		}
		if msg := out.String(); msg != "" {
			return nil, fmt.Errorf("%s failed: %w: %s", name, err, msg)
		}
		return nil, fmt.Errorf("%s failed: %w", name, err)
	}
	h := &Helper{Program: prog, PID: daemons[0], pidfd: pidfd, done: make(chan struct{})}
	go func() {
		reap(h.PID)
		h.mu.Lock()
		unix.Close(h.pidfd)
		h.pidfd = -1
		h.mu.Unlock()
		close(h.done)
	}()
	return h, nil
}

// closeOnExec marks every descriptor of this process above standard
// error close-on-exec, so that the FUSE program inherits none but the
// three it is given. Go opens its files so, but not everything does:
// go-fuse opens /dev/fuse without it, and the descriptors a process was
// started with (the server's pipes, image and mountpoint) have it clear.
// Inherited by the program, which outlives this process by design, the
// server's /dev/fuse would keep its FUSE connection open after the server
// is gone, and every request to it (its loop device's I/O) would wait for
// ever. It changes nothing else: the flag only matters at exec.
func closeOnExec() error {
	err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	if !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EINVAL) {
		return err
	}
	// Before Linux 5.11: one by one.
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return err
	}
	for _, e := range fds {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd < 3 {
			continue
		}
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC); err != nil && !errors.Is(err, unix.EBADF) {
			return err
		}
	}
	return nil
}

// reap waits for this process's child pid to end.
func reap(pid int) {
	var ws unix.WaitStatus
	for {
		_, err := unix.Wait4(pid, &ws, 0, nil)
		if !errors.Is(err, unix.EINTR) {
			return
		}
	}
}

// stagedMount returns the ID of the FUSE mount of device at name in
// parent, the staging directory, where the program mounted it.
func stagedMount(parent *os.File, name, device string) (uint64, error) {
	id, err := topmost(parent, name)
	if err != nil {
		return 0, err
	}
	m, err := byID(id)
	switch {
	case err != nil:
		return 0, err
	case id == 0 || m == nil:
		return 0, errors.New("the FUSE program reported success but mounted nothing")
	case m.FSType != "fuse" && m.FSType != "fuseblk" && !strings.HasPrefix(m.FSType, "fuse."):
		return id, fmt.Errorf("the staging directory has a %s mount, not the FUSE program's", m.FSType)
	case m.Source != device:
		return id, fmt.Errorf("the FUSE mount names %s as its source, not %s", m.Source, device)
	}
	return id, nil
}

// moveStaged puts a copy of the mount at staging on dir, the directory
// checked at path, and returns its ID; the path must lead to dir before
// and to the new mount after (MountAt's checks), else nothing stays
// mounted there and the error is ErrPathChanged.
func moveStaged(device, staging string, dir *os.File, path string) (uint64, error) {
	if err := leadsTo(path, dir); err != nil {
		return 0, err
	}
	if hook := testhooks.BeforeMount; hook != nil {
		hook(path)
	}
	src, err := OpenDir(staging) // the root of the staged mount
	if err != nil {
		return 0, err
	}
	defer src.Close()
	var id uint64
	mfd := -1
	if useNewAPI {
		id, mfd, err = cloneOnto(src, dir)
	}
	if !useNewAPI || errors.Is(err, errNoNewAPI) {
		id, err = bindOnto(device, src, dir)
	}
	if err != nil {
		return 0, err
	}
	if err := keepIfAt(path, id, mfd); err != nil {
		return 0, err
	}
	return id, nil
}

// cloneOnto attaches a copy of the mount whose root src is onto dir
// (open_tree with OPEN_TREE_CLONE, move_mount) and returns its ID and a
// descriptor of it (the caller closes it).
func cloneOnto(src, dir *os.File) (uint64, int, error) {
	mfd, err := unix.OpenTree(int(src.Fd()), "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH)
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) {
		return 0, -1, errNoNewAPI
	}
	if err != nil {
		return 0, -1, err
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
		unix.Close(mfd) // a copy not attached goes with its descriptor
		return 0, -1, err
	}
	return stx.Mnt_id, mfd, nil
}

// bindOnto is cloneOnto with mount(2): a bind mount of src on
// /proc/self/fd/N of dir, found in mountinfo as mountOld finds its mount.
func bindOnto(device string, src, dir *os.File) (uint64, error) {
	return newMountOf(device, func() error {
		return unix.Mount(fmt.Sprintf("/proc/self/fd/%d", src.Fd()), fmt.Sprintf("/proc/self/fd/%d", dir.Fd()), "", unix.MS_BIND, "")
	})
}
