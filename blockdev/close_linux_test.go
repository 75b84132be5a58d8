package blockdev

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/xtsctl/xtsctl/disk"
	"github.com/xtsctl/xtsctl/internal/mount"
	"github.com/xtsctl/xtsctl/internal/testutil"
	"golang.org/x/sys/unix"
)

// ext4Image makes a plain image holding an empty ext4 filesystem (made
// through the device, served once without a mount) and returns a function
// that makes a fresh request to open it.
func ext4Image(t *testing.T, dir string) func() *Request {
	t.Helper()
	if _, err := exec.LookPath("mkfs.ext4"); err != nil {
		t.Skip("mkfs.ext4 missing (scripts/install-deps.sh installs e2fsprogs)")
	}
	key := make([]byte, 64)
	rand.Read(key)
	img := filepath.Join(dir, "fs.img")
	if err := os.WriteFile(img, make([]byte, 64<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	u := unlocked(t, img, "plain", disk.Options{"sector-size": "4096"}, &disk.Secret{KeyFiles: [][]byte{key}})
	req := func() *Request {
		return &Request{Name: "fs", Image: openFile(t, img), Path: img, Unlocked: u, Backend: "fuse"}
	}
	st, err := Open(context.Background(), req(), Options{Warn: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("mkfs.ext4", "-q", "-F", st.Device).CombinedOutput()
	if _, cerr := Close(context.Background(), "fs", Options{}); err != nil || cerr != nil {
		t.Fatalf("mkfs.ext4: %v %s; close: %v", err, out, cerr)
	}
	return req
}

// startReady starts cmd and waits until it prints "ready" (what it holds
// is in place then); what names it in a failure.
func startReady(t *testing.T, cmd *exec.Cmd, what string) {
	t.Helper()
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("%s: %q, %v", what, line, err)
	}
}

// openMounted opens the image of req at mnt, through the same path as the
// command line: the mountpoint checked and held, then Open.
func openMounted(t *testing.T, req *Request, mnt string) *State {
	t.Helper()
	mp, err := CheckMountpoint(mnt)
	if err != nil {
		t.Fatal(err)
	}
	defer mp.Close()
	req.Mount, req.MountDir = mp.Path, mp
	st, err := Open(context.Background(), req, Options{Warn: t.Logf})
	if err != nil {
		t.Fatalf("open --mount %s: %v", mnt, err)
	}
	if m, err := mount.At(mnt); err != nil || m == nil || m.Source != st.Device {
		t.Fatalf("after open, %s has %+v mounted (%v), want %s", mnt, m, err, st.Device)
	}
	return st
}

// writeUnsynced writes random data to path and closes it without syncing:
// it is in the page cache of the mounted filesystem only.
func writeUnsynced(t *testing.T, path string) []byte {
	t.Helper()
	data := make([]byte, 1<<20+123)
	rand.Read(data)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return data
}

// checkServedAndWritable checks that a refused close left NAME as it was:
// open, the filesystem mounted at mnt from its device, and written to
// with a sync, which reaches the server.
func checkServedAndWritable(t *testing.T, st *State, mnt string) []byte {
	t.Helper()
	if vs, err := StatusOf(st.Name, Options{}); err != nil || vs.Condition != "open" {
		t.Fatalf("after a refused close: status %+v, %v", vs.Condition, err)
	}
	if m, err := mount.At(mnt); err != nil || m == nil || m.Source != st.Device {
		t.Fatalf("after a refused close, %s has %+v mounted (%v), want %s", mnt, m, err, st.Device)
	}
	data := make([]byte, 256<<10)
	rand.Read(data)
	f, err := os.Create(filepath.Join(mnt, "after-refusal"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		t.Fatalf("write after a refused close: %v", err)
	}
	if err := f.Sync(); err != nil {
		t.Fatalf("fsync after a refused close: %v", err)
	}
	return data
}

// TestCloseBusyChangesNothing: a close that finds the filesystem or the
// device in use refuses (KindDevice, exit 7) and leaves the volume as it
// was: mounted, served, writable. Once released, close succeeds, and what
// was written but not synced before (in every holder's view) is in the
// image when it is opened again. The holders that close finds in /proc
// before it unmounts anything are tried a second time with that look
// turned off in the server (noScanEnv): the kernel then tells when close
// lets go of the loop device, after the unmount, and close must mount the
// filesystem back.
func TestCloseBusyChangesNothing(t *testing.T) {
	testutil.MountNamespaceTest(t) // one case holds a copy in another namespace
	dir := servingDirs(t)
	req := ext4Image(t, dir)
	mnt := filepath.Join(dir, "mnt")
	os.Mkdir(mnt, 0o755)

	cases := []struct {
		name string
		// hold makes NAME busy and writes files, unsynced, in a way
		// the user sees them; it returns what close must say, a
		// release and the files with their contents.
		hold func(t *testing.T, st *State) (want string, release func(), files map[string][]byte)
		// kernelFinds: run it with noScanEnv too.
		kernelFinds bool
	}{
		{"a file open on the filesystem", holdFileOpen(mnt), false},
		{"the filesystem mounted in another mount namespace", func(t *testing.T, st *State) (string, func(), map[string][]byte) {
			src := filepath.Join(dir, "ns-src")
			data := writeUnsynced(t, src)
			// The new namespace gets a copy of every mount, ours
			// too; Go makes its root private. The copy writes a
			// file and waits for the test to say go.
			cmd := exec.Command("sh", "-c", `cp "$1" "$2/ns.bin" && echo ready && read x`, "sh", src, mnt)
			cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
			in, _ := cmd.StdinPipe()
			startReady(t, cmd, "the other namespace")
			release := func() {
				in.Write([]byte("go\n"))
				in.Close()
				if err := cmd.Wait(); err != nil {
					t.Errorf("the other namespace: %v", err)
				}
			}
			return st.Device + " is mounted in another mount namespace: on " + mnt + " there", release, map[string][]byte{"ns.bin": data}
		}, true},
		{"the loop device held open", func(t *testing.T, st *State) (string, func(), map[string][]byte) {
			data := writeUnsynced(t, filepath.Join(mnt, "loop.bin"))
			dev, err := os.Open(st.Device)
			if err != nil {
				t.Fatal(err)
			}
			release := func() {
				// The device still reads: it is served.
				if _, err := dev.ReadAt(make([]byte, 4096), 1<<20); err != nil {
					t.Errorf("read from the held device after a refused close: %v", err)
				}
				dev.Close()
			}
			return fmt.Sprintf("%s is open in process %d", st.Device, os.Getpid()), release, map[string][]byte{"loop.bin": data}
		}, true},
		{"the filesystem mounted a second time", func(t *testing.T, st *State) (string, func(), map[string][]byte) {
			other := filepath.Join(dir, "other")
			os.Mkdir(other, 0o755)
			if err := unix.Mount(mnt, other, "", unix.MS_BIND, ""); err != nil {
				t.Fatal(err)
			}
			data := writeUnsynced(t, filepath.Join(other, "bind.bin"))
			release := func() {
				if err := unix.Unmount(other, 0); err != nil {
					t.Error(err)
				}
			}
			return "also mounted on " + other, release, map[string][]byte{"bind.bin": data}
		}, false},
	}
	for _, c := range cases {
		for _, kernel := range []bool{false, true} {
			if kernel && !c.kernelFinds {
				continue
			}
			name := c.name
			if kernel {
				name += ", found by the kernel"
			}
			t.Run(strings.ReplaceAll(name, " ", "_"), func(t *testing.T) { closeBusy(t, req, mnt, c.hold, kernel) })
		}
	}
}

// closeBusy is one case of TestCloseBusyChangesNothing.
func closeBusy(t *testing.T, req func() *Request, mnt string, hold func(t *testing.T, st *State) (string, func(), map[string][]byte), kernel bool) {
	ctx := context.Background()
	if kernel {
		t.Setenv(noScanEnv, "1")
	}
	st := openMounted(t, req(), mnt)
	os.Unsetenv(noScanEnv)
	want, release, files := hold(t, st)
	if kernel {
		want = st.Device + " is in use (open in a program, or mounted in another mount namespace)"
	}
	_, err := Close(ctx, st.Name, Options{Warn: t.Logf})
	var be *Error
	if !errors.As(err, &be) || be.Kind != KindDevice || !strings.Contains(err.Error(), want) {
		release()
		t.Fatalf("close of a busy volume: %v, want KindDevice and %q", err, want)
	}
	t.Logf("refused: %v (hints %q)", err, be.Hints)
	files["after-refusal"] = checkServedAndWritable(t, st, mnt)
	release()
	if _, err := Close(ctx, st.Name, Options{Warn: t.Logf}); err != nil {
		t.Fatalf("close once released: %v", err)
	}
	if m, _ := mount.At(mnt); m != nil {
		t.Fatalf("close left %s mounted: %+v", mnt, m)
	}

	// Every file, synced or not, is in the image.
	st = openMounted(t, req(), mnt)
	for name, data := range files {
		if got, err := os.ReadFile(filepath.Join(mnt, name)); err != nil || !bytes.Equal(got, data) {
			t.Errorf("%s after close and open: %d bytes, %v; want the %d bytes written", name, len(got), err, len(data))
		}
		os.Remove(filepath.Join(mnt, name))
	}
	if _, err := Close(ctx, st.Name, Options{}); err != nil {
		t.Fatal(err)
	}
}

// TestCloseRefusesDeviceMountedByHand: open without --mount, the user
// mounts the device by hand and writes to it: close refuses, naming the
// mount, and serves on; once unmounted, close succeeds and the data is in
// the image.
func TestCloseRefusesDeviceMountedByHand(t *testing.T) {
	dir := servingDirs(t)
	req := ext4Image(t, dir)
	ctx := context.Background()
	st, err := Open(ctx, req(), Options{Warn: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	mnt := filepath.Join(dir, "by-hand")
	os.Mkdir(mnt, 0o755)
	if err := unix.Mount(st.Device, mnt, "ext4", 0, ""); err != nil {
		t.Fatal(err)
	}
	data := writeUnsynced(t, filepath.Join(mnt, "f"))
	if _, err := Close(ctx, st.Name, Options{}); kindOf(err) != KindDevice || !strings.Contains(err.Error(), st.Device+" is also mounted on "+mnt) {
		t.Errorf("close of a device mounted by hand: %v", err)
	}
	if got, err := os.ReadFile(filepath.Join(mnt, "f")); err != nil || !bytes.Equal(got, data) {
		t.Errorf("the file after the refused close: %v", err)
	}
	checkServedAndWritable(t, &State{Name: st.Name, Device: st.Device}, mnt)
	if err := unix.Unmount(mnt, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := Close(ctx, st.Name, Options{}); err != nil {
		t.Fatalf("close once unmounted: %v", err)
	}
	st = openMounted(t, req(), mnt)
	if got, err := os.ReadFile(filepath.Join(mnt, "f")); err != nil || !bytes.Equal(got, data) {
		t.Errorf("the file after close and open: %v", err)
	}
	if _, err := Close(ctx, st.Name, Options{}); err != nil {
		t.Fatal(err)
	}
}

// TestCloseWaitsForBriefOpener: a program that opens the device for a
// moment (losetup -f looking for a free loop device, udev's blkid after
// mkfs) is waited for, not taken for a user: close succeeds once it has
// let go, and what was written is in the image.
func TestCloseWaitsForBriefOpener(t *testing.T) {
	dir := servingDirs(t)
	req := ext4Image(t, dir)
	mnt := filepath.Join(dir, "mnt")
	os.Mkdir(mnt, 0o755)
	st := openMounted(t, req(), mnt)
	data := writeUnsynced(t, filepath.Join(mnt, "f"))
	cmd := exec.Command("sh", "-c", `exec 3<"$1" && echo ready && sleep 0.2`, "sh", st.Device)
	startReady(t, cmd, "the brief opener")
	_, err := Close(context.Background(), st.Name, Options{Warn: t.Logf})
	if werr := cmd.Wait(); werr != nil {
		t.Errorf("the brief opener: %v", werr)
	}
	if err != nil {
		Close(context.Background(), st.Name, Options{})
		t.Fatalf("close while a program had the device open for a moment: %v", err)
	}
	if m, _ := mount.At(mnt); m != nil {
		t.Fatalf("close left %s mounted: %+v", mnt, m)
	}
	st = openMounted(t, req(), mnt)
	if got, err := os.ReadFile(filepath.Join(mnt, "f")); err != nil || !bytes.Equal(got, data) {
		t.Errorf("the file after close and open: %v", err)
	}
	if _, err := Close(context.Background(), st.Name, Options{}); err != nil {
		t.Fatal(err)
	}
}

// TestCloseWithSlaveCopies: on a host whose mounts propagate (systemd makes
// them shared), every mount namespace made with slave propagation (a
// service's) holds a copy of the volume's mount, and close's unmount takes
// those along. close must not take them for users: it succeeds, the copy
// is gone, and what was written through it is in the image.
func TestCloseWithSlaveCopies(t *testing.T) {
	testutil.MountNamespaceTest(t)
	dir := servingDirs(t)
	req := ext4Image(t, dir)
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("unshare (util-linux) missing")
	}
	shared := filepath.Join(dir, "shared")
	os.Mkdir(shared, 0o755)
	if err := unix.Mount("xtsctl-shared", shared, "tmpfs", 0, ""); err != nil {
		t.Fatal(err)
	}
	defer unix.Unmount(shared, unix.MNT_DETACH)
	if err := unix.Mount("", shared, "", unix.MS_SHARED, ""); err != nil {
		t.Fatal(err)
	}
	mnt := filepath.Join(shared, "mnt")
	os.Mkdir(mnt, 0o755)
	st := openMounted(t, req(), mnt)
	src := filepath.Join(dir, "src")
	data := writeUnsynced(t, src)
	cmd := exec.Command("unshare", "-m", "--propagation", "slave", "sh", "-c", `cp "$1" "$2/slave.bin" && echo ready && read x`, "sh", src, mnt)
	in, _ := cmd.StdinPipe()
	startReady(t, cmd, "the slave namespace")
	defer func() {
		in.Write([]byte("go\n"))
		in.Close()
		cmd.Wait()
	}()
	copies := func() (n int) {
		mounts, _ := mount.ListPID(cmd.Process.Pid)
		for _, m := range mounts {
			if m.Source == st.Device {
				if m.Master == 0 {
					t.Errorf("the copy in the slave namespace receives no mount events: %+v", m)
				}
				n++
			}
		}
		return n
	}
	if copies() != 1 {
		t.Fatal("the slave namespace has no copy of the mount")
	}
	if _, err := Close(context.Background(), st.Name, Options{Warn: t.Logf}); err != nil {
		t.Fatalf("close with a slave copy of the mount: %v", err)
	}
	if copies() != 0 {
		t.Error("the copy in the slave namespace outlived close")
	}
	st = openMounted(t, req(), mnt)
	if got, err := os.ReadFile(filepath.Join(mnt, "slave.bin")); err != nil || !bytes.Equal(got, data) {
		t.Errorf("what the slave namespace wrote: %v", err)
	}
	if _, err := Close(context.Background(), st.Name, Options{}); err != nil {
		t.Fatal(err)
	}
}

// TestCloseWithPrivateFUSECopy: a mount namespace made while a volume is
// open, private (unshare -m, a container), copies the server's FUSE mount,
// which an unmount here does not reach. close must not wait for that copy
// to go (it would wait as long as the namespace lives): it completes, and
// the copy stops answering.
func TestCloseWithPrivateFUSECopy(t *testing.T) {
	testutil.MountNamespaceTest(t)
	dir := servingDirs(t)
	req := ext4Image(t, dir)
	st, err := Open(context.Background(), req(), Options{Warn: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	fuseDir := filepath.Join(stateDir(st.Name), "fuse")
	cmd := exec.Command("sh", "-c", "echo ready && read x")
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	in, _ := cmd.StdinPipe()
	startReady(t, cmd, "the other namespace")
	defer func() {
		in.Write([]byte("go\n"))
		in.Close()
		cmd.Wait()
	}()
	held := false
	mounts, _ := mount.ListPID(cmd.Process.Pid)
	for _, m := range mounts {
		held = held || m.Point == fuseDir && m.Shared == 0 && m.Master == 0
	}
	if !held {
		t.Fatalf("the other namespace holds no private copy of %s", fuseDir)
	}
	if _, err := Close(context.Background(), st.Name, Options{Warn: t.Logf}); err != nil {
		t.Fatalf("close: %v", err)
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d/root%s/%s", cmd.Process.Pid, fuseDir, "data")); err == nil {
		t.Error("the copy of the FUSE mount still serves the device's file after close")
	}
}

// holdFileOpen makes the filesystem at mnt busy with a file written,
// unsynced, and held open: close must say mnt is busy.
func holdFileOpen(mnt string) func(t *testing.T, st *State) (string, func(), map[string][]byte) {
	return func(t *testing.T, st *State) (string, func(), map[string][]byte) {
		data := make([]byte, 1<<20)
		rand.Read(data)
		f, err := os.Create(filepath.Join(mnt, "open.bin"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(data); err != nil {
			t.Fatal(err)
		}
		return mnt + " is busy", func() { f.Close() }, map[string][]byte{"open.bin": data}
	}
}
