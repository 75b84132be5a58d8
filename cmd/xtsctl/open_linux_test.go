//go:build linux

package main

// End-to-end tests of open, close and status with real devices: the test
// binary runs as xtsctl (TestMain), open re-executes it as the server, and
// every test checks at its end that no server, loop device or mount is
// left behind.

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/xtsctl/xtsctl/blockdev"
	"github.com/xtsctl/xtsctl/blockdev/fusefile"
	"github.com/xtsctl/xtsctl/internal/loopdev"
	"github.com/xtsctl/xtsctl/internal/mount"
	"github.com/xtsctl/xtsctl/internal/testutil"
)

// skipUnlessServing skips unless this process can open volumes: root,
// /dev/fuse, loop devices and e2fsprogs (CI has them all).
func skipUnlessServing(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("open needs root")
	}
	if err := blockdev.Available(); err != nil {
		t.Skipf("no FUSE: %v", err)
	}

	for _, tool := range []string{"mkfs.ext4", "e2fsck", "debugfs"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s missing (scripts/install-deps.sh installs e2fsprogs)", tool)
		}
	}
}

// servingEnv gives the test its own run directory (short: the control
// socket path must fit in 108 bytes) and checks for leftovers at the end.
func servingEnv(t *testing.T) (dir string) {
	t.Helper()
	testutil.ServingTest(t) // released after the cleanup below
	run, err := os.MkdirTemp("/tmp", "xr")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("XTSCTL_RUNDIR", run)
	dir = t.TempDir()
	t.Cleanup(func() {
		// Close whatever a failed test left open, then insist that
		// nothing remains: no record, server, loop device or mount.
		entries, _ := blockdev.List(blockdev.Options{})
		for _, e := range entries {
			t.Errorf("volume %s still open at the end of the test", e.Name)
			if e.PID > 0 {
				syscall.Kill(e.PID, syscall.SIGKILL)
			}
			exec.Command("xtsctl", "close", e.Name).Run()
		}
		checkNothingLeft(t, run, dir)
		os.RemoveAll(run)
	})
	return dir
}

func checkNothingLeft(t *testing.T, run, dir string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		var left []string
		mounts, _ := os.ReadFile("/proc/self/mountinfo")
		for line := range strings.SplitSeq(string(mounts), "\n") {
			if strings.Contains(line, run) || strings.Contains(line, dir) {
				left = append(left, "mount: "+line)
			}
		}
		files, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
		for _, f := range files {
			b, _ := os.ReadFile(f)
			if strings.HasPrefix(string(b), run) || strings.HasPrefix(string(b), dir) {
				left = append(left, "loop device "+f+" on "+strings.TrimSpace(string(b)))
			}
		}
		procs, _ := filepath.Glob("/proc/[0-9]*/environ")
		for _, p := range procs {
			b, _ := os.ReadFile(p)
			if bytes.Contains(b, []byte("XTSCTL_RUNDIR="+run+"\x00")) && !strings.Contains(p, "/"+strconv.Itoa(os.Getpid())+"/") {
				if running(atoi(strings.Split(p, "/")[2])) {
					left = append(left, "process "+p)
				}
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("left behind:\n%s", strings.Join(left, "\n"))
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

// result is one run of the xtsctl command.
type result struct {
	stdout, stderr string
	code           int
}

// xtsctlRun runs the xtsctl command (this test binary) as a process.
func xtsctlRun(t *testing.T, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := exec.Command("xtsctl", args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return result{out.String(), errb.String(), code}
}

// mustRun runs xtsctl and fails the test unless it exits 0.
func mustRun(t *testing.T, args ...string) result {
	t.Helper()
	r := xtsctlRun(t, args...)
	if r.code != 0 {
		t.Fatalf("xtsctl %s: exit %d\n%s", strings.Join(args, " "), r.code, r.stderr)
	}
	return r
}

// mustFail runs xtsctl and checks its exit code and error message.
func mustFail(t *testing.T, code int, msg string, args ...string) result {
	t.Helper()
	r := xtsctlRun(t, args...)
	if r.code != code || !strings.Contains(r.stderr, msg) {
		t.Fatalf("xtsctl %s: exit %d, stderr %q; want exit %d and %q", strings.Join(args, " "), r.code, r.stderr, code, msg)
	}
	return r
}

// plainImage makes a zero-filled image and a key and returns the flags
// that open it.
func plainImage(t *testing.T, dir string, size int64) (img string, flags []string) {
	t.Helper()
	img = filepath.Join(dir, "disk.enc")
	key := filepath.Join(dir, "disk.key")
	k := make([]byte, 64)
	rand.Read(k)
	if err := os.WriteFile(key, k, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, size); err != nil {
		t.Fatal(err)
	}
	return img, []string{"--type", "plain", "--key-file", key, "--sector-size", "4096"}
}

func args(parts ...any) []string {
	var out []string
	for _, p := range parts {
		switch v := p.(type) {
		case string:
			out = append(out, v)
		case []string:
			out = append(out, v...)
		}
	}
	return out
}

// formatExt4 opens img, makes an ext4 filesystem on it and closes it.
func formatExt4(t *testing.T, img, name string, flags []string) {
	t.Helper()
	dev := strings.TrimSpace(mustRun(t, args("open", flags, img, name)...).stdout)
	if !strings.HasPrefix(dev, "/dev/loop") {
		t.Fatalf("open printed %q, want a loop device", dev)
	}
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", dev).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v\n%s", err, out)
	}
	mustRun(t, "close", name)
}

// statusOf returns status --json for name.
func statusOf(t *testing.T, name string) blockdev.VolumeDoc {
	t.Helper()
	var doc blockdev.StatusDoc
	out := mustRun(t, "status", "--json", name).stdout
	if err := json.Unmarshal([]byte(out), &doc); err != nil || len(doc.Volumes) != 1 || doc.Schema != blockdev.StatusSchema {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	return doc.Volumes[0]
}

func writeSynced(t *testing.T, path string, data []byte) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// fileSizes are the sizes the end-to-end tests write: empty, around a
// sector and a block, and multi-megabyte.
var fileSizes = []int{0, 1, 511, 4095, 4096, 4097, 65536 + 3, 1<<20 + 7, 5 << 20}

func makeFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	for _, n := range fileSizes {
		data := make([]byte, n)
		rand.Read(data)
		name := fmt.Sprintf("f%d", n)
		writeSynced(t, filepath.Join(dir, name), data)
		files[name] = data
	}
	return files
}

func checkFiles(t *testing.T, dir string, files map[string][]byte) {
	t.Helper()
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Errorf("%s: %v", name, err)
		} else if !bytes.Equal(got, want) {
			t.Errorf("%s: %d bytes read back differ from the %d written", name, len(got), len(want))
		}
	}
}

// TestOpenMountCloseRoundTrip: format, open, mount, write files of several
// sizes, close, open read-only, compare, close; then decrypt the image
// without FUSE and check the filesystem and the files in it with
// e2fsck and debugfs.
func TestOpenMountCloseRoundTrip(t *testing.T) {
	skipUnlessServing(t)
	dir := servingEnv(t)
	img, flags := plainImage(t, dir, 64<<20)
	formatExt4(t, img, "rt", flags)

	mnt := filepath.Join(dir, "mnt")
	os.Mkdir(mnt, 0o755)
	r := mustRun(t, args("open", flags, "--mount", mnt, img, "rt")...)
	dev := strings.TrimSpace(r.stdout)
	if !strings.Contains(r.stderr, "mounted on "+mnt) || strings.Contains(r.stderr, "warning") {
		t.Errorf("open did not report the mount, or warned: %q", r.stderr)
	}
	if src := mount.Source(mnt); src != dev {
		t.Fatalf("%s is mounted from %q, want %s", mnt, src, dev)
	}
	files := makeFiles(t, mnt)
	vs := statusOf(t, "rt")
	if vs.State != "open" || vs.Device != dev || vs.Mountpoint != mnt || vs.FSType != "ext4" {
		t.Errorf("status: %+v %+v", vs, vs.State)
	}
	want := blockdev.Cipher{Name: "aes-xts-plain64", KeyBits: 512, SectorSize: 4096}
	if vs.Cipher == nil || *vs.Cipher != want {
		t.Errorf("status cipher %+v, want %+v", vs.Cipher, want)
	}
	// The run directory's internals stay out of status --json.
	if raw := mustRun(t, "status", "--json").stdout; strings.Contains(raw, "image_ino") || strings.Contains(raw, "pid_start") || !strings.Contains(raw, `"schema": "xtsctl-status/1"`) {
		t.Errorf("status --json:\n%s", raw)
	}
	if vs.Stats == nil || vs.Stats.Writes == 0 || vs.Stats.WriteBytes < 5<<20 || vs.Stats.Syncs == 0 {
		t.Errorf("status counters after writing and syncing files: %+v", vs.Stats)
	}
	// The transport is the one this kernel offers: io_uring where the
	// fuse module has it enabled (scripts/test.bash runs both ways).
	transport := "/dev/fuse"
	if fusefile.RingAvailable() {
		transport = "over io_uring"
	}
	if vs.Stats != nil && !strings.HasPrefix(vs.Stats.Transport, transport) {
		t.Errorf("status transport %q, want %q", vs.Stats.Transport, transport)
	}
	text := mustRun(t, "status").stdout
	for _, want := range []string{"rt: open", "device:     " + dev, "mounted on: " + mnt + " (ext4)", "integrity errors: 0", "FUSE:       " + transport} {
		if !strings.Contains(text, want) {
			t.Errorf("status output lacks %q:\n%s", want, text)
		}
	}
	mustRun(t, "close", "rt")
	if mount.Source(mnt) != "" {
		t.Fatal("close left the filesystem mounted")
	}

	// A file in the mountpoint: open warns that the mount hides it.
	under := filepath.Join(mnt, "under")
	if err := os.WriteFile(under, []byte("hidden"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Read-only, in each spelling (cryptsetup's --readonly and -r too).
	for _, ro := range []string{"--read-only", "--readonly", "-r"} {
		r := mustRun(t, args("open", flags, ro, "--mount", mnt, img, "rt")...)
		if want := "warning: mountpoint " + mnt + " is not empty: what it holds is hidden while rt is mounted on it"; !strings.Contains(r.stderr, want) {
			t.Errorf("open over a non-empty directory: %q, want %q", r.stderr, want)
		}
		checkFiles(t, mnt, files)
		if err := os.WriteFile(filepath.Join(mnt, "new"), []byte("x"), 0o600); !errors.Is(err, syscall.EROFS) {
			t.Errorf("writing to an open with %s: %v, want EROFS", ro, err)
		}
		if vs := statusOf(t, "rt"); !vs.ReadOnly {
			t.Errorf("status after open %s: not read-only: %+v", ro, vs)
		}
		mustRun(t, "close", "rt")
	}
	if b, err := os.ReadFile(under); err != nil || string(b) != "hidden" {
		t.Errorf("the file under the mountpoint after close: %q, %v", b, err)
	}

	// Independent check: decrypt the image with the offline path and
	// read the filesystem with e2fsprogs, no FUSE or loop involved.
	plain := filepath.Join(dir, "disk.img")
	mustRun(t, args("decrypt", flags, img, plain)...)
	if out, err := exec.Command("e2fsck", "-f", "-n", plain).CombinedOutput(); err != nil {
		t.Fatalf("e2fsck on the decrypted image: %v\n%s", err, out)
	}
	for name, want := range files {
		out := filepath.Join(dir, "dump-"+name)
		if msg, err := exec.Command("debugfs", "-R", "dump /"+name+" "+out, plain).CombinedOutput(); err != nil {
			t.Fatalf("debugfs dump %s: %v\n%s", name, err, msg)
		}
		got, _ := os.ReadFile(out)
		if !bytes.Equal(got, want) {
			t.Errorf("%s in the decrypted image differs from what was written", name)
		}
	}
}

// TestOpenRefusals: the documented refusals, each leaving nothing behind.
func TestOpenRefusals(t *testing.T) {
	skipUnlessServing(t)
	dir := servingEnv(t)
	img, flags := plainImage(t, dir, 16<<20)
	os.Mkdir(filepath.Join(dir, "second"), 0o700)
	img2, _ := plainImage(t, filepath.Join(dir, "second"), 16<<20)
	mnt := filepath.Join(dir, "mnt")
	os.Mkdir(mnt, 0o755)

	// No filesystem yet: --mount fails, nothing stays attached. For a
	// plain image the hint puts a wrong key first, and mkfs last, saying
	// what it erases.
	r := mustFail(t, exitDevice, "no filesystem found", args("open", flags, "--mount", mnt, img, "r1")...)
	if wrong, mkfs := strings.Index(r.stderr, "a wrong key"), strings.Index(r.stderr, "mkfs erases"); wrong < 0 || mkfs < wrong {
		t.Errorf("hints: %s", r.stderr)
	}
	if entries, _ := blockdev.List(blockdev.Options{}); len(entries) != 0 {
		t.Fatalf("a failed open left a record: %v", entries[0].Name)
	}
	checkNothingLeft(t, os.Getenv("XTSCTL_RUNDIR"), dir)

	formatExt4(t, img, "r1", flags)
	// A mount failure (wrong type) also leaves nothing attached.
	mustFail(t, exitDevice, "mount /dev/loop", args("open", flags, "--mount", mnt, "--fstype", "xfs", img, "r1")...)
	checkNothingLeft(t, os.Getenv("XTSCTL_RUNDIR"), dir)

	mustFail(t, exitUsage, "mountpoint "+filepath.Join(dir, "nope")+" does not exist", args("open", flags, "--mount", filepath.Join(dir, "nope"), img, "r1")...)
	mustFail(t, exitUsage, "--fstype needs --mount", args("open", flags, "--fstype", "ext4", img, "r1")...)
	mustFail(t, exitUsage, `invalid NAME "a/b"`, args("open", flags, img, "a/b")...)
	mustFail(t, exitInput, "image "+filepath.Join(dir, "missing")+" does not exist", args("open", flags, filepath.Join(dir, "missing"), "r1")...)
	mustFail(t, exitUsage, "r1 is not open", "close", "r1")

	mustRun(t, args("open", flags, "--mount", mnt, img, "r1")...)
	mustFail(t, exitDevice, "r1 is already open", args("open", flags, img2, "r1")...)
	mustFail(t, exitDevice, "image "+img+" is already open as r1", args("open", flags, img, "r2")...)

	// A busy filesystem keeps the volume open; close works once freed.
	f, err := os.Open(filepath.Join(mnt, "lost+found"))
	if err != nil {
		t.Fatal(err)
	}
	mustFail(t, exitDevice, mnt+" is busy", "close", "r1")
	if vs := statusOf(t, "r1"); vs.State != "open" || mount.Source(mnt) == "" {
		t.Fatalf("a refused close changed the volume: state %s", vs.State)
	}
	f.Close()
	mustRun(t, "close", "r1")
}

// TestKillServerDuringWrites: SIGKILL the server while a writer is busy.
// status reports it dead, the next open cleans up (with a warning) and
// serves again; fsck is clean and every file synced before the kill is
// intact.
func TestKillServerDuringWrites(t *testing.T) {
	skipUnlessServing(t)
	dir := servingEnv(t)
	img, flags := plainImage(t, dir, 64<<20)
	formatExt4(t, img, "k", flags)
	mnt := filepath.Join(dir, "mnt")
	os.Mkdir(mnt, 0o755)
	mustRun(t, args("open", flags, "--mount", mnt, img, "k")...)
	synced := makeFiles(t, mnt)
	sums := map[string][32]byte{}
	for name, data := range synced {
		sums[name] = sha256.Sum256(data)
	}

	// A writer appends 64 KiB chunks and fsyncs each; the ones whose
	// fsync returned were promised durable and must survive the kill.
	unsynced := filepath.Join(mnt, "appending")
	type chunk struct {
		n    int
		data []byte
	}
	durable := make(chan chunk, 1<<12)
	writerDone := make(chan error, 1)
	go func() {
		f, err := os.Create(unsynced)
		if err != nil {
			writerDone <- err
			return
		}
		defer f.Close()
		for n := 0; ; n++ {
			data := make([]byte, 64<<10)
			rand.Read(data)
			if _, err := f.WriteAt(data, int64(n)*int64(len(data))); err != nil {
				writerDone <- err
				return
			}
			if err := f.Sync(); err != nil {
				writerDone <- err
				return
			}
			durable <- chunk{n, data}
			if n >= 1<<12-1 {
				writerDone <- errors.New("the writer was never interrupted")
				return
			}
		}
	}()
	for len(durable) < 16 {
		time.Sleep(5 * time.Millisecond)
	}
	e := serverOf(t, "k")
	if err := syscall.Kill(e.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := <-writerDone; !errors.Is(err, syscall.EIO) && !errors.Is(err, syscall.ENOTCONN) && !errors.Is(err, syscall.EROFS) {
		t.Errorf("the writer ended with %v, want an I/O error from the dead device", err)
	}
	close(durable)
	for running(e.PID) {
		time.Sleep(10 * time.Millisecond)
	}
	if vs := statusOf(t, "k"); vs.State != "dead" {
		t.Errorf("status after SIGKILL: %s, want dead", vs.State)
	}

	// Open again: the stale mount, loop device and FUSE mount go first.
	r := mustRun(t, args("open", flags, img, "k")...)
	if !strings.Contains(r.stderr, "warning: k was left open by a server that died") {
		t.Errorf("open after a crash did not warn about the cleanup: %q", r.stderr)
	}
	dev := strings.TrimSpace(r.stdout)
	// The journal is replayed by mounting; then fsck must find nothing.
	if err := mount.Mount(dev, mnt, "ext4", false); err != nil {
		t.Fatal(err)
	}
	for name, data := range synced {
		got, err := os.ReadFile(filepath.Join(mnt, name))
		if err != nil || sha256.Sum256(got) != sums[name] {
			t.Errorf("synced file %s lost or changed by the crash (err %v, %d bytes of %d)", name, err, len(got), len(data))
		}
	}
	appended, err := os.ReadFile(unsynced)
	if err != nil {
		t.Fatal(err)
	}
	chunks := 0
	for c := range durable {
		chunks++
		at := c.n * len(c.data)
		if len(appended) < at+len(c.data) || !bytes.Equal(appended[at:at+len(c.data)], c.data) {
			t.Errorf("chunk %d was fsynced before the kill but is lost or changed", c.n)
		}
	}
	t.Logf("%d fsynced chunks survived the kill", chunks)
	if err := mount.Unmount(mnt); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("e2fsck", "-f", "-n", dev).CombinedOutput(); err != nil {
		t.Errorf("e2fsck after the crash: %v\n%s", err, out)
	}
	mustRun(t, "close", "k")

	// close also cleans up after a dead server.
	mustRun(t, args("open", flags, img, "k")...)
	e = serverOf(t, "k")
	syscall.Kill(e.PID, syscall.SIGKILL)
	for running(e.PID) {
		time.Sleep(10 * time.Millisecond)
	}
	r = mustRun(t, "close", "k")
	if !strings.Contains(r.stderr, "cleaned up") {
		t.Errorf("close of a dead volume: %q", r.stderr)
	}
}

// TestConcurrentReadersWriters: dd processes and goroutines write and read
// files on the mounted volume at once; everything reads back the same,
// also after the caches are gone (close, reopen).
func TestConcurrentReadersWriters(t *testing.T) {
	skipUnlessServing(t)
	dir := servingEnv(t)
	img, flags := plainImage(t, dir, 128<<20)
	formatExt4(t, img, "c", flags)
	mnt := filepath.Join(dir, "mnt")
	os.Mkdir(mnt, 0o755)
	mustRun(t, args("open", flags, "--mount", mnt, img, "c")...)

	const n, size = 3, 8 << 20
	want := map[string][]byte{}
	var cmds []*exec.Cmd
	for i := range n {
		src := filepath.Join(dir, fmt.Sprintf("src%d", i))
		data := make([]byte, size)
		rand.Read(data)
		os.WriteFile(src, data, 0o600)
		name := fmt.Sprintf("dd%d", i)
		want[name] = data
		oflag := "oflag=direct"
		if i%2 == 1 {
			oflag = "conv=fsync"
		}
		cmd := exec.Command("dd", "if="+src, "of="+filepath.Join(mnt, name), "bs=256k", oflag, "status=none")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	errs := make(chan error, n)
	for i := range n {
		data := make([]byte, size)
		rand.Read(data)
		name := fmt.Sprintf("go%d", i)
		want[name] = data
		go func() {
			path := filepath.Join(mnt, name)
			f, err := os.Create(path)
			if err != nil {
				errs <- err
				return
			}
			defer f.Close()
			// Write in pieces, re-reading what is there as we go.
			for off := 0; off < size; off += 1 << 20 {
				if _, err := f.WriteAt(data[off:off+1<<20], int64(off)); err != nil {
					errs <- err
					return
				}
				if err := f.Sync(); err != nil {
					errs <- err
					return
				}
				got := make([]byte, off+1<<20)
				if _, err := f.ReadAt(got, 0); err != nil || !bytes.Equal(got, data[:off+1<<20]) {
					errs <- fmt.Errorf("%s: read back after %d bytes differs (err %v)", name, off+1<<20, err)
					return
				}
			}
			errs <- nil
		}()
	}
	for _, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Errorf("dd: %v", err)
		}
	}
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	checkFiles(t, mnt, want)
	mustRun(t, "close", "c")
	mustRun(t, args("open", flags, "--read-only", "--mount", mnt, img, "c")...)
	checkFiles(t, mnt, want)
	mustRun(t, "close", "c")
}

// TestLoopdevBackedBy: the loopdev helpers stale cleanup relies on find
// a device by its file, and detaching one twice is harmless.
func TestLoopdevBackedBy(t *testing.T) {
	skipUnlessServing(t)
	dir := t.TempDir()
	f := filepath.Join(dir, "file")
	os.WriteFile(f, make([]byte, 1<<20), 0o600)
	d, err := loopdev.Attach(f, loopdev.Options{})
	if err != nil {
		t.Fatal(err)
	}
	devs, err := loopdev.BackedBy(f)
	if err != nil || len(devs) != 1 || devs[0] != d.Path {
		d.Close()
		t.Fatalf("BackedBy = %v, %v; want [%s]", devs, err, d.Path)
	}
	// While we hold it, LOOP_CLR_FD only marks it; closing completes it.
	if err := loopdev.DetachPath(d.Path); err != nil {
		t.Error(err)
	}
	d.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		devs, _ = loopdev.BackedBy(f)
		if len(devs) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still attached after DetachPath and Close: %v", devs)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := loopdev.DetachPath(d.Path); err != nil {
		t.Errorf("detaching a free device: %v", err)
	}
}

// TestOpenNamesMissingDevices: without /dev/fuse or /dev/loop-control,
// open says which one is missing. The test hides them in a private mount
// namespace (a tmpfs over /dev with only what else is needed bound back).
func TestOpenNamesMissingDevices(t *testing.T) {
	skipUnlessServing(t)
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("unshare missing")
	}
	testutil.MountNamespaceTest(t)
	dir := servingEnv(t)
	img, flags := plainImage(t, dir, 4<<20)
	loops, _ := filepath.Glob("/dev/loop[0-9]*")
	for _, c := range []struct {
		keep []string
		want string
	}{
		{append([]string{"loop-control"}, trimDev(loops)...), "FUSE is not available: /dev/fuse is missing"},
		{[]string{"fuse"}, "loop devices are not available: /dev/loop-control is missing"},
	} {
		orig := filepath.Join(dir, "origdev")
		os.MkdirAll(orig, 0o700)
		script := `set -e
mount --rbind /dev "$ORIG"
mount -t tmpfs none /dev
for n in null zero urandom $KEEP; do touch /dev/$n; mount --bind "$ORIG/$n" /dev/$n; done
exec xtsctl "$@"`
		cmd := exec.Command("unshare", append([]string{"--mount", "--propagation", "private", "sh", "-c", script, "sh", "open"}, args(flags, img, "m")...)...)
		cmd.Env = append(os.Environ(), "ORIG="+orig, "KEEP="+strings.Join(c.keep, " "))
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitDevice || !strings.Contains(string(out), c.want) {
			t.Errorf("open without /dev/%s: %v\n%s\nwant exit %d and %q", map[bool]string{true: "fuse", false: "loop-control"}[c.keep[0] == "loop-control"], err, out, exitDevice, c.want)
		}
	}
}

func trimDev(paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = strings.TrimPrefix(p, "/dev/")
	}
	return out
}

// TestServerSIGTERM: SIGTERM (system shutdown) closes a volume cleanly on
// its own: unmounted, detached, record removed, image flushed.
func TestServerSIGTERM(t *testing.T) {
	skipUnlessServing(t)
	dir := servingEnv(t)
	img, flags := plainImage(t, dir, 32<<20)
	formatExt4(t, img, "t", flags)
	mnt := filepath.Join(dir, "mnt")
	os.Mkdir(mnt, 0o755)
	mustRun(t, args("open", flags, "--mount", mnt, img, "t")...)
	files := makeFiles(t, mnt)
	e := serverOf(t, "t")
	if err := syscall.Kill(e.PID, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for running(e.PID) {
		if time.Now().After(deadline) {
			t.Fatal("the server did not exit on SIGTERM")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := blockdev.StatusOf("t", blockdev.Options{}); !errors.Is(err, blockdev.ErrNotOpen) {
		t.Errorf("after SIGTERM the record is still there (%v)", err)
	}
	checkNothingLeft(t, os.Getenv("XTSCTL_RUNDIR"), dir)
	mustRun(t, args("open", flags, "--read-only", "--mount", mnt, img, "t")...)
	checkFiles(t, mnt, files)
	mustRun(t, "close", "t")
}

// serverOf returns the record of the open NAME, which names its server.
func serverOf(t *testing.T, name string) blockdev.State {
	t.Helper()
	st, err := blockdev.StatusOf(name, blockdev.Options{})
	if err != nil || st.PID == 0 {
		t.Fatalf("no server for %s: %+v, %v", name, st, err)
	}
	return st.State
}

// running reports whether process pid exists and is not a zombie (a
// zombie serves nothing).
func running(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	i := bytes.LastIndexByte(b, ')')
	return err == nil && i >= 0 && i+2 < len(b) && b[i+2] != 'Z'
}
