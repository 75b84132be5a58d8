package blockdev

// Mounting and unmounting the filesystem on an open volume's device, for
// every backend: the FUSE server mounts on its loop device, the dm backend
// on /dev/mapper/NAME.
//
// Directories are never named twice by path: open mounts on the directory
// CheckMountpoint held open (internal/mount.MountAt), and close finds and
// unmounts the mount by its ID through the directory's parent
// (mount.UnmountID), so that swapping a directory on the path for a symlink
// redirects neither.
//
// close releases in the order that lets it refuse without changing
// anything: look for other users of the device (devicesInUse), unmount (a
// busy filesystem stays mounted), then let go of the device (one that is
// still held all the same gets its filesystem mounted back where it was),
// and only then flush, mark clean and stop serving.
//
// A filesystem the kernel has no driver for (NTFS, exFAT, FAT, HFS+ on a
// kernel built without them) is mounted through its FUSE program where the
// server can run one (fsHelpers; mount.MountFS): the program's daemon is
// the server's child, and close waits for it to end once the mount is gone.

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/xtsctl/xtsctl/disk"
	"github.com/xtsctl/xtsctl/internal/mount"
	"golang.org/x/sys/unix"
)

// fsHelpers is where a FUSE program that mounts a filesystem runs: the
// server's, which lives as long as the mount (the dm backend has none, and
// passes nil). helper is the program serving the mount, if one does.
type fsHelpers struct {
	staging string    // mount.HelperOptions.Staging
	log     io.Writer // the program's output
	logf    func(format string, args ...any)
	helper  *mount.Helper
}

// stagingDir is where the FUSE program of NAME's filesystem mounts before
// the mount is moved onto the mountpoint: under the run directory, which
// only root can reach, and outside NAME's state directory, which open
// removes with everything in it when it fails.
func stagingDir(name string) string { return filepath.Join(runDir(), ".mnt", name) }

// helperEndWait bounds how long close waits for a FUSE program to end by
// itself after its mount went (ntfs-3g writes the volume's state first).
const helperEndWait = 30 * time.Second

// mountFilesystem mounts the filesystem on device (serving image, of
// format typ) on mp and returns its type (fstype, or the type found on the device)
// and the ID of the new mount; a FUSE program that mounts it is hs.helper.
func mountFilesystem(image, typ, device string, mp *Mountpoint, fstype string, readOnly bool, hs *fsHelpers) (string, uint64, error) {
	if fstype == "" {
		var err error
		fstype, err = mount.Detect(device)
		if err != nil {
			return "", 0, withKind(KindDevice, err)
		}
		if fstype == "" {
			// A format that cannot tell a wrong key (plain mode)
			// decrypts to noise: no filesystem is first of all a sign
			// of a wrong one. mkfs would erase what the image holds.
			hints := []string{"pass --fstype if the filesystem is there but not recognised"}
			if f, ok := disk.Lookup(typ); ok && f.Info().WrongKeyHint != "" {
				hints = append([]string{f.Info().WrongKeyHint}, hints...)
			}
			hints = append(hints, "only for a new, empty image: open it without --mount and make a filesystem on the device (mkfs erases what the device holds)")
			return "", 0, withKind(KindDevice, fmt.Errorf("no filesystem found on %s (%s), nothing to mount", image, device), hints...)
		}
	}
	var flags mount.Flags
	if readOnly {
		flags = mount.ReadOnly
	}
	id, err := mountOn(device, mp.dir, mp.Path, fstype, flags, hs)
	return fstype, id, err
}

// mountOn mounts device's filesystem on dir, the directory checked at
// path (mount.MountFS: the kernel's driver, else the FUSE program, which
// becomes hs.helper), with an error for the user.
func mountOn(device string, dir *os.File, path, fstype string, flags mount.Flags, hs *fsHelpers) (uint64, error) {
	var hopt *mount.HelperOptions
	if hs != nil {
		hopt = &mount.HelperOptions{Staging: hs.staging, Log: hs.log}
	}
	id, h, err := mount.MountFS(device, dir, path, fstype, flags, hopt)
	var nd *mount.NoDriverError
	switch {
	case errors.As(err, &nd):
		d := nd.Driver
		var hints []string
		if d.Package != "" {
			hints = append(hints, "install "+d.Helper+": apt-get install "+d.Package)
		} else if d.Helper != "" {
			hints = append(hints, "install "+d.Helper+" (build it from its source), or use a kernel with the "+d.Kernel+" driver")
		}
		hints = append(hints, "or open it without --mount and read the device with a tool that knows "+d.FS)
		return 0, withKind(KindDevice, err, hints...)
	case errors.Is(err, mount.ErrHelperReadOnly):
		return 0, withKind(KindDevice, err, "open it with --readonly, or open it without --mount and mount the device yourself")
	case errors.Is(err, mount.ErrNoHelpers):
		return 0, withKind(KindDevice, err, "the fuse backend runs FUSE drivers: open it with --backend fuse")
	case errors.Is(err, mount.ErrPathChanged):
		return 0, withKind(KindDevice, err,
			"a directory on the way to "+path+" was moved or replaced (by a symlink?) after it was checked; nothing was mounted: check the path, then open again")
	case err != nil:
		return 0, withKind(KindDevice, err, "the kernel log (dmesg) may say more")
	}
	if h != nil {
		hs.helper = h
	}
	return id, nil
}

// helperPID is the process ID of the FUSE program serving hs's mount, or 0.
func (hs *fsHelpers) helperPID() int {
	if hs == nil || hs.helper == nil {
		return 0
	}
	return hs.helper.PID
}

// endHelper waits for the FUSE program whose mount is gone to end.
func (hs *fsHelpers) endHelper() error {
	if hs == nil || hs.helper == nil {
		return nil
	}
	h := hs.helper
	ended, err := h.Stop(helperEndWait)
	if err != nil {
		return withKind(KindDevice, err)
	}
	hs.helper = nil
	if !ended && hs.logf != nil {
		hs.logf("warning: %s (pid %d) did not end within %v of the unmount: stopped it", filepath.Base(h.Program), h.PID, helperEndWait)
	}
	return nil
}

// unmountForClose unmounts, for close, the filesystem that open mounted
// from device at dir (the real path it recorded), and returns that mount
// (nil if nothing of ours is mounted there, which is not an error: someone
// unmounted it already). It refuses, changing nothing, when the device is
// in use by more than that one mount: mounted elsewhere too, or under
// another block device (devicesInUse); when something else is mounted over
// ours at dir; and when the filesystem is busy, which it finds out from
// umount2 itself (no MNT_DETACH, no MNT_FORCE), so that nothing in use ever
// loses its filesystem. What it unmounted, remountAfter puts back.
func unmountForClose(dir, device string, hs *fsHelpers) (*mount.Info, error) {
	var m *mount.Info
	if dir != "" {
		// A path that cannot be looked up any more (a directory on
		// it moved or swapped for a symlink) has nothing of ours at
		// it; devicesInUse finds the filesystem where it went.
		m, _ = mount.At(dir)
	}
	if m != nil && m.Source != device {
		return nil, withKind(KindDevice, fmt.Errorf("%s has %s mounted on it, not %s", dir, m.Source, device),
			"unmount that first (umount "+dir+"), then close again")
	}
	if err := devicesInUse(device, m, hs.helperPID()); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, hs.endHelper()
	}
	err := mount.UnmountID(dir, m.ID)
	switch {
	case err == nil:
		// A FUSE program ends once its mount is gone, and lets go of
		// the device: wait for it, so that the device can be released.
		return m, hs.endHelper()
	case errors.Is(err, unix.EBUSY):
		return nil, withKind(KindDevice, fmt.Errorf("%s is busy", dir),
			"find its users with: fuser -vm "+dir+" (programs in other mount namespaces that use their copy of the mount keep it busy too)")
	case errors.Is(err, mount.ErrNotMounted):
		// Gone meanwhile, or covered by another mount since.
		if now, _ := mount.At(dir); now != nil {
			return nil, withKind(KindDevice, fmt.Errorf("%s has %s mounted on it, not %s", dir, now.Source, device),
				"unmount that first (umount "+dir+"), then close again")
		}
		return nil, nil
	}
	return nil, withKind(KindDevice, err)
}

// devicesInUse refuses a device that is in use besides by ours, the mount
// close is about to take down (nil: none), and the FUSE program serving it
// (helper; 0: none): mounted elsewhere in this mount
// namespace (a bind mount, a second mount, ours moved), held by another
// block device on top of it (device-mapper, md), mounted in another mount
// namespace or open in another process (otherHolder; a process gets a
// moment to let go). What it cannot see
// (a mount namespace no process is in, a holder that comes meanwhile) the
// kernel finds when close lets go of the device, and close then puts its
// mount back (remountAfter).
func devicesInUse(device string, ours *mount.Info, helper int) error {
	var st unix.Stat_t
	if err := unix.Stat(device, &st); err != nil && !errors.Is(err, unix.ENOENT) {
		return withKind(KindDevice, err)
	}
	mounts, err := mount.List()
	if err != nil {
		return withKind(KindDevice, err)
	}
	for _, m := range mounts {
		if ours != nil && m.ID == ours.ID {
			continue
		}
		if m.Source == device || st.Rdev != 0 && m.Dev == st.Rdev {
			return withKind(KindDevice, fmt.Errorf("%s is also mounted on %s", device, m.Point),
				"unmount it there first (umount "+m.Point+"), then close again")
		}
	}
	if st.Rdev == 0 { // the device is gone: nothing can be on top of it
		return nil
	}
	holders, _ := os.ReadDir(fmt.Sprintf("/sys/dev/block/%d:%d/holders", unix.Major(st.Rdev), unix.Minor(st.Rdev)))
	if len(holders) > 0 {
		names := make([]string, len(holders))
		for i, h := range holders {
			names[i] = "/dev/" + h.Name()
		}
		return withKind(KindDevice, fmt.Errorf("%s is in use by %s, a device on top of it", device, strings.Join(names, ", ")),
			"remove that device first (dmsetup remove, mdadm --stop), then close again")
	}
	if !scanProcesses {
		return nil
	}
	// A process that has the device open may be passing by: losetup -f
	// opens every loop device looking for a free one, udev's blkid probes
	// a device after mkfs. Such a holder gets the time the release gets
	// (loopReleaseWait) to let go; a mount in another namespace does not
	// pass, and is refused at once.
	deadline := time.Now().Add(loopReleaseWait)
	for {
		open, err := otherHolder(device, st.Rdev, helper)
		if err == nil || !open || time.Now().After(deadline) {
			return err
		}
		time.Sleep(holderRecheck)
	}
}

// holderRecheck is how often devicesInUse looks again for a process that
// had the device open.
const holderRecheck = 20 * time.Millisecond

// scanProcesses lets devicesInUse look through /proc; the tests of the
// remount after a refused close turn it off, so that the kernel is what
// finds the holder.
var scanProcesses = true

// otherHolder looks through /proc, as fuser does, for a process other than
// this one and skip (the FUSE program of our mount) that has the device
// rdev open, or whose mount namespace (other than ours) has it mounted
// privately, and names the first it finds; open tells the first kind.
func otherHolder(device string, rdev uint64, skip int) (open bool, err error) {
	self := os.Getpid()
	ourNS, _ := os.Readlink("/proc/self/ns/mnt")
	seen := map[string]bool{ourNS: true}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return false, nil // no /proc: the kernel tells at release
	}
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil || pid == self || pid == skip {
			continue
		}
		if ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", pid)); err == nil && !seen[ns] {
			seen[ns] = true
			mounts, _ := mount.ListPID(pid)
			for _, m := range mounts {
				// A copy that receives mount events (a systemd
				// service's namespace, a slave of ours) may go with
				// our unmount; a private one stays and holds the
				// device. The first kind the kernel judges, at release.
				if m.Shared != 0 || m.Master != 0 {
					continue
				}
				if m.Source == device || m.Dev == rdev {
					return false, withKind(KindDevice, fmt.Errorf("%s is mounted in another mount namespace: on %s there, where process %d (%s) runs", device, m.Point, pid, processName(pid)),
						fmt.Sprintf("unmount it there (nsenter -t %d -m umount %s) or end what runs there, then close again", pid, m.Point))
				}
			}
		}
		fds := fmt.Sprintf("/proc/%d/fd", pid)
		entries, _ := os.ReadDir(fds)
		for _, e := range entries {
			// Only device nodes are statted: a descriptor of a file
			// on a hung network filesystem would block stat.
			fd := filepath.Join(fds, e.Name())
			if link, err := os.Readlink(fd); err != nil || !strings.HasPrefix(link, "/dev/") {
				continue
			}
			var st unix.Stat_t
			if unix.Stat(fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFBLK && st.Rdev == rdev {
				return true, withKind(KindDevice, fmt.Errorf("%s is open in process %d (%s)", device, pid, processName(pid)),
					"close it there, then close again")
			}
		}
	}
	return false, nil
}

// processName is the command name of process pid, for messages.
func processName(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return strings.TrimSpace(string(b))
}

// deviceBusy is close's error for a device still held after the unmount.
func deviceBusy(device string) error {
	return withKind(KindDevice, fmt.Errorf("%s is in use (open in a program, or mounted in another mount namespace)", device),
		"find its users with: fuser -v "+device+"; mounts in other namespaces with: grep -l "+filepath.Base(device)+" /proc/*/mountinfo")
}

// remountAfter puts back the filesystem that close unmounted (m; nil:
// none) before finding the device busy (cause), at the same place with the
// same flags, so that the refused close changes nothing; it returns cause,
// or, if the filesystem could not be put back, cause with why.
func remountAfter(st *State, device string, m *mount.Info, cause error, hs *fsHelpers) error {
	if m == nil || st.Mountpoint == "" {
		return cause
	}
	err := remount(st, device, m, hs)
	if err == nil {
		return cause
	}
	hints := append(hintsOf(cause), fmt.Sprintf("%s is still served: mount it again by hand (mount %s %s)", device, device, st.Mountpoint))
	return withKind(KindDevice, fmt.Errorf("%w; it was unmounted from %s first, and mounting it there again failed: %v", cause, st.Mountpoint, err), hints...)
}

// remount mounts device again as m was, on the directory that open
// mounted it on: the recorded path must lead to the recorded directory.
// A FUSE program mounts it again where one did (st.FSType says what open
// mounted: m's type is only "fuseblk" then), and st records the new one.
func remount(st *State, device string, m *mount.Info, hs *fsHelpers) error {
	dir, err := mount.OpenDir(st.Mountpoint)
	if err != nil {
		return err
	}
	defer dir.Close()
	var fst unix.Stat_t
	if err := unix.Fstat(int(dir.Fd()), &fst); err != nil {
		return err
	}
	if st.MountIno != 0 && (fst.Dev != st.MountDev || fst.Ino != st.MountIno) {
		return fmt.Errorf("%s is not the directory it was mounted on any more", st.Mountpoint)
	}
	fstype := m.FSType
	if st.FSType != "" {
		fstype = st.FSType
	}
	if _, err := mountOn(device, dir, st.Mountpoint, fstype, m.Flags, hs); err != nil {
		return err
	}
	st.setHelper(hs)
	if hs != nil { // the fuse server's record: the dm backend runs no FUSE programs
		if err := writeState(st); err != nil {
			return fmt.Errorf("write state: %w", err)
		}
	}
	return nil
}

// setHelper records the FUSE program serving the mount, or none.
func (st *State) setHelper(hs *fsHelpers) {
	st.FSHelper, st.HelperPID, st.HelperStart = "", 0, 0
	if pid := hs.helperPID(); pid != 0 {
		st.FSHelper, st.HelperPID, st.HelperStart = filepath.Base(hs.helper.Program), pid, processStart(pid)
	}
}

// unmountLeftover unmounts dir for the cleanup after a dead instance, if
// what is mounted there is ours (by its source device). A busy filesystem
// whose device is gone is detached lazily, with a warning: it lets go of
// the device once its last user does.
func unmountLeftover(a *run, dir string, ours func(source string) bool) error {
	if dir == "" {
		return nil
	}
	m, err := mount.At(dir)
	if err != nil || m == nil || !ours(m.Source) {
		return nil
	}
	if err := mount.UnmountID(dir, m.ID); err != nil {
		if derr := mount.DetachID(dir, m.ID); derr != nil {
			return withKind(KindDevice, err)
		}
		a.warningf("%s was busy: detached it lazily", dir)
	}
	return nil
}

// endLeftoverHelper ends the FUSE program that served the mount of a
// dead server, once cleanup has unmounted it: it ends by itself then,
// and is stopped if it has not within a while. It is no child of ours
// any more: the recorded start time tells it from a process that took
// its PID since.
func endLeftoverHelper(a *run, st *State) {
	if st == nil || st.HelperPID == 0 {
		return
	}
	deadline := time.Now().Add(helperEndWait)
	for processAlive(st.HelperPID, st.HelperStart) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	for _, sig := range []unix.Signal{unix.SIGTERM, unix.SIGKILL} {
		if !processAlive(st.HelperPID, st.HelperStart) {
			return
		}
		a.warningf("%s (pid %d), which served the mount on %s, is still running: sending %v", st.FSHelper, st.HelperPID, st.Mountpoint, sig)
		unix.Kill(st.HelperPID, sig)
		for i := 0; i < 250 && processAlive(st.HelperPID, st.HelperStart); i++ {
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// cleanStaging takes away what a server that died while a FUSE program
// was mounting left in NAME's staging directory: the program's mount
// (lazily: nothing of ours uses it) and the directory.
func cleanStaging(name string) error {
	dir := stagingDir(name)
	if m, _ := mount.At(dir); m != nil {
		if err := mount.DetachID(dir, m.ID); err != nil {
			return withKind(KindDevice, err)
		}
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return withKind(KindDevice, fmt.Errorf("staging directory: %w", err))
	}
	return nil
}
