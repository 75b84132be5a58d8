package mount

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/xtsctl/xtsctl/internal/testhooks"
	"golang.org/x/sys/unix"
)

func TestUnescapeMountinfo(t *testing.T) {
	for in, want := range map[string]string{`/a\040b`: "/a b", `/plain`: "/plain", `/x\134y`: `/x\y`, `/bad\09`: `/bad\09`} {
		if got := unescapeMountinfo(in); got != want {
			t.Errorf("unescape(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestMountUnmount: Source sees a mount and its absence; Unmount does not
// follow a symlink to a mountpoint.
func TestMountUnmount(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	dir := filepath.Join(t.TempDir(), "with space")
	os.Mkdir(dir, 0o755)
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, ""); err != nil {
		t.Fatal(err)
	}
	defer unix.Unmount(dir, unix.MNT_DETACH)
	if Source(dir) != "tmpfs" {
		t.Fatalf("Source = %q", Source(dir))
	}
	link := filepath.Join(t.TempDir(), "link")
	os.Symlink(dir, link)
	if err := Unmount(link); err == nil {
		t.Fatal("Unmount followed a symlink")
	}
	if err := Unmount(dir); err != nil {
		t.Fatal(err)
	}
	if Source(dir) != "" {
		t.Fatal("still mounted")
	}
}

// skipUnlessRoot skips tests that mount.
func skipUnlessRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
}

// eachWay runs f with the new mount API and with mount(2), and with
// openat2 and without (the component walk).
func eachWay(t *testing.T, f func(t *testing.T)) {
	for _, newAPI := range []bool{true, false} {
		for _, openat2 := range []bool{true, false} {
			t.Run(fmt.Sprintf("newAPI=%v,openat2=%v", newAPI, openat2), func(t *testing.T) {
				useNewAPI, noOpenat2 = newAPI, !openat2
				defer func() { useNewAPI, noOpenat2 = true, false }()
				f(t)
			})
		}
	}
}

// attackTree makes the layout of a mountpoint below a directory that an
// unprivileged user owns: ROOT/home (the user's), ROOT/home/p/mnt the
// mountpoint, and ROOT/victim/mnt, a directory of root's that the user
// would like a mount on. It returns ROOT.
func attackTree(t *testing.T) string {
	t.Helper()
	root, err := os.MkdirTemp("", "mountattack")
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

const nobody = 65534

// swapForSymlink is the user's move: ROOT/home/p becomes a symlink to
// ROOT/victim, the real directory moved aside to p.old. It runs as the
// unprivileged user, who owns ROOT/home.
func swapForSymlink(t *testing.T, root string) {
	t.Helper()
	cmd := exec.Command("sh", "-c", "mv p p.old && ln -s ../victim p")
	cmd.Dir = filepath.Join(root, "home")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the user's swap: %v\n%s", err, out)
	}
}

// checkNotMounted fails t if anything is mounted on dir.
func checkNotMounted(t *testing.T, dirs ...string) {
	t.Helper()
	mounts, err := List()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mounts {
		for _, d := range dirs {
			if m.Point == d {
				t.Errorf("%s has a mount: %+v", d, m)
				DetachID(d, m.ID)
			}
		}
	}
}

// TestMountAtSwappedPath: the user swaps a directory on the path to the
// mountpoint for a symlink after the mountpoint was opened: before MountAt
// (its check finds it), and right before the mount itself (the mount goes
// on the directory that was opened, the check after it finds that the path
// leads elsewhere, and the mount is undone). Either way MountAt fails with
// ErrPathChanged and nothing is mounted, neither on the symlink's target
// nor on the directory moved aside.
func TestMountAtSwappedPath(t *testing.T) {
	skipUnlessRoot(t)
	eachWay(t, func(t *testing.T) {
		for _, when := range []string{"before MountAt", "right before the mount"} {
			root := attackTree(t)
			path := filepath.Join(root, "home/p/mnt")
			dir, err := OpenDir(path)
			if err != nil {
				t.Fatal(err)
			}
			defer dir.Close()
			if when == "before MountAt" {
				swapForSymlink(t, root)
			} else {
				testhooks.BeforeMount = func(p string) {
					if p != path {
						t.Errorf("BeforeMount(%s), want %s", p, path)
					}
					swapForSymlink(t, root)
				}
			}
			_, err = MountAt("xtsctl-test", dir, path, "tmpfs", Flags{})
			testhooks.BeforeMount = nil
			if !errors.Is(err, ErrPathChanged) {
				t.Errorf("%s: MountAt: %v, want ErrPathChanged", when, err)
			}
			checkNotMounted(t, filepath.Join(root, "victim/mnt"), filepath.Join(root, "home/p.old/mnt"))
		}
	})
}

// TestMountAtUnmountID: MountAt mounts on the directory with the flags
// asked for, At and List report it, UnmountID takes only the mount it
// names, and a mount found through a path swapped since is not unmounted.
func TestMountAtUnmountID(t *testing.T) {
	skipUnlessRoot(t)
	eachWay(t, func(t *testing.T) {
		root := attackTree(t)
		path := filepath.Join(root, "home/p/mnt")
		dir, err := OpenDir(path)
		if err != nil {
			t.Fatal(err)
		}
		defer dir.Close()
		flags := Flags{Super: unix.MS_RDONLY, Mount: unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC | unix.MS_NOATIME}
		id, err := MountAt("xtsctl-test", dir, path, "tmpfs", flags)
		if err != nil {
			t.Fatal(err)
		}
		m, err := At(path)
		if err != nil || m == nil || m.ID != id || m.Source != "xtsctl-test" || m.FSType != "tmpfs" || m.Flags != flags {
			t.Fatalf("At(%s) = %+v, %v; want mount %d of xtsctl-test with %+v", path, m, err, id, flags)
		}
		if Source(path) != "xtsctl-test" {
			t.Errorf("Source = %q", Source(path))
		}
		if err := UnmountID(path, id+1000); !errors.Is(err, ErrNotMounted) {
			t.Errorf("UnmountID of another ID: %v, want ErrNotMounted", err)
		}

		// Another mount on the victim's directory; the user swaps p
		// for a symlink to victim: the path now leads to that mount,
		// and neither Unmount nor UnmountID takes it.
		victim := filepath.Join(root, "victim/mnt")
		if err := Mount("victim", victim, "tmpfs", false); err != nil {
			t.Fatal(err)
		}
		defer Unmount(victim)
		vm, _ := At(victim)
		swapForSymlink(t, root)
		if err := Unmount(path); err == nil {
			t.Error("Unmount followed a symlink on the path")
		}
		if err := UnmountID(path, vm.ID); err == nil {
			t.Error("UnmountID followed a symlink on the path")
		}
		if Source(victim) != "victim" {
			t.Fatal("the victim's mount is gone")
		}
		moved := filepath.Join(root, "home/p.old/mnt")
		if err := UnmountID(moved, id); err != nil {
			t.Fatal(err)
		}
		if m, err := At(moved); m != nil || err != nil {
			t.Errorf("after UnmountID: %+v, %v", m, err)
		}
	})
}

// TestOpenDirNoSymlinks: OpenDir follows no symlink, wherever it is on the
// path, and takes absolute paths only.
func TestOpenDirNoSymlinks(t *testing.T) {
	eachWay(t, func(t *testing.T) {
		root := t.TempDir()
		os.MkdirAll(filepath.Join(root, "a/b"), 0o755)
		os.Symlink("a", filepath.Join(root, "l"))
		os.Symlink("b", filepath.Join(root, "a/lb"))
		d, err := OpenDir(filepath.Join(root, "a/b"))
		if err != nil {
			t.Fatal(err)
		}
		d.Close()
		for _, p := range []string{"l/b", "a/lb", "l"} {
			if d, err := OpenDir(filepath.Join(root, p)); err == nil {
				d.Close()
				t.Errorf("OpenDir(%s) followed a symlink", p)
			}
		}
		if _, err := OpenDir("a/b"); err == nil {
			t.Error("OpenDir of a relative path")
		}
	})
}

// TestTopmostListed: the mountinfo answer, which At falls back on where
// the mounted filesystem cannot even be statted (a dead FUSE server), is
// statx's: nothing, then each of two stacked mounts.
func TestTopmostListed(t *testing.T) {
	skipUnlessRoot(t)
	root := attackTree(t)
	path := filepath.Join(root, "home/p/mnt")
	parent, name, err := openParent(path)
	if err != nil {
		t.Fatal(err)
	}
	defer parent.Close()
	var p unix.Statx_t
	if err := unix.Statx(int(parent.Fd()), "", unix.AT_EMPTY_PATH, unix.STATX_MNT_ID, &p); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		want, err := topmost(parent, name)
		if err != nil {
			t.Fatal(err)
		}
		got, err := topmostListed(parent, name, p.Mnt_id)
		if err != nil || got != want || (i > 0) != (want != 0) {
			t.Fatalf("with %d mounts: mountinfo says %d (%v), statx %d", i, got, err, want)
		}
		if err := Mount(fmt.Sprint("stack", i), path, "tmpfs", false); err != nil {
			t.Fatal(err)
		}
		defer Unmount(path)
	}
}
