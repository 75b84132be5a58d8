//go:build linux

package blockdev

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/xtsctl/xtsctl/blockdev/fusefile"
	"github.com/xtsctl/xtsctl/disk"
	"github.com/xtsctl/xtsctl/volume"
)

// TestAttachVolumeSplitIO serves a volume file as the FUSE server does
// (disk.Attach over openBacking: data sectors through O_DIRECT, the rest
// buffered) with aligned and unaligned requests, then checks it with the
// library's own buffered Open: the data reads back and every tag
// verifies.
func TestAttachVolumeSplitIO(t *testing.T) {
	path, u, _ := volumeFile(t, 512) // 2 MiB of data
	v := attachFile(t, path, u, false)
	for _, ro := range []bool{false, true} {
		if b, err := openBacking(path, ro); !errors.Is(err, disk.ErrInUse) {
			t.Errorf("openBacking (read-only %v) of a volume served read-write: %v, want ErrInUse", ro, err)
			if b != nil {
				b.Close()
			}
		}
	}
	d := fusefile.NewDisk(v, false, t.Logf)
	want := make([]byte, 512*4096)
	for off := 0; off < len(want); off += 1 << 20 {
		if err := d.ReadAt(want[off:off+1<<20], int64(off)); err != nil {
			t.Fatal(err)
		}
	}
	for _, w := range []struct{ off, n int }{{0, 1 << 20}, {4096 * 300, 4096}, {12345, 70000}, {2<<20 - 10, 10}} {
		p := make([]byte, w.n)
		rand.Read(p)
		if err := d.WriteAt(p, int64(w.off)); err != nil {
			t.Fatal(err)
		}
		copy(want[w.off:], p)
	}
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(want))
	for off := 0; off < len(got); off += 1 << 20 {
		if err := d.ReadAt(got[off:off+1<<20], int64(off)); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(got, want) {
		t.Fatal("reads through the attached volume differ from the writes")
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}

	lib := openLibrary(t, path)
	if err := lib.ReadSectors(got, 0); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("the library reads other data than was served (err %v)", err)
	}
}

// TestRingVolumeReads serves a volume file through FUSE over io_uring,
// whose queue threads read data and tags themselves: reads of 4 KiB
// (verified on the queue thread) and of 1 MiB (verified off it) return
// what was written, and after a ciphertext byte is flipped in the image,
// every read covering that sector fails with EIO, its neighbour still
// reads, and the counters name the sector.
func TestRingVolumeReads(t *testing.T) {
	skipUnlessRing(t)
	path, u, layout := volumeFile(t, 1024) // 4 MiB of data
	v := attachFile(t, path, u, false)
	t.Cleanup(func() {
		if err := v.Close(); err != nil {
			t.Error(err)
		}
	})
	srv, dev := startStore(t, v, false, true)

	f, err := os.OpenFile(srv.LoopDevice().Path, os.O_RDWR|syscall.O_DIRECT, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := fusefile.AlignedBuffer(4 << 20)
	rand.Read(want)
	if _, err := f.WriteAt(want, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	small, big := fusefile.AlignedBuffer(4096), fusefile.AlignedBuffer(1<<20)
	for off := 0; off < len(want); off += len(big) {
		if _, err := f.ReadAt(big, int64(off)); err != nil || !bytes.Equal(big, want[off:off+len(big)]) {
			t.Fatalf("1 MiB read at %d: err %v, intact %v", off, err, bytes.Equal(big, want[off:off+len(big)]))
		}
	}
	for _, sec := range []int{0, 77, 1023} {
		if _, err := f.ReadAt(small, int64(sec)*4096); err != nil || !bytes.Equal(small, want[sec*4096:][:4096]) {
			t.Fatalf("4 KiB read of sector %d: err %v", sec, err)
		}
	}
	if n := srv.Stats().RingReads; n < 7 {
		t.Fatalf("%d reads took the ring's fast path, want all 7", n)
	}

	const bad = 77
	img, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	var b [1]byte
	at := layout.SectorOffset(bad) + 1000
	img.ReadAt(b[:], at)
	b[0] ^= 0x10
	if _, err := img.WriteAt(b[:], at); err != nil {
		t.Fatal(err)
	}
	img.Close()
	if _, err := f.ReadAt(small, bad*4096); !errors.Is(err, syscall.EIO) {
		t.Errorf("4 KiB read of the flipped sector: %v, want EIO", err)
	}
	if _, err := f.ReadAt(big, 0); !errors.Is(err, syscall.EIO) {
		t.Errorf("1 MiB read covering the flipped sector: %v, want EIO", err)
	}
	if _, err := f.ReadAt(small, (bad+1)*4096); err != nil || !bytes.Equal(small, want[(bad+1)*4096:][:4096]) {
		t.Errorf("its neighbour: err %v", err)
	}
	st := dev.Counters.Snapshot()
	if st.IntegrityErrors == 0 || len(st.BadSectors) != 1 || st.BadSectors[0] != bad {
		t.Errorf("counters: %d integrity errors, bad sectors %v; want some, [%d]", st.IntegrityErrors, st.BadSectors, bad)
	}
}

// TestRingVolumeConcurrentReadWrite: goroutines rewrite 4 KiB blocks of a
// tagged volume served over io_uring while others read ranges of 4 KiB to
// 256 KiB with O_DIRECT. A read that overlapped a write half done would
// see data without its tag (a false integrity error, EIO) or a torn block;
// every block read must be whole: one of the versions written to it. After
// close the volume verifies clean.
func TestRingVolumeConcurrentReadWrite(t *testing.T) {
	skipUnlessRing(t)
	const blocks = 2048 // 8 MiB
	path, u, _ := volumeFile(t, blocks)
	v := attachFile(t, path, u, false)
	// Registered before the server's cleanup, so it runs after the server
	// has stopped.
	t.Cleanup(func() {
		if err := v.Close(); err != nil {
			t.Fatal(err)
		}
		openLibrary(t, path)
	})
	srv, dev := startStore(t, v, false, true)
	loop := srv.LoopDevice().Path

	// Block b, version n: its number, the version, then bytes that follow
	// from both, so that any mix of two versions is detected.
	fill := func(p []byte, b, n uint64) {
		binary.LittleEndian.PutUint64(p, b)
		binary.LittleEndian.PutUint64(p[8:], n)
		x := b*0x9E3779B97F4A7C15 ^ n
		for i := 16; i < len(p); i += 8 {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			binary.LittleEndian.PutUint64(p[i:], x)
		}
	}
	f, err := os.OpenFile(loop, os.O_RDWR|syscall.O_DIRECT, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	all := fusefile.AlignedBuffer(blocks * 4096)
	for b := range uint64(blocks) {
		fill(all[b*4096:(b+1)*4096], b, 0)
	}
	if _, err := f.WriteAt(all, 0); err != nil {
		t.Fatal(err)
	}

	const writers, readers, rounds = 3, 3, 300
	var wg sync.WaitGroup
	errs := make(chan error, writers+readers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := mrand.New(mrand.NewPCG(uint64(w), 1))
			p := fusefile.AlignedBuffer(16 * 4096)
			for i := range rounds {
				b, n := r.Uint64N(blocks-16), uint64(w*rounds+i+1)
				k := 1 + r.IntN(16)
				for j := range k {
					fill(p[j*4096:(j+1)*4096], b+uint64(j), n)
				}
				if _, err := f.WriteAt(p[:k*4096], int64(b)*4096); err != nil {
					errs <- fmt.Errorf("write at block %d: %w", b, err)
					return
				}
			}
		}()
	}
	for rd := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := mrand.New(mrand.NewPCG(uint64(rd), 2))
			p := fusefile.AlignedBuffer(64 * 4096)
			want := make([]byte, 4096)
			for range rounds {
				k := 1 + r.IntN(64)
				b := r.Uint64N(blocks - uint64(k))
				if _, err := f.ReadAt(p[:k*4096], int64(b)*4096); err != nil {
					errs <- fmt.Errorf("read of %d blocks at %d: %w", k, b, err)
					return
				}
				for j := range k {
					got := p[j*4096 : (j+1)*4096]
					n := binary.LittleEndian.Uint64(got[8:])
					fill(want, b+uint64(j), n)
					if !bytes.Equal(got, want) {
						errs <- fmt.Errorf("block %d read torn or misplaced", b+uint64(j))
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if st := dev.Counters.Snapshot(); st.IntegrityErrors != 0 {
		t.Errorf("%d integrity errors during concurrent reads and writes", st.IntegrityErrors)
	}
	if srv.Stats().RingReads == 0 {
		t.Error("no read took the ring's fast path")
	}
}

// volumeFile writes a new tagged volume of the given number of 4096-byte
// sectors to a file and returns its path, what the volume format unlocks
// of it, and its layout.
func volumeFile(t *testing.T, sectors int) (string, *disk.Unlocked, volume.Layout) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "v.vol")
	mem := newTestVolume(t, sectors)
	if err := os.WriteFile(path, mem.b, 0o600); err != nil {
		t.Fatal(err)
	}
	probe := openTestVolume(t, mem, true)
	defer probe.Close()
	return path, unlocked(t, path, "volume", nil, passphrase(testPass)), probe.Layout()
}

// attachFile serves the unlocked image at path as the FUSE server does:
// disk.Attach over openBacking. A volume is served by its format's own
// device, which reports what attaching did; the caller closes it.
func attachFile(t *testing.T, path string, u *disk.Unlocked, readOnly bool) disk.Device {
	t.Helper()
	b, err := openBacking(path, readOnly)
	if err != nil {
		t.Fatal(err)
	}
	if b.direct == nil {
		t.Log("the temporary directory's filesystem has no O_DIRECT; only the buffered path runs")
	}
	d, err := disk.Attach(b, u, disk.AttachOptions{ReadOnly: readOnly})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := d.(disk.Reporter); !ok && u.Format == "volume" {
		d.Close()
		t.Fatalf("a volume is served by %T, not by its format", d)
	}
	return d
}

// openLibrary opens the volume file with the library's own buffered Open
// and checks that it was closed cleanly and every tag verifies.
func openLibrary(t *testing.T, path string) *volume.Volume {
	t.Helper()
	lib, err := volume.Open(path, testPass, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lib.Close() })
	if lib.State().Dirty {
		t.Error("the volume is dirty after Close")
	}
	res, err := lib.Verify(context.Background(), nil, nil)
	if err != nil || res.BadSectors != 0 {
		t.Fatalf("verify: %v, %d bad sectors", err, res.BadSectors)
	}
	return lib
}

// skipUnlessRing skips tests of FUSE over io_uring where it cannot run.
func skipUnlessRing(t *testing.T) {
	t.Helper()
	skipUnlessDevices(t)
	if !fusefile.RingAvailable() {
		t.Skip("FUSE over io_uring is not usable here (echo Y > /sys/module/fuse/parameters/enable_uring)")
	}
}

// startStore serves store through FUSE (over io_uring if ring) and a loop
// device for the test; cleanup stops the server.
func startStore(t testing.TB, store fusefile.Store, readOnly, ring bool) (*fusefile.Server, *fusefile.Disk) {
	t.Helper()
	dev := fusefile.NewDisk(store, readOnly, t.Logf)
	dir := filepath.Join(t.TempDir(), "fuse")
	os.Mkdir(dir, 0o700)
	srv, err := fusefile.Start(dev, fusefile.Options{Dir: dir, Name: "test", NoRing: !ring})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Contains(srv.Transport(), "io_uring"); got != ring {
		t.Fatalf("server transport is %q, want ring=%v", srv.Transport(), ring)
	}
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Error(err)
		}
	})
	return srv, dev
}
