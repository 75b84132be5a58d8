package blockdev

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xtsctl/xtsctl/disk"
)

// TestCloseBusyFUSEDriver is TestCloseBusyChangesNothing for a filesystem
// mounted through its FUSE program (NTFS through ntfs-3g, named by
// --fstype so that it is used even where the kernel has ntfs3): a busy
// filesystem or a held device refuses close and changes nothing. Where
// the kernel finds the device held only after the unmount, ntfs-3g has
// ended with its mount, and a new one mounts the filesystem back, recorded
// in the state; the files written, synced or not, are all there after the
// next open.
func TestCloseBusyFUSEDriver(t *testing.T) {
	for _, tool := range []string{"mkntfs", "ntfs-3g"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s missing (scripts/install-deps.sh installs ntfs-3g)", tool)
		}
	}
	dir := servingDirs(t)
	key := make([]byte, 64)
	rand.Read(key)
	img := filepath.Join(dir, "ntfs.img")
	if err := os.WriteFile(img, make([]byte, 64<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	u := unlocked(t, img, "plain", disk.Options{"sector-size": "4096"}, &disk.Secret{KeyFiles: [][]byte{key}})
	req := func() *Request {
		return &Request{Name: "fs", Image: openFile(t, img), Path: img, Unlocked: u, Backend: "fuse", FSType: "ntfs-3g"}
	}
	st, err := Open(context.Background(), req(), Options{Warn: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("mkntfs", "-q", "-f", st.Device).CombinedOutput()
	if f, ferr := os.OpenFile(st.Device, os.O_RDWR, 0); ferr == nil {
		f.Sync() // not left for the server to flush into itself
		f.Close()
	}
	if _, cerr := Close(context.Background(), "fs", Options{}); err != nil || cerr != nil {
		t.Fatalf("mkntfs: %v %s; close: %v", err, out, cerr)
	}
	mnt := filepath.Join(dir, "mnt")
	os.Mkdir(mnt, 0o755)

	holds := []struct {
		name        string
		hold        func(t *testing.T, st *State) (string, func(), map[string][]byte)
		kernelFinds bool
	}{
		{"a file open on the filesystem", holdFileOpen(mnt), false},
		{"the loop device held open", func(t *testing.T, st *State) (string, func(), map[string][]byte) {
			data := writeUnsynced(t, filepath.Join(mnt, "loop.bin"))
			dev, err := os.Open(st.Device)
			if err != nil {
				t.Fatal(err)
			}
			return fmt.Sprintf("%s is open in process %d", st.Device, os.Getpid()), func() { dev.Close() }, map[string][]byte{"loop.bin": data}
		}, true},
	}
	for _, c := range holds {
		for _, kernel := range []bool{false, true} {
			if kernel && !c.kernelFinds {
				continue
			}
			name := c.name
			if kernel {
				name += ", found by the kernel"
			}
			t.Run(strings.ReplaceAll(name, " ", "_"), func(t *testing.T) {
				var before State
				hold := func(t *testing.T, st *State) (string, func(), map[string][]byte) {
					before = *st
					if st.FSHelper != "ntfs-3g" || !processAlive(st.HelperPID, st.HelperStart) {
						t.Fatalf("open recorded FUSE program %q, pid %d (running: %v), want ntfs-3g", st.FSHelper, st.HelperPID, processAlive(st.HelperPID, st.HelperStart))
					}
					want, release, files := c.hold(t, st)
					return want, func() {
						defer release() // also when a check fails: a held device would keep close refusing
						after, err := StatusOf(st.Name, Options{})
						if err != nil {
							t.Fatal(err)
						}
						switch {
						case !processAlive(after.HelperPID, after.HelperStart):
							t.Errorf("after the refused close, the recorded ntfs-3g (pid %d) is not running", after.HelperPID)
						case kernel && after.HelperPID == before.HelperPID:
							t.Errorf("after the unmount and the remount, the same ntfs-3g (pid %d) is recorded", after.HelperPID)
						case !kernel && after.HelperPID != before.HelperPID:
							t.Errorf("a close refused before the unmount changed ntfs-3g: pid %d, then %d", before.HelperPID, after.HelperPID)
						}
						if kernel {
							for deadline := time.Now().Add(10 * time.Second); processAlive(before.HelperPID, before.HelperStart); time.Sleep(20 * time.Millisecond) {
								if time.Now().After(deadline) {
									t.Errorf("the first ntfs-3g (pid %d) still runs after its mount went", before.HelperPID)
									break
								}
							}
						}
					}, files
				}
				closeBusy(t, req, mnt, hold, kernel)
				if processAlive(before.HelperPID, before.HelperStart) {
					t.Errorf("ntfs-3g (pid %d) still runs after close", before.HelperPID)
				}
			})
		}
	}
}
