package blockdev

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/xtsctl/xtsctl/blockdev/fusefile"
	"github.com/xtsctl/xtsctl/internal/testutil"
	"github.com/xtsctl/xtsctl/luks"
	"github.com/xtsctl/xtsctl/sector"
	"github.com/xtsctl/xtsctl/volume"
	"github.com/xtsctl/xtsctl/xts"
)

// servingDirs gives a test its own run directory (short: the control
// socket path must fit in 108 bytes) and a work directory, and closes
// whatever a failed test left open.
func servingDirs(t *testing.T) string {
	t.Helper()
	skipUnlessDevices(t)
	testutil.ServingTest(t)
	run, err := os.MkdirTemp("/tmp", "xb")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("XTSCTL_RUNDIR", run)
	t.Cleanup(func() {
		left, _ := List(Options{})
		for _, s := range left {
			t.Errorf("%s still open at the end of the test", s.Name)
			closeLeftover(t, s)
		}
		// The run directory goes only with what it records: removed
		// under a live server, the server would keep its FUSE mount,
		// loop device and mount with nothing left to close them by.
		if left, _ := List(Options{}); len(left) == 0 {
			os.RemoveAll(run)
		}
	})
	return t.TempDir()
}

// closeLeftover closes what a failed test left open. A close refused
// because the device is held (the test's own descriptor not yet
// released, another program on the machine looking at loop devices) is
// tried again for a while; then the server is killed and the close of
// the dead server unmounts, ends its FUSE program and detaches its loop
// devices.
func closeLeftover(t *testing.T, s Status) {
	var err error
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if _, err = Close(context.Background(), s.Name, Options{Warn: t.Logf}); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err == nil {
		return
	}
	t.Logf("close %s: %v; killing its server", s.Name, err)
	if processAlive(s.PID, s.PIDStart) {
		syscall.Kill(s.PID, syscall.SIGKILL)
		for i := 0; i < 250 && processAlive(s.PID, s.PIDStart); i++ {
			time.Sleep(20 * time.Millisecond)
		}
	}
	if _, err := Close(context.Background(), s.Name, Options{Warn: t.Logf}); err != nil {
		t.Errorf("close %s after killing its server: %v", s.Name, err)
	}
}

func openFile(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// TestOpenCloseLifecycle runs open, status, I/O through the device and
// close for a plain image and a volume through the API, with the server
// (this test binary, TestMain) in a process of its own: under -race the
// server runs with the race detector too. A second open of the same NAME
// or image is refused; a volume that was written is clean after close.
func TestOpenCloseLifecycle(t *testing.T) {
	dir := servingDirs(t)
	ctx := context.Background()

	key := make([]byte, 64)
	rand.Read(key)
	plainImg := filepath.Join(dir, "p.img")
	os.WriteFile(plainImg, make([]byte, 4<<20), 0o600)
	ps := sector.Params{Size: 4096}

	vol := filepath.Join(dir, "v.vol")
	vf, _ := os.OpenFile(vol, os.O_RDWR|os.O_CREATE, 0o600)
	const size = 4 << 20
	_, _, err := volume.Create(ctx, vf, bytes.NewReader(make([]byte, size)), size,
		volume.CreateOptions{TagSize: 32, KDF: volume.KDFParams{Time: 1, MemoryKiB: 64, Threads: 1}, Passphrase: tagPass}, nil)
	vf.Close()
	if err != nil {
		t.Fatal(err)
	}

	lk := filepath.Join(dir, "l.luks")
	lh, lkey, _ := luksImage(t, lk, 4<<20, luks.FormatOptions{})
	lu := unlocked(t, lk, "luks", nil, passphrase(luksPass))
	if !bytes.Equal(lu.Key, lkey) {
		t.Fatal("the LUKS format unlocks another key than package luks made")
	}

	for _, req := range []*Request{
		{Name: "p", Image: openFile(t, plainImg), Path: plainImg, Unlocked: unlocked(t, plainImg, "plain", plainOptions(4096, 0, 0, false), keyFile(key)), Backend: "fuse"},
		{Name: "v", Image: openFile(t, vol), Path: vol, Unlocked: unlocked(t, vol, "volume", nil, passphrase(tagPass)), Backend: "auto"},
		{Name: "l", Image: openFile(t, lk), Path: lk, Unlocked: lu, Backend: "fuse"},
	} {
		st, err := Open(ctx, req, Options{Warn: t.Logf})
		if err != nil {
			t.Fatalf("%s: open: %v", req.Name, err)
		}
		if st.Backend != "fuse" || st.Device == "" || st.Type != req.Unlocked.Format {
			t.Fatalf("%s: opened %+v", req.Name, st)
		}
		if _, err := Open(ctx, req, Options{}); kindOf(err) != KindDevice {
			t.Errorf("%s: a second open of it: %v", req.Name, err)
		}
		other := *req
		other.Name = req.Name + "2"
		if _, err := Open(ctx, &other, Options{}); kindOf(err) != KindDevice {
			t.Errorf("%s: the same image under another NAME: %v", req.Name, err)
		}

		data := make([]byte, 64<<10)
		rand.Read(data)
		dev, err := os.OpenFile(st.Device, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := dev.WriteAt(data, 1<<20); err != nil {
			t.Fatal(err)
		}
		if err := dev.Sync(); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(data))
		if _, err := dev.ReadAt(got, 1<<20); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s: read back: %v", req.Name, err)
		}
		dev.Close()

		vs, err := StatusOf(req.Name, Options{})
		if err != nil || vs.Condition != "open" || vs.Stats == nil || vs.Stats.Writes == 0 {
			t.Errorf("%s: status %+v, %v", req.Name, vs, err)
		}
		if _, err := Close(ctx, req.Name, Options{}); err != nil {
			t.Fatalf("%s: close: %v", req.Name, err)
		}
		if _, err := StatusOf(req.Name, Options{}); !errors.Is(err, ErrNotOpen) {
			t.Errorf("%s: after close: %v", req.Name, err)
		}
		// The server's stderr is its log: a race it ran into is there.
		if log, _ := os.ReadFile(LogPath(req.Name)); bytes.Contains(log, []byte("DATA RACE")) {
			t.Errorf("%s: the server's log reports a data race:\n%s", req.Name, log)
		}

		// What was written is in the image, encrypted as the format says.
		switch req.Unlocked.Format {
		case "plain":
			c, _ := xts.NewCipher(key)
			img, _ := os.ReadFile(plainImg)
			want := make([]byte, len(data))
			codec, _ := sector.NewCodec(c, ps)
			codec.Encrypt(want, data, (1<<20)/4096)
			if !bytes.Equal(img[1<<20:1<<20+len(data)], want) {
				t.Error("the plain image does not hold the ciphertext of what was written")
			}
		case "luks":
			img, _ := os.ReadFile(lk)
			var out bytes.Buffer
			if _, err := lh.Decrypt(ctx, lkey, bytes.NewReader(img), int64(len(img)), &out, nil); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(out.Bytes()[1<<20:1<<20+len(data)], data) {
				t.Error("package luks does not decrypt what was written to the LUKS image")
			}
		case "volume":
			w, err := volume.Open(vol, tagPass, true)
			if err != nil {
				t.Fatal(err)
			}
			if st := w.State(); st.Dirty || !st.DigestStale {
				t.Errorf("volume state after close %+v", st)
			}
			got := make([]byte, len(data))
			if err := w.ReadSectors(got, (1<<20)/uint64(w.SectorSize())); err != nil || !bytes.Equal(got, data) {
				t.Errorf("the volume does not read back what was written: %v", err)
			}
			w.Close()
		default:
			t.Fatalf("%s: format %q has no check of what was written", req.Name, req.Unlocked.Format)
		}
	}
	if _, err := Close(ctx, "nope", Options{}); kindOf(err) != KindUsage {
		t.Errorf("close of a NAME not open: %v", err)
	}
}

// TestOpenRecoversAndUpgrades: Open reports what serving a volume did to
// it first. A volume that a crash left dirty, with one write torn, is
// checked when it is opened read-write: the torn sector is named and
// reads as an I/O error, and stays named at the next open, until open
// --recover accepts what it holds; afterwards the volume is clean and
// every tag verifies. A version-1 volume is upgraded by a read-write
// open, never by a read-only one.
func TestOpenRecoversAndUpgrades(t *testing.T) {
	dir := servingDirs(t)
	ctx := context.Background()

	mem := newTestVolume(t, 64) // 16 sectors a region
	v := openTestVolume(t, mem, false)
	data := make([]byte, 8*4096)
	rand.Read(data)
	if err := v.WriteSectors(data, 0); err != nil {
		t.Fatal(err)
	}
	if err := v.Sync(); err != nil {
		t.Fatal(err)
	}
	crashed := mem.snapshot() // the server dies here: region 0 is being written
	torn := v.Layout().SectorOffset(5) + 10
	v.Close()
	crashed.b[torn] ^= 1
	path := filepath.Join(dir, "crashed.vol")
	if err := os.WriteFile(path, crashed.b, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, recover := range []bool{false, false, true} {
		req := &Request{Name: "c", Image: openFile(t, path), Path: path, Recover: recover, Backend: "fuse",
			Unlocked: unlocked(t, path, "volume", nil, passphrase(testPass))}
		st, err := Open(ctx, req, Options{Warn: t.Logf})
		if err != nil {
			t.Fatal(err)
		}
		r := st.Recovered
		if r == nil || r.DirtyRegions != 1 || r.Sectors != 16 || r.Mismatched != 1 || !slices.Equal(r.BadSectors, []uint64{5}) ||
			r.Repaired != recover || r.Untagged || r.AllRegions {
			t.Errorf("--recover %v: recovered %+v", recover, r)
		}
		if rec, err := StatusOf("c", Options{}); err != nil || !reflect.DeepEqual(rec.Recovered, r) {
			t.Errorf("--recover %v: the record says %+v (%v), open said %+v", recover, rec.Recovered, err, r)
		}
		dev, err := os.OpenFile(st.Device, os.O_RDONLY|syscall.O_DIRECT, 0)
		if err != nil {
			t.Fatal(err)
		}
		buf := fusefile.AlignedBuffer(4096)
		if _, err := dev.ReadAt(buf, 3*4096); err != nil || !bytes.Equal(buf, data[3*4096:4*4096]) {
			t.Errorf("--recover %v: sector 3: %v", recover, err)
		}
		_, err = dev.ReadAt(buf, 5*4096)
		if recover && err != nil || !recover && !errors.Is(err, syscall.EIO) {
			t.Errorf("--recover %v: the torn sector reads: %v", recover, err)
		}
		dev.Close()
		if _, err := Close(ctx, "c", Options{}); err != nil {
			t.Fatal(err)
		}
	}
	openLibrary(t, path)

	// A version-1 volume: read-only it stays as it is, read-write it is
	// upgraded, once.
	v1 := filepath.Join(dir, "v1.vol")
	img, err := os.ReadFile("../testimages/v1/disk-4096.vol")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(v1, img, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		readOnly, upgraded bool
		version            uint32
	}{{true, false, 1}, {false, true, 2}, {false, false, 2}} {
		req := &Request{Name: "u", Image: openFile(t, v1), Path: v1, ReadOnly: c.readOnly, Backend: "fuse",
			Unlocked: unlocked(t, v1, "volume", nil, goldenPassphrase(t, "v1"))}
		st, err := Open(ctx, req, Options{Warn: t.Logf})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Close(ctx, "u", Options{}); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(v1)
		if err != nil {
			t.Fatal(err)
		}
		hs, err := volume.ReadHeaders(f, int64(len(img)))
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if st.Upgraded != c.upgraded || st.Recovered != nil || hs.Header.Version != c.version {
			t.Errorf("read-only %v: upgraded %v, recovered %+v, now version %d; want upgraded %v, version %d",
				c.readOnly, st.Upgraded, st.Recovered, hs.Header.Version, c.upgraded, c.version)
		}
	}
}
