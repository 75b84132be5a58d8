package blockdev

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/xtsctl/xtsctl/internal/mount"
)

// The user who owns a directory on the way to the mountpoint swaps it for
// a symlink to a directory of root's while open runs: ROOT/home is the
// user's, ROOT/home/p/mnt the mountpoint, ROOT/victim/mnt the directory the
// user would like the volume mounted on.

const nobody = 65534

// swapEnv names ROOT for the server (the test binary, TestMain), which then
// makes the swap right before it mounts (testhooks.BeforeMount).
const swapEnv = "XTSCTL_TEST_SWAP_BEFORE_MOUNT"

func attackTree(t *testing.T) string {
	t.Helper()
	root, err := os.MkdirTemp("", "xbattack")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	os.Chmod(root, 0o755)
	for _, d := range []string{"home/p/mnt", "victim/mnt"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"home", "home/p", "home/p/mnt"} {
		if err := os.Chown(filepath.Join(root, d), nobody, nobody); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// swapForSymlink is the user's move, run as the user: ROOT/home/p becomes
// a symlink to ROOT/victim, the real directory moved aside to p.old.
func swapForSymlink(root string) error {
	cmd := exec.Command("sh", "-c", "mv p p.old && ln -s ../victim p")
	cmd.Dir = filepath.Join(root, "home")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("the user's swap: %v: %s", err, out)
	}
	return nil
}

// TestOpenMountpointSwapped: the swap happens after the mountpoint was
// checked, before open (while the passphrase is asked for), and in the
// server right before it mounts. Either way open refuses, saying the path
// changed, and the volume is mounted nowhere: not on the symlink's target,
// not on the directory moved aside; nothing stays open.
func TestOpenMountpointSwapped(t *testing.T) {
	dir := servingDirs(t)
	req := ext4Image(t, dir)
	for _, when := range []string{"before open", "in the server, right before the mount"} {
		root := attackTree(t)
		path := filepath.Join(root, "home/p/mnt")
		mp, err := CheckMountpoint(path)
		if err != nil {
			t.Fatal(err)
		}
		if when == "before open" {
			if err := swapForSymlink(root); err != nil {
				t.Fatal(err)
			}
		} else {
			t.Setenv(swapEnv, root)
		}
		r := req()
		r.Mount, r.MountDir = mp.Path, mp
		st, err := Open(context.Background(), r, Options{Warn: t.Logf})
		mp.Close()
		os.Unsetenv(swapEnv)
		var be *Error
		if !errors.As(err, &be) || be.Kind != KindDevice || !strings.Contains(err.Error(), mount.ErrPathChanged.Error()) {
			t.Errorf("%s: open: %v, %+v; want KindDevice and %q", when, err, st, mount.ErrPathChanged)
		} else {
			t.Logf("%s: %v (hints %q)", when, err, be.Hints)
		}
		if _, err := os.Lstat(filepath.Join(root, "home/p.old")); err != nil {
			t.Fatalf("%s: the swap did not happen: %v", when, err)
		}
		mounts, _ := mount.List()
		for _, m := range mounts {
			if strings.HasPrefix(m.Point, root+"/") {
				t.Errorf("%s: mounted on %s: %+v", when, m.Point, m)
				mount.DetachID(m.Point, m.ID)
			}
		}
		if left, _ := List(Options{}); len(left) != 0 {
			t.Errorf("%s: left open: %+v", when, left)
		}
	}
}

// TestCloseMountpointSwapped: while the volume is mounted, the user swaps
// a directory on the way to the mountpoint for a symlink to a directory
// that has a mount of root's. close must neither unmount that mount nor
// stop serving the volume, which is still mounted where it was (now
// reached as p.old/mnt): it refuses and names where the filesystem is.
// Once the user puts the directory back, close succeeds.
func TestCloseMountpointSwapped(t *testing.T) {
	dir := servingDirs(t)
	req := ext4Image(t, dir)
	root := attackTree(t)
	path := filepath.Join(root, "home/p/mnt")
	st := openMounted(t, req(), path)
	victim := filepath.Join(root, "victim/mnt")
	if err := mount.Mount("victim", victim, "tmpfs", false); err != nil {
		t.Fatal(err)
	}
	defer mount.Unmount(victim)
	if err := swapForSymlink(root); err != nil {
		t.Fatal(err)
	}
	moved := filepath.Join(root, "home/p.old/mnt")
	data := writeUnsynced(t, filepath.Join(moved, "f"))

	_, err := Close(context.Background(), st.Name, Options{})
	if kindOf(err) != KindDevice || !strings.Contains(err.Error(), "also mounted on "+moved) {
		t.Errorf("close with the mountpoint's parent swapped: %v", err)
	}
	if mount.Source(victim) != "victim" {
		t.Fatalf("close unmounted the mount the symlink leads to")
	}
	checkServedAndWritable(t, st, moved)

	back := exec.Command("sh", "-c", "rm p && mv p.old p")
	back.Dir = filepath.Join(root, "home")
	back.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	if out, err := back.CombinedOutput(); err != nil {
		t.Fatalf("swap back: %v %s", err, out)
	}
	if _, err := Close(context.Background(), st.Name, Options{}); err != nil {
		t.Fatalf("close once the path is back: %v", err)
	}
	st = openMounted(t, req(), path)
	if got, err := os.ReadFile(filepath.Join(path, "f")); err != nil || !bytes.Equal(got, data) {
		t.Errorf("the file written through the moved mountpoint: %v", err)
	}
	if _, err := Close(context.Background(), st.Name, Options{}); err != nil {
		t.Fatal(err)
	}
}
