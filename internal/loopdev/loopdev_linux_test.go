//go:build linux

package loopdev

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// loopMajor is LOOP_MAJOR from the kernel's include/uapi/linux/major.h.
const loopMajor = 7

func skipUnlessLoop(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("loop devices need root")
	}
	if _, err := os.Stat(controlPath); err != nil {
		t.Skipf("no loop devices here: %v", err)
	}
}

// backingFile writes n random bytes to a fresh file and returns its path and
// contents. When the test ends, after its deferred calls, it fails the test
// if any loop device is still attached to the file.
func backingFile(t *testing.T, n int) (string, []byte) {
	t.Helper()
	data := make([]byte, n)
	rand.Read(data)
	path := filepath.Join(t.TempDir(), "image")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		for {
			leaked := devicesBackedBy(path)
			if len(leaked) == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("leaked loop devices backed by %s: %v", path, leaked)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
	return path, data
}

func devicesBackedBy(path string) []string {
	files, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	var devs []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err == nil && strings.TrimSpace(string(b)) == path {
			devs = append(devs, strings.Split(f, "/")[3])
		}
	}
	return devs
}

// attached reports the backing file the kernel lists for loop device n, or
// "" when the device is not attached.
func attached(n int) string {
	b, err := os.ReadFile(filepath.Join("/sys/block", "loop"+strconv.Itoa(n), "loop", "backing_file"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// waitDetached waits for the kernel to finish an auto-clear, which happens
// in the release path of the last close and may lag behind it briefly.
func waitDetached(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for attached(n) != "" {
		if time.Now().After(deadline) {
			t.Fatalf("loop%d still attached to %s", n, attached(n))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func readDevice(t *testing.T, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestAttachReadDetach(t *testing.T) {
	skipUnlessLoop(t)
	path, data := backingFile(t, 1<<20)

	d, err := Attach(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Detach()
	if d.Path != "/dev/loop"+strconv.Itoa(d.Number) {
		t.Errorf("Path = %q for number %d", d.Path, d.Number)
	}
	if d.Major != loopMajor || d.Minor != uint32(d.Number) {
		t.Errorf("device number %d:%d, want %d:%d", d.Major, d.Minor, loopMajor, d.Number)
	}
	if got := attached(d.Number); got != path {
		t.Errorf("sysfs backing_file = %q, want %q", got, path)
	}
	info, err := unix.IoctlLoopGetStatus64(int(d.f.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	if info.Flags&unix.LO_FLAGS_AUTOCLEAR == 0 || info.Flags&unix.LO_FLAGS_READ_ONLY != 0 {
		t.Errorf("flags %#x: want autoclear, not read-only", info.Flags)
	}
	if got := readDevice(t, d.Path); !bytes.Equal(got, data) {
		t.Fatalf("read %d bytes through %s, they differ from the file's %d", len(got), d.Path, len(data))
	}

	// A write through the device reaches the file.
	f, err := os.OpenFile(d.Path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	patch := bytes.Repeat([]byte{0xa5}, 4096)
	if _, err := f.WriteAt(patch, 8192); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()

	n := d.Number
	if err := d.Detach(); err != nil {
		t.Fatal(err)
	}
	waitDetached(t, n)
	onDisk, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	copy(data[8192:], patch)
	if !bytes.Equal(onDisk, data) {
		t.Error("the write through the loop device did not reach the file")
	}
	if err := d.Detach(); err != nil {
		t.Errorf("second Detach: %v", err)
	}
}

// TestAttachFileKeepsLock: a flock taken on the file handed to AttachFile
// holds while the device is attached, after the caller closed the file,
// and is gone once the device let go of it.
func TestAttachFileKeepsLock(t *testing.T) {
	skipUnlessLoop(t)
	path, data := backingFile(t, 256<<10)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	d, err := AttachFile(f, Options{})
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer d.Detach()
	if got := attached(d.Number); got != path {
		t.Errorf("sysfs backing_file = %q, want %q", got, path)
	}
	if got := readDevice(t, d.Path); !bytes.Equal(got, data) {
		t.Fatal("the device does not read as the file")
	}
	other, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := unix.Flock(int(other.Fd()), unix.LOCK_SH|unix.LOCK_NB); !errors.Is(err, unix.EWOULDBLOCK) {
		t.Fatalf("flock while attached: %v, want EWOULDBLOCK", err)
	}

	n := d.Number
	d.Close() // nothing else holds it: auto-clear
	waitDetached(t, n)
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := unix.Flock(int(other.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EWOULDBLOCK) || time.Now().After(deadline) {
			t.Fatalf("flock after the device let go: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}

	// A file open read-only attaches only read-only.
	ro, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if d, err := AttachFile(ro, Options{}); err == nil {
		d.Detach()
		t.Error("AttachFile read-write of a file open read-only succeeded")
	}
	d, err = AttachFile(ro, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	d.Detach()
}

func TestReadOnlyOffsetSizeLimit(t *testing.T) {
	skipUnlessLoop(t)
	path, data := backingFile(t, 256<<10)
	opts := Options{ReadOnly: true, Offset: 4096, SizeLimit: 64 << 10, BlockSize: 4096}
	d, err := Attach(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Detach()

	info, err := unix.IoctlLoopGetStatus64(int(d.f.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	if info.Flags&unix.LO_FLAGS_READ_ONLY == 0 || info.Offset != opts.Offset || info.Sizelimit != opts.SizeLimit {
		t.Errorf("status flags %#x offset %d sizelimit %d, want read-only, %d, %d",
			info.Flags, info.Offset, info.Sizelimit, opts.Offset, opts.SizeLimit)
	}
	lbs, err := unix.IoctlGetInt(int(d.f.Fd()), unix.BLKSSZGET)
	if err != nil {
		t.Fatal(err)
	}
	if lbs != 4096 {
		t.Errorf("logical block size %d, want 4096", lbs)
	}
	want := data[opts.Offset : opts.Offset+opts.SizeLimit]
	if got := readDevice(t, d.Path); !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes, want the %d bytes at offset %d", len(got), len(want), opts.Offset)
	}
	// Depending on the kernel, the open or the write fails.
	if w, err := os.OpenFile(d.Path, os.O_WRONLY, 0); err == nil {
		_, err = w.WriteAt(make([]byte, 4096), 0)
		w.Close()
		if err == nil {
			t.Error("a write to the read-only device succeeded")
		}
	}
}

// Close without Detach must still free the device: that is what
// LO_FLAGS_AUTOCLEAR is for.
func TestCloseAutoClears(t *testing.T) {
	skipUnlessLoop(t)
	path, _ := backingFile(t, 64<<10)
	d, err := Attach(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	n := d.Number
	if attached(n) != path {
		t.Fatalf("loop%d not attached to %s", n, path)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	waitDetached(t, n)
}

// While another opener holds the device, Detach is deferred by the kernel
// until that opener closes.
func TestDetachWhileHeld(t *testing.T) {
	skipUnlessLoop(t)
	path, data := backingFile(t, 64<<10)
	d, err := Attach(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	holder, err := os.Open(d.Path)
	if err != nil {
		d.Detach()
		t.Fatal(err)
	}
	n := d.Number
	if err := d.Detach(); err != nil {
		holder.Close()
		t.Fatal(err)
	}
	buf := make([]byte, 512)
	if _, err := holder.ReadAt(buf, 1024); err != nil {
		t.Errorf("read through the held device after Detach: %v", err)
	} else if !bytes.Equal(buf, data[1024:1536]) {
		t.Error("held device returned wrong data after Detach")
	}
	holder.Close()
	waitDetached(t, n)
}

func TestAttachErrors(t *testing.T) {
	skipUnlessLoop(t)
	if _, err := Attach(filepath.Join(t.TempDir(), "missing"), Options{}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v, want ErrNotExist", err)
	}
	path, _ := backingFile(t, 4096)
	if _, err := Attach(path, Options{BlockSize: 3000}); err == nil || !strings.Contains(err.Error(), "block size") {
		t.Errorf("bad block size: %v", err)
	}
}

// TestReleaseBusyKeepsDevice: Release leaves a device that another opener
// holds attached and takes it back (ErrBusy), readable and writable as
// before; once nobody else holds it, Release detaches it at once.
func TestReleaseBusyKeepsDevice(t *testing.T) {
	skipUnlessLoop(t)
	path, data := backingFile(t, 64<<10)
	d, err := Attach(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	n := d.Number
	holder, err := os.Open(d.Path)
	if err != nil {
		d.Detach()
		t.Fatal(err)
	}
	if err := d.Release(50 * time.Millisecond); !errors.Is(err, ErrBusy) {
		holder.Close()
		d.Detach()
		t.Fatalf("Release while another opener holds it: %v, want ErrBusy", err)
	}
	holder.Close()
	// Ours again: the holder's close did not detach it, and it reads
	// and writes the file.
	if attached(n) != path {
		t.Fatalf("loop%d is attached to %q after a refused Release, want %s", n, attached(n), path)
	}
	if got := readDevice(t, d.Path); !bytes.Equal(got, data) {
		t.Error("the device reads other data after a refused Release")
	}
	if _, err := d.f.WriteAt([]byte("still ours"), 0); err != nil {
		t.Errorf("write through our handle after a refused Release: %v", err)
	}
	if err := d.Release(time.Second); err != nil {
		t.Fatalf("Release once free: %v", err)
	}
	if attached(n) != "" {
		t.Errorf("loop%d still attached after Release returned", n)
	}
	if b, _ := os.ReadFile(path); !bytes.HasPrefix(b, []byte("still ours")) {
		t.Error("the write through the device is not in the file")
	}
	if err := d.Release(time.Second); err != nil {
		t.Errorf("a second Release: %v", err)
	}
}

// TestBackedByFile: a loop device is found by the device and inode of its
// backing file, under any name: a hard link made after the device was
// attached, once the name it was attached by is gone (the path that sysfs
// shows, "NAME (deleted)", then names nothing). Another file is not.
func TestBackedByFile(t *testing.T) {
	skipUnlessLoop(t)
	path, _ := backingFile(t, 1<<20)
	d, err := Attach(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Detach()
	link := filepath.Join(filepath.Dir(path), "link")
	if err := os.Link(path, link); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(link)
	if err != nil {
		t.Fatal(err)
	}
	if byPath, _ := BackedBy(link); len(byPath) != 0 {
		t.Fatalf("BackedBy found %v by the link's path: the test does not test what it says", byPath)
	}
	got, err := BackedByFile(fi)
	if err != nil || len(got) != 1 || got[0] != d.Path {
		t.Fatalf("BackedByFile(link) = %v, %v; want [%s]", got, err, d.Path)
	}
	other := filepath.Join(filepath.Dir(path), "other")
	if err := os.WriteFile(other, make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	ofi, _ := os.Stat(other)
	if got, err := BackedByFile(ofi); err != nil || len(got) != 0 {
		t.Fatalf("BackedByFile(another file) = %v, %v", got, err)
	}
}
