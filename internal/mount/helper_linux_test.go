package mount

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xtsctl/xtsctl/internal/testhooks"
	"github.com/xtsctl/xtsctl/internal/testutil"
	"golang.org/x/sys/unix"
)

// needTools skips t, naming the Debian package to install, unless every
// tool is there (scripts/install-deps.sh installs them all).
func needTools(t *testing.T, pkg string, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			if _, err := os.Stat(filepath.Join("/sbin", tool)); err != nil {
				t.Skipf("%s missing: apt-get install %s (scripts/install-deps.sh)", tool, pkg)
			}
		}
	}
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := toolCommand(t, name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// loopDevice attaches a loop device to a new image of size bytes made by
// mkfs (called with the image's path) and detaches it at the end. Its
// test mounts the device: it takes the tests' shared lock, so that no
// other package's test copies the mount into a namespace meanwhile (the
// FUSE program would not end with the unmount).
func loopDevice(t *testing.T, size int64, mkfs func(img string)) string {
	t.Helper()
	testutil.ServingTest(t)
	img := filepath.Join(t.TempDir(), "fs.img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, size); err != nil {
		t.Fatal(err)
	}
	mkfs(img)
	dev := strings.TrimSpace(run(t, "losetup", "-f", "--show", img))
	t.Cleanup(func() { exec.Command("losetup", "-d", dev).Run() })
	return dev
}

// mountFS is MountFS for a test: whatever it mounted is detached, and its
// FUSE program ended, when the test ends, however it ends, so that a
// failed test leaves neither a mount nor a program holding the loop
// device behind.
func mountFS(t *testing.T, device string, dir *os.File, path, fs string, flags Flags, hopt *HelperOptions) (uint64, *Helper, error) {
	t.Helper()
	id, h, err := MountFS(device, dir, path, fs, flags, hopt)
	if id != 0 || h != nil {
		t.Cleanup(func() {
			if m, _ := At(path); m != nil && m.ID == id {
				DetachID(path, id)
			}
			h.Stop(30 * time.Second)
		})
	}
	return id, h, err
}

// helperFS are the filesystems whose FUSE programs Debian 12 packages,
// with how to make one: mkfs, then files put in by a tool that needs no
// mount where there is one (the kernel here may have no driver at all).
var helperFS = []struct {
	fs, helper, pkg string
	tools           []string
	mkfs            func(t *testing.T, img string)
	writable        bool
}{
	{FSNTFS, "ntfs-3g", "ntfs-3g", []string{"mkntfs", "ntfs-3g"}, func(t *testing.T, img string) {
		run(t, "mkntfs", "-q", "-F", "-f", "-L", "TESTNTFS", img)
	}, true},
	{FSExFAT, "mount.exfat-fuse", "exfat-fuse exfatprogs", []string{"mkfs.exfat", "mount.exfat-fuse"}, func(t *testing.T, img string) {
		run(t, "mkfs.exfat", "-L", "TESTEXFAT", img)
	}, true},
	{FSVFAT, "fusefat", "fusefat dosfstools mtools", []string{"mkfs.vfat", "fusefat", "mcopy"}, func(t *testing.T, img string) {
		run(t, "mkfs.vfat", "-n", "TESTFAT", img)
		src := filepath.Join(t.TempDir(), "hello.txt")
		os.WriteFile(src, []byte("hello from mtools\n"), 0o600)
		run(t, "mmd", "-i", img, "::/sub")
		run(t, "mcopy", "-i", img, src, "::/sub/hello.txt")
	}, false},
}

// helperEnv is what a helper test mounts on: a directory held open, and
// the staging directory.
func helperEnv(t *testing.T) (path string, dir *os.File, hopt *HelperOptions, log *bytes.Buffer) {
	t.Helper()
	base := t.TempDir()
	path = filepath.Join(base, "mnt")
	os.Mkdir(path, 0o755)
	dir, err := OpenDir(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dir.Close() })
	log = new(bytes.Buffer)
	return path, dir, &HelperOptions{Staging: filepath.Join(base, "staging"), Log: log}, log
}

// checkEnded fails t unless h's process has ended by itself, within a
// while (ntfs-3g flushes the volume first).
func checkEnded(t *testing.T, h *Helper) {
	t.Helper()
	ended, err := h.Stop(30 * time.Second)
	if err != nil || !ended {
		t.Errorf("%s (pid %d) had to be killed after its mount went: %v", h.Program, h.PID, err)
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", h.PID)); err == nil {
		t.Errorf("%s (pid %d) still exists", h.Program, h.PID)
	}
}

// TestMountFSHelpers mounts a filesystem of each kind that Debian has a
// FUSE program for through that program, on the directory held open:
// read-write where the program writes (files written, unmounted by ID,
// the program gone), then read-only, where the files read back and the
// mount is read-only; the staging directory is gone each time.
func TestMountFSHelpers(t *testing.T) {
	skipUnlessRoot(t)
	for _, c := range helperFS {
		t.Run(c.fs, func(t *testing.T) {
			needTools(t, c.pkg, append(c.tools, "losetup")...)
			eachWay(t, func(t *testing.T) {
				dev := loopDevice(t, 32<<20, func(img string) { c.mkfs(t, img) })
				path, dir, hopt, log := helperEnv(t)
				files := map[string][]byte{}
				if c.writable {
					id, h, err := mountFS(t, dev, dir, path, c.helper, Flags{}, hopt)
					if err != nil {
						t.Fatalf("%v\n%s", err, log)
					}
					for _, n := range []int{0, 1, 4097, 1<<20 + 3} {
						data := make([]byte, n)
						rand.Read(data)
						name := fmt.Sprintf("f%d", n)
						if err := os.WriteFile(filepath.Join(path, name), data, 0o644); err != nil {
							t.Fatal(err)
						}
						files[name] = data
					}
					if err := UnmountID(path, id); err != nil {
						t.Fatal(err)
					}
					checkEnded(t, h)
				} else {
					files["sub/hello.txt"] = []byte("hello from mtools\n")
					if _, _, err := mountFS(t, dev, dir, path, c.helper, Flags{}, hopt); !errors.Is(err, ErrHelperReadOnly) {
						t.Fatalf("read-write mount through %s: %v, want ErrHelperReadOnly", c.helper, err)
					}
				}
				id, h, err := mountFS(t, dev, dir, path, c.helper, ReadOnly, hopt)
				if err != nil {
					t.Fatalf("%v\n%s", err, log)
				}
				m, err := At(path)
				if err != nil || m == nil || m.ID != id || m.Source != dev || (m.Flags.Mount|m.Flags.Super)&unix.MS_RDONLY == 0 {
					t.Fatalf("At(%s) = %+v, %v; want mount %d of %s, read-only", path, m, err, id, dev)
				}
				if _, err := os.Stat(hopt.Staging); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("staging directory %s: %v, want it gone", hopt.Staging, err)
				}
				for name, want := range files {
					if got, err := os.ReadFile(filepath.Join(path, name)); err != nil || !bytes.Equal(got, want) {
						t.Errorf("%s: %d bytes, %v; want the %d written", name, len(got), err, len(want))
					}
				}
				if err := os.WriteFile(filepath.Join(path, "new"), nil, 0o644); err == nil {
					t.Error("a read-only mount took a new file")
				}
				if err := UnmountID(path, id); err != nil {
					t.Fatal(err)
				}
				checkEnded(t, h)
				checkNotMounted(t, path)
			})
		})
	}
}

// TestMountFSSwappedPath: the user swaps a directory on the path for a
// symlink right before the FUSE program's mount is moved onto the
// directory checked: the mount is undone, nothing is mounted on the
// symlink's target or the directory moved aside, and the program ends.
func TestMountFSSwappedPath(t *testing.T) {
	skipUnlessRoot(t)
	needTools(t, "ntfs-3g", "mkntfs", "ntfs-3g", "losetup")
	eachWay(t, func(t *testing.T) {
		dev := loopDevice(t, 16<<20, func(img string) { run(t, "mkntfs", "-q", "-F", "-f", img) })
		for _, when := range []string{"before MountFS", "right before the move"} {
			root := attackTree(t)
			path := filepath.Join(root, "home/p/mnt")
			dir, err := OpenDir(path)
			if err != nil {
				t.Fatal(err)
			}
			defer dir.Close()
			if when == "before MountFS" {
				swapForSymlink(t, root)
			} else {
				testhooks.BeforeMount = func(string) { swapForSymlink(t, root) }
			}
			before := children()
			_, h, err := mountFS(t, dev, dir, path, "ntfs-3g", ReadOnly, &HelperOptions{Staging: filepath.Join(t.TempDir(), "s")})
			testhooks.BeforeMount = nil
			if !errors.Is(err, ErrPathChanged) || h != nil {
				t.Errorf("%s: MountFS: %v, %v; want ErrPathChanged", when, h, err)
			}
			checkNotMounted(t, filepath.Join(root, "victim/mnt"), filepath.Join(root, "home/p.old/mnt"))
			for pid := range children() {
				if !before[pid] {
					t.Errorf("%s: process %d left running", when, pid)
				}
			}
		}
	})
}

// TestMountFSNoDriver: without the kernel's driver and without the FUSE
// program the error names the package that has it; with the program but
// nowhere to run it (no HelperOptions) it says so.
func TestMountFSNoDriver(t *testing.T) {
	skipUnlessRoot(t)
	path, dir, hopt, _ := helperEnv(t)
	d := Driver{FS: "testfs", Kernel: "xtsctl-no-such-fs", Helper: "xtsctl-no-such-helper", Package: "xtsctl-helper-pkg", args: helperArgs(true)}
	_, _, err := mountHelper("/dev/null", dir, path, d, ReadOnly, hopt)
	var nd *NoDriverError
	if !errors.As(err, &nd) || !strings.Contains(err.Error(), "Debian package xtsctl-helper-pkg") || !strings.Contains(err.Error(), "xtsctl-no-such-helper") {
		t.Errorf("missing helper: %v", err)
	}
	if _, err := os.Stat(hopt.Staging); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("staging directory made for a missing helper: %v", err)
	}
	if HelperAvailable("hfsplus") {
		t.Log("hfsfuse is installed")
	} else if _, _, err := MountFS("/dev/null", dir, path, "hfsfuse", ReadOnly, hopt); !errors.As(err, &nd) || !strings.Contains(err.Error(), "no Debian 12 package") {
		t.Errorf("hfsfuse missing: %v", err)
	}
	needTools(t, "ntfs-3g", "ntfs-3g")
	if _, _, err := MountFS("/dev/null", dir, path, "ntfs-3g", ReadOnly, nil); !errors.Is(err, ErrNoHelpers) {
		t.Errorf("without HelperOptions: %v, want ErrNoHelpers", err)
	}
	checkNotMounted(t, path)
}

// TestMountFSStagingNotRootOnly: a staging directory that someone other
// than root could redirect (a directory of theirs on the way) is refused
// before anything runs.
func TestMountFSStagingNotRootOnly(t *testing.T) {
	skipUnlessRoot(t)
	needTools(t, "ntfs-3g", "ntfs-3g")
	root := attackTree(t) // ROOT/home belongs to nobody
	path := filepath.Join(root, "victim/mnt")
	dir, err := OpenDir(path)
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	staging := filepath.Join(root, "home/p/staging")
	_, _, err = MountFS("/dev/null", dir, path, "ntfs-3g", ReadOnly, &HelperOptions{Staging: staging})
	if err == nil || !strings.Contains(err.Error(), "not root") {
		t.Errorf("staging below a user's directory: %v", err)
	}
	if _, err := os.Stat(staging); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("staging directory made: %v", err)
	}
}

// TestMountFSHelperFails: a FUSE program that refuses the device (no
// NTFS on it) fails MountFS with what it said; nothing stays mounted or
// running.
func TestMountFSHelperFails(t *testing.T) {
	skipUnlessRoot(t)
	needTools(t, "ntfs-3g", "ntfs-3g", "losetup")
	dev := loopDevice(t, 4<<20, func(string) {})
	path, dir, hopt, _ := helperEnv(t)
	before := children()
	_, h, err := mountFS(t, dev, dir, path, "ntfs-3g", ReadOnly, hopt)
	if err == nil || h != nil || !strings.Contains(err.Error(), "ntfs-3g failed") || !strings.Contains(strings.ToLower(err.Error()), "ntfs") {
		t.Errorf("MountFS of a device without NTFS: %v", err)
	}
	checkNotMounted(t, path)
	for pid := range children() {
		if !before[pid] {
			t.Errorf("process %d left running", pid)
		}
	}
}

// TestHelperInheritsNoDescriptors: a descriptor this process holds
// without close-on-exec (go-fuse opens /dev/fuse so; the server holds the
// pipes and files open gave it) does not reach the FUSE program: there it
// would outlive this process, and a FUSE connection kept open that way
// leaves every request to it waiting for ever once its server is gone.
func TestHelperInheritsNoDescriptors(t *testing.T) {
	skipUnlessRoot(t)
	needTools(t, "ntfs-3g", "mkntfs", "ntfs-3g", "losetup")
	leak := filepath.Join(t.TempDir(), "not-for-the-helper")
	os.WriteFile(leak, nil, 0o600)
	fd, err := unix.Open(leak, unix.O_RDONLY, 0) // no O_CLOEXEC, as go-fuse's /dev/fuse
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	dev := loopDevice(t, 16<<20, func(img string) { run(t, "mkntfs", "-q", "-F", "-f", img) })
	path, dir, hopt, _ := helperEnv(t)
	id, h, err := mountFS(t, dev, dir, path, "ntfs-3g", ReadOnly, hopt)
	if err != nil {
		t.Fatal(err)
	}
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", h.PID))
	for _, e := range fds {
		if target, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", h.PID, e.Name())); target == leak {
			t.Errorf("%s holds this process's descriptor %d of %s as its %s", h.Program, fd, leak, e.Name())
		}
	}
	if len(fds) == 0 {
		t.Errorf("no descriptors of %s (pid %d) read", h.Program, h.PID)
	}
	if err := UnmountID(path, id); err != nil {
		t.Fatal(err)
	}
	checkEnded(t, h)
}
