//go:build linux

package serve

import (
	"bytes"
	"crypto/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xtsctl/xtsctl/sector"
	"github.com/xtsctl/xtsctl/volume"
	"github.com/xtsctl/xtsctl/xts"
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

type plainImage struct {
	path  string
	key   []byte
	p     volume.Plain
	codec *sector.Codec
}

// newPlainImage makes a plain image of size bytes of random ciphertext
// after p's offset.
func newPlainImage(t testing.TB, size int64, p volume.Plain) *plainImage {
	t.Helper()
	key := make([]byte, 64)
	rand.Read(key)
	c, err := xts.NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	codec, err := sector.NewCodec(c, p.Sector)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "image")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	f.Write(make([]byte, p.OffsetBytes()))
	for left := size; left > 0; left -= int64(len(buf)) {
		rand.Read(buf)
		f.Write(buf[:min(left, int64(len(buf)))])
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return &plainImage{path: path, key: key, p: p, codec: codec}
}

// plaintext decrypts the whole image independently of the server.
func (im *plainImage) plaintext(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile(im.path)
	if err != nil {
		t.Fatal(err)
	}
	b = b[im.p.OffsetBytes():]
	im.codec.Decrypt(b, b, 0)
	return b
}

// start serves im through FUSE and a loop device; cleanup stops the
// server and checks that no loop device or mount is left.
func (im *plainImage) start(t testing.TB, readOnly bool) (*Server, *Device) {
	t.Helper()
	flag := os.O_RDWR
	if readOnly {
		flag = os.O_RDONLY
	}
	f, err := os.OpenFile(im.path, flag, 0)
	if err != nil {
		t.Fatal(err)
	}
	store, err := NewPlainStore(f, im.p, im.codec)
	if err != nil {
		t.Fatal(err)
	}
	dev := NewDevice(store, readOnly, t.Logf)
	dir := filepath.Join(t.TempDir(), "fuse")
	os.Mkdir(dir, 0o700)
	srv, err := Start(dev, Options{Dir: dir, Name: im.path, Debug: testing.Verbose() && os.Getenv("FUSEDEBUG") != ""})
	if err != nil {
		store.Close()
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			if err := srv.Stop(); err != nil {
				t.Error(err)
			}
			store.Close()
		}
		checkNoLeaks(t, srv.FilePath(), dir)
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
		src := MountSource(dir)
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
	for _, ss := range []int{512, 4096} {
		t.Run("sector="+strconv.Itoa(ss), func(t *testing.T) {
			size := int64(8 << 20)
			if raceEnabled {
				size = 256 << 10
			}
			im := newPlainImage(t, size, volume.Plain{Sector: sector.Params{Size: ss, IVOffset: 3}, Offset: 8})
			srv, _ := im.start(t, false)
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
