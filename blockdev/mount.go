package blockdev

// Mounting and unmounting the filesystem on an open volume's device, for
// every backend: the FUSE server mounts on its loop device, the dm backend
// on /dev/mapper/NAME.

import (
	"errors"
	"fmt"

	"github.com/xtsctl/xtsctl/disk"
	"github.com/xtsctl/xtsctl/internal/mount"
	"golang.org/x/sys/unix"
)

// mountFilesystem mounts the filesystem on device (serving image, of
// format typ) at dir and returns its type: fstype, or the type found on
// the device.
func mountFilesystem(image, typ, device, dir, fstype string, readOnly bool) (string, error) {
	if fstype == "" {
		var err error
		fstype, err = mount.Detect(device)
		if err != nil {
			return "", withKind(KindDevice, err)
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
			return "", withKind(KindDevice, fmt.Errorf("no filesystem found on %s (%s), nothing to mount", image, device), hints...)
		}
	}
	if err := mount.Mount(device, dir, fstype, readOnly); err != nil {
		return "", withKind(KindDevice, err, "the kernel log (dmesg) may say more")
	}
	return fstype, nil
}

// unmountFilesystem unmounts what open mounted at dir (the real path it
// recorded) from device, and nothing else: if the topmost mount there is
// not device's, it refuses, so that close never unmounts a filesystem
// someone mounted over ours, or one a symlink now leads to. A busy
// filesystem is left mounted and reported with a hint; one that is no
// longer mounted (someone unmounted it already) is not an error.
func unmountFilesystem(dir, device string) error {
	switch src := mount.Source(dir); {
	case src == "":
		return nil
	case src != device:
		return withKind(KindDevice, fmt.Errorf("%s has %s mounted on it, not %s", dir, src, device),
			"unmount that first (umount "+dir+"), then close again")
	}
	if err := mount.Unmount(dir); err != nil {
		if errors.Is(err, unix.EBUSY) {
			return withKind(KindDevice, fmt.Errorf("%s is busy", dir), "find its users with: fuser -vm "+dir)
		}
		if mount.Source(dir) != "" {
			return withKind(KindDevice, err)
		}
	}
	return nil
}

// unmountLeftover unmounts dir for the cleanup after a dead instance, if
// what is mounted there is ours (by its source device). A busy filesystem
// whose device is gone is detached lazily, with a warning: it lets go of
// the device once its last user does.
func unmountLeftover(a *run, dir string, ours func(source string) bool) error {
	if dir == "" || !ours(mount.Source(dir)) {
		return nil
	}
	if err := mount.Unmount(dir); err != nil {
		if derr := unix.Unmount(dir, unix.MNT_DETACH); derr != nil {
			return withKind(KindDevice, err)
		}
		a.warningf("%s was busy: detached it lazily", dir)
	}
	return nil
}
