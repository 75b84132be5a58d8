package testutil

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// deadFUSEMount mounts a FUSE file system whose server is gone (its
// /dev/fuse closed at once): what a killed FUSE server leaves behind.
func deadFUSEMount(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	dir := t.TempDir()
	mnt := filepath.Join(dir, "dead")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Skipf("no FUSE here: %v", err)
	}
	opts := fmt.Sprintf("fd=%d,rootmode=40000,user_id=0,group_id=0", fd)
	if err := unix.Mount("xtsctl-test", mnt, "fuse.xtsctl-test", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		unix.Close(fd)
		t.Skipf("mount fuse: %v", err)
	}
	unix.Close(fd)
	t.Cleanup(func() { unix.Unmount(mnt, unix.MNT_DETACH) })
	var st unix.Stat_t
	if err := unix.Stat(mnt, &st); !errors.Is(err, unix.ENOTCONN) {
		t.Fatalf("stat of the dead mount: %v, want ENOTCONN", err)
	}
	return mnt
}

// TestWithoutFUSEMounts: mkfs.btrfs, which refuses to run while any mount
// on the machine answers ENOTCONN, runs under WithoutFUSEMounts, and the
// dead mount is still there for the rest of the machine afterwards.
func TestWithoutFUSEMounts(t *testing.T) {
	if _, err := exec.LookPath("mkfs.btrfs"); err != nil {
		t.Skip("mkfs.btrfs missing (scripts/install-deps.sh installs btrfs-progs)")
	}
	mnt := deadFUSEMount(t)
	img := filepath.Join(t.TempDir(), "btrfs")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 128<<20); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mkfs.btrfs", "-q", "-f", img).CombinedOutput(); err == nil {
		t.Logf("mkfs.btrfs ran beside a dead FUSE mount without help (a newer btrfs-progs?): %s", out)
	}
	if out, err := WithoutFUSEMounts("mkfs.btrfs", "-q", "-f", img).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.btrfs without the FUSE mounts: %v: %s", err, out)
	}
	b := make([]byte, 8)
	f, err := os.Open(img)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.ReadAt(b, 0x10040); err != nil || string(b) != "_BHRfS_M" {
		t.Fatalf("no btrfs superblock magic at 64 KiB + 64: %q %v", b, err)
	}
	var st unix.Stat_t
	if err := unix.Stat(mnt, &st); !errors.Is(err, unix.ENOTCONN) {
		t.Errorf("the dead mount changed outside the private namespace: %v", err)
	}
}
