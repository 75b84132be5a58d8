//go:build linux

package fusefile

import (
	"bytes"
	"crypto/rand"
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

	"github.com/xtsctl/xtsctl/internal/mount"
	"golang.org/x/sys/unix"
)

// skipUnlessDevices skips tests that need root, FUSE and loop devices.
func skipUnlessDevices(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("serving needs root (mount, loop devices)")
	}
	if err := CheckFUSE(); err != nil {
		t.Skipf("no FUSE: %v", err)
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		t.Skipf("no loop devices: %v", err)
	}
}

// fileStore is a Store over a file that holds plaintext, from an offset:
// no encryption, since the FUSE file, the loop device and the ring are
// what this package's tests test (package blockdev tests its real stores
// through them). It offers the ring's direct reads, as real stores do.
type fileStore struct {
	f       *os.File
	ss      int
	start   int64
	sectors uint64
}

func (s *fileStore) SectorSize() int { return s.ss }
func (s *fileStore) Sectors() uint64 { return s.sectors }
func (s *fileStore) ReadSectors(buf []byte, first uint64) error {
	_, err := s.f.ReadAt(buf, s.start+int64(first)*int64(s.ss))
	return err
}
func (s *fileStore) WriteSectors(buf []byte, first uint64) error {
	_, err := s.f.WriteAt(buf, s.start+int64(first)*int64(s.ss))
	return err
}
func (s *fileStore) Sync() error  { return s.f.Sync() }
func (s *fileStore) Close() error { return s.f.Close() }
func (s *fileStore) ReadPlan(first uint64, n int) (int, int64, int, int64, int) {
	return int(s.f.Fd()), s.start + int64(first)*int64(s.ss), -1, 0, 0
}
func (s *fileStore) FinishRead(buf, tags []byte, first uint64) error { return nil }

// A plainImage is a file of random plaintext after an offset.
type plainImage struct {
	path   string
	ss     int
	offset int64
}

// newPlainImage makes an image of size bytes of random data in sectors of
// ss bytes after offset bytes.
func newPlainImage(t testing.TB, size int64, ss int, offset int64) *plainImage {
	t.Helper()
	path := filepath.Join(t.TempDir(), "image")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	f.Write(make([]byte, offset))
	for left := size; left > 0; left -= int64(len(buf)) {
		rand.Read(buf)
		f.Write(buf[:min(left, int64(len(buf)))])
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return &plainImage{path: path, ss: ss, offset: offset}
}

// plaintext reads the image's data, independently of the server.
func (im *plainImage) plaintext(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile(im.path)
	if err != nil {
		t.Fatal(err)
	}
	return b[im.offset:]
}

// store opens the image as a fileStore.
func (im *plainImage) store(t testing.TB, readOnly bool) *fileStore {
	t.Helper()
	flag := os.O_RDWR
	if readOnly {
		flag = os.O_RDONLY
	}
	f, err := os.OpenFile(im.path, flag, 0)
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := f.Stat()
	return &fileStore{f: f, ss: im.ss, start: im.offset, sectors: uint64((fi.Size() - im.offset) / int64(im.ss))}
}

// A transport is how a test's server takes FUSE requests: /dev/fuse, or
// FUSE over io_uring where the kernel offers it.
type transport struct{ ring bool }

func (tr transport) String() string {
	if tr.ring {
		return "uring"
	}
	return "devfuse"
}

// check fails t unless srv uses the transport asked for: a test of the
// ring must not pass by quietly falling back to /dev/fuse.
func (tr transport) check(t testing.TB, srv *Server) {
	t.Helper()
	if got := strings.Contains(srv.Transport(), "io_uring"); got != tr.ring {
		t.Fatalf("server transport is %q, want ring=%v", srv.Transport(), tr.ring)
	}
}

// forTransports runs f as a subtest for each transport this kernel has.
func forTransports(t *testing.T, f func(t *testing.T, tr transport)) {
	trs := []transport{{ring: false}}
	if RingAvailable() {
		trs = append(trs, transport{ring: true})
	} else {
		t.Log("FUSE over io_uring not usable here (fuse.enable_uring off, or io_uring disabled): testing /dev/fuse only")
	}
	for _, tr := range trs {
		t.Run(tr.String(), func(t *testing.T) { f(t, tr) })
	}
}

// start serves im through FUSE and a loop device; cleanup stops the
// server and checks that no loop device or mount is left.
func (im *plainImage) start(t testing.TB, readOnly bool, tr transport) (*Server, *Disk) {
	t.Helper()
	store := im.store(t, readOnly)
	dev := NewDisk(store, readOnly, t.Logf)
	dir := filepath.Join(t.TempDir(), "fuse")
	os.Mkdir(dir, 0o700)
	srv, err := Start(dev, Options{Dir: dir, Name: im.path, Debug: testing.Verbose() && os.Getenv("FUSEDEBUG") != "", NoRing: !tr.ring})
	if err != nil {
		store.Close()
		t.Fatal(err)
	}
	tr.check(t, srv)
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			if err := srv.Stop(); err != nil {
				t.Error(err)
			}
			store.Close()
		}
		checkNoLeaks(t, srv.filePath(), dir)
	})
	return srv, dev
}

// checkNoLeaks fails t if a loop device is still backed by file or
// anything is still mounted on dir.
func checkNoLeaks(t testing.TB, file, dir string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		loops := loopsBackedBy(file)
		src := mount.Source(dir)
		if len(loops) == 0 && src == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("leaked: loop devices %v backed by %s; mount %q on %s", loops, file, src, dir)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func loopsBackedBy(path string) []string {
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

func sysLoop(t testing.TB, n int, attr string) string {
	b, err := os.ReadFile(filepath.Join("/sys/block", "loop"+strconv.Itoa(n), "loop", attr))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// TestLoopServesPlaintext reads and writes the loop device and checks the
// image against an independent decryption.
func TestLoopServesPlaintext(t *testing.T) {
	skipUnlessDevices(t)
	forTransports(t, testLoopServesPlaintext)
}

func testLoopServesPlaintext(t *testing.T, tr transport) {
	for _, ss := range []int{512, 4096} {
		t.Run("sector="+strconv.Itoa(ss), func(t *testing.T) {
			size := int64(8 << 20)
			if raceEnabled {
				size = 256 << 10
			}
			im := newPlainImage(t, size, ss, 8*512)
			srv, _ := im.start(t, false, tr)
			loop := srv.LoopDevice()
			if got := sysLoop(t, loop.Number, "dio"); got != "1" {
				t.Errorf("loop device does not use direct I/O (dio=%s)", got)
			}
			want := im.plaintext(t)
			got, err := os.ReadFile(loop.Path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("device reads differ from the decrypted image")
			}

			f, err := os.OpenFile(loop.Path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			patch := make([]byte, size*3/8)
			rand.Read(patch)
			at := size/8 + 4096
			if _, err := f.WriteAt(patch, at); err != nil {
				t.Fatal(err)
			}
			if err := f.Sync(); err != nil {
				t.Fatal(err)
			}
			copy(want[at:], patch)
			if got := im.plaintext(t); !bytes.Equal(got, want) {
				t.Fatalf("image after a synced write through the device differs from what was written")
			}
		})
	}
}

// startStore serves store through FUSE and a loop device for the test.
func startStore(t testing.TB, store Store, readOnly bool, tr transport) (*Server, *Disk) {
	t.Helper()
	dev := NewDisk(store, readOnly, t.Logf)
	dir := filepath.Join(t.TempDir(), "fuse")
	os.Mkdir(dir, 0o700)
	srv, err := Start(dev, Options{Dir: dir, Name: "test", NoRing: !tr.ring})
	if err != nil {
		t.Fatal(err)
	}
	tr.check(t, srv)
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Error(err)
		}
		checkNoLeaks(t, srv.filePath(), dir)
	})
	return srv, dev
}

// TestLoopIntegrityErrorIsEIO: with a filesystem on the device, a file
// whose data sits on a sector that fails verification reads as EIO, the
// other files still read, and the counters name the sector.
func TestLoopIntegrityErrorIsEIO(t *testing.T) {
	skipUnlessDevices(t)
	forTransports(t, testLoopIntegrityErrorIsEIO)
}

func testLoopIntegrityErrorIsEIO(t *testing.T, tr transport) {
	mkfs, err := exec.LookPath("mkfs.ext4")
	if err != nil {
		t.Skip("mkfs.ext4 missing (scripts/install-deps.sh installs e2fsprogs)")
	}
	store := newMemStore(t, 4096, 4096) // 16 MiB
	srv, dev := startStore(t, store, false, tr)
	loop := srv.LoopDevice().Path
	if out, err := exec.Command(mkfs, "-q", "-F", loop).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v\n%s", err, out)
	}
	mnt := t.TempDir()
	if err := mount.Mount(loop, mnt, "ext4", false); err != nil {
		t.Fatal(err)
	}
	mounted := true
	defer func() {
		// A failed test must not leave the filesystem mounted on a loop
		// device whose server is gone: detach it if it will not unmount.
		if mounted && mount.Unmount(mnt) != nil {
			unix.Unmount(mnt, unix.MNT_DETACH)
		}
	}()
	victim := make([]byte, 8*4096) // random, so each block is found once
	rand.Read(victim)
	other := bytes.Repeat([]byte{0x5A}, 3*4096)
	for name, data := range map[string][]byte{"victim": victim, "other": other} {
		if err := os.WriteFile(filepath.Join(mnt, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	exec.Command("sync").Run()
	// The store holds plaintext: find the victim's third block in it.
	store.mu.Lock()
	at := bytes.Index(store.data, victim[2*4096:3*4096])
	if at < 0 || at%4096 != 0 {
		store.mu.Unlock()
		t.Fatalf("victim block not found sector-aligned in the store (at %d)", at)
	}
	bad := uint64(at / 4096)
	store.bad[bad] = true
	store.mu.Unlock()
	dropCache(t, filepath.Join(mnt, "victim"))
	dropCache(t, filepath.Join(mnt, "other"))
	_, err = os.ReadFile(filepath.Join(mnt, "victim"))
	if !errors.Is(err, syscall.EIO) {
		t.Errorf("reading the file on the bad sector: %v, want EIO", err)
	}
	got, err := os.ReadFile(filepath.Join(mnt, "other"))
	if err != nil || !bytes.Equal(got, other) {
		t.Errorf("reading another file: err %v, intact %v", err, bytes.Equal(got, other))
	}
	st := dev.Counters.Snapshot()
	if st.IntegrityErrors == 0 || len(st.BadSectors) != 1 || st.BadSectors[0] != bad {
		t.Errorf("counters: %d integrity errors, bad sectors %v; want some, [%d]", st.IntegrityErrors, st.BadSectors, bad)
	}
	if err := mount.Unmount(mnt); err != nil {
		t.Fatal(err)
	}
	mounted = false
}

// TestLoopConcurrentProcesses: dd processes and goroutines write and read
// disjoint ranges of the device at once, then everything is checked
// against an independent decryption of the image.
func TestLoopConcurrentProcesses(t *testing.T) {
	skipUnlessDevices(t)
	forTransports(t, testLoopConcurrentProcesses)
}

func testLoopConcurrentProcesses(t *testing.T, tr transport) {
	const chunk = 2 << 20
	const procs, goroutines = 3, 3
	im := newPlainImage(t, (procs+goroutines)*chunk, 4096, 0)
	srv, _ := im.start(t, false, tr)
	loop := srv.LoopDevice().Path
	want := im.plaintext(t)
	dir := t.TempDir()
	var cmds []*exec.Cmd
	for i := range procs {
		data := make([]byte, chunk)
		rand.Read(data)
		src := filepath.Join(dir, "src"+strconv.Itoa(i))
		os.WriteFile(src, data, 0o600)
		copy(want[i*chunk:], data)
		// Unaligned 3000-byte blocks through the page cache, so the
		// kernel merges and splits them as it likes.
		cmd := exec.Command("dd", "if="+src, "of="+loop, "bs=3000", "seek="+strconv.Itoa(i*chunk), "oflag=seek_bytes", "conv=notrunc,fsync", "status=none")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	errs := make(chan error, goroutines)
	for g := range goroutines {
		data := make([]byte, chunk)
		rand.Read(data)
		at := (procs + g) * chunk
		copy(want[at:], data)
		go func() {
			f, err := os.OpenFile(loop, os.O_RDWR|syscall.O_DIRECT, 0)
			if err != nil {
				errs <- err
				return
			}
			defer f.Close()
			buf := AlignedBuffer(64 << 10)
			for off := 0; off < chunk; off += len(buf) {
				copy(buf, data[off:])
				if _, err := f.WriteAt(buf, int64(at+off)); err != nil {
					errs <- err
					return
				}
				if _, err := f.ReadAt(buf, int64(at+off)); err != nil || !bytes.Equal(buf, data[off:off+len(buf)]) {
					errs <- fmt.Errorf("read back at %d: err %v", at+off, err)
					return
				}
			}
			errs <- f.Sync()
		}()
	}
	for _, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Errorf("dd: %v", err)
		}
	}
	for range goroutines {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if got := im.plaintext(t); !bytes.Equal(got, want) {
		t.Fatal("after concurrent writers the image does not hold what they wrote")
	}
}

// dropCache evicts path's clean pages, so that its next read reaches the
// device.
func dropCache(t testing.TB, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
}

// TestFUSEFileSystemOps: what a user of the FUSE mount itself sees (the
// directory listing, stat, statfs, reads and writes of the file, refused
// creations) is the same on both transports; on io_uring these requests
// come through the ring and go to go-fuse's bridge.
func TestFUSEFileSystemOps(t *testing.T) {
	skipUnlessDevices(t)
	forTransports(t, func(t *testing.T, tr transport) {
		im := newPlainImage(t, 1<<20, 4096, 0)
		srv, _ := im.start(t, false, tr)
		dir := filepath.Dir(srv.filePath())
		ents, err := os.ReadDir(dir)
		if err != nil || len(ents) != 1 || ents[0].Name() != FileName {
			t.Fatalf("listing %s: %v, %v", dir, ents, err)
		}
		st, err := os.Stat(srv.filePath())
		if err != nil || st.Size() != 1<<20 || !st.Mode().IsRegular() {
			t.Fatalf("stat: %v, %v", st, err)
		}
		var fs unix.Statfs_t
		if err := unix.Statfs(dir, &fs); err != nil {
			t.Fatalf("statfs: %v", err)
		}
		if err := os.WriteFile(filepath.Join(dir, "new"), nil, 0o600); err == nil {
			t.Error("creating a file in the FUSE mount succeeded")
		}
		f, err := os.OpenFile(srv.filePath(), os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		want := im.plaintext(t)
		got := make([]byte, 10000)
		if _, err := f.ReadAt(got, 5000); err != nil || !bytes.Equal(got, want[5000:15000]) {
			t.Fatalf("unaligned read of the file: %v", err)
		}
		patch := []byte("written through the FUSE file")
		if _, err := f.WriteAt(patch, 4090); err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		copy(want[4090:], patch)
		if got := im.plaintext(t); !bytes.Equal(got, want) {
			t.Fatal("the image does not hold the write made through the FUSE file")
		}
	})
}

// TestRingDeclinedAtInit: when the rings are set up but io_uring is not
// agreed at INIT, the server mounted FUSE itself and serves through
// /dev/fuse: it must still serve, and stop without leaving the mount.
func TestRingDeclinedAtInit(t *testing.T) {
	skipUnlessRing(t)
	ringDeclined = true
	defer func() { ringDeclined = false }()
	im := newPlainImage(t, 1<<20, 4096, 0)
	store := im.store(t, false)
	defer store.Close()
	dir := filepath.Join(t.TempDir(), "fuse")
	os.Mkdir(dir, 0o700)
	srv, err := Start(NewDisk(store, false, t.Logf), Options{Dir: dir, Name: "declined"})
	if err != nil {
		t.Fatal(err)
	}
	if srv.Transport() != "/dev/fuse" || !srv.ownMount {
		t.Errorf("transport %q, own mount %v; want /dev/fuse on our own mount", srv.Transport(), srv.ownMount)
	}
	got, err := os.ReadFile(srv.LoopDevice().Path)
	if err != nil || !bytes.Equal(got, im.plaintext(t)) {
		t.Errorf("reading the device: %v, intact %v", err, bytes.Equal(got, im.plaintext(t)))
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	checkNoLeaks(t, srv.filePath(), dir)
}

func skipUnlessRing(t *testing.T) {
	t.Helper()
	skipUnlessDevices(t)
	if !RingAvailable() {
		t.Skip("FUSE over io_uring is not usable here (echo Y > /sys/module/fuse/parameters/enable_uring)")
	}
}
