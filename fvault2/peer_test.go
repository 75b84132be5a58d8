package fvault2

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xtsctl/xtsctl/disk"
	"golang.org/x/sys/unix"
)

// The peers are libfvde's tools (Debian libfvde-utils 20190104). They
// read all four metadata copies and a secondary encrypted metadata area,
// which cryptsetup's trimmed sample lacks; peerCopy gives them a copy of
// the sample with the first metadata copy (disk label and descriptor,
// the first 12 KiB of it hold data) repeated at the other three copies'
// blocks, and the descriptor naming the same encrypted metadata as its
// secondary one (u64 at +40, outside the label's checksum). Nothing that
// xtsctl reads changes: TestPeerCopyReadsTheSame checks that.
func peerCopy(t *testing.T) string {
	t.Helper()
	path := sampleImage(t)
	pv := readAt(t, path, 0, 512)
	writeFile(t, path, 4096+8192+40, binary.LittleEndian.AppendUint64(nil, sampleEncFirst))
	first := readAt(t, path, 4096, 12288)
	for i := range 3 {
		writeFile(t, path, int64(le64(pv[112+8*i:]))*4096, first)
	}
	return path
}

func TestPeerCopyReadsTheSame(t *testing.T) {
	a, b := openHeader(t, sampleImage(t)), openHeader(t, peerCopy(t))
	ra, _ := a.Report(disk.ReportOptions{})
	rb, _ := b.Report(disk.ReportOptions{})
	if fmt.Sprint(ra.Lines) != fmt.Sprint(rb.Lines) {
		t.Errorf("the peers' copy reads differently:\n%v\n%v", ra.Lines, rb.Lines)
	}
}

// TestPeerFvdeinfo: fvdeinfo opens the volume with the passphrase, refuses
// a wrong one, and reports the sizes xtsctl reads.
func TestPeerFvdeinfo(t *testing.T) {
	if testing.Short() {
		t.Skip("libfvde's PBKDF2 takes seconds")
	}
	fvdeinfo := needTool(t, "fvdeinfo")
	path := peerCopy(t)
	out, err := exec.Command(fvdeinfo, "-p", samplePass, path).CombinedOutput()
	if err != nil {
		t.Fatalf("fvdeinfo: %v\n%s", err, out)
	}
	h := openHeader(t, path)
	fields := strings.Fields(string(out))
	text := strings.Join(fields, " ")
	for _, want := range []string{
		fmt.Sprintf("Physical volume: Size: %d bytes Encryption method: AES XTS", h.v.pv.Size),
		fmt.Sprintf("Logical volume: Size: %d bytes", h.v.lv.Size),
	} {
		if !strings.Contains(text, want) {
			t.Errorf("fvdeinfo says %q, not %q", text, want)
		}
	}
	if out, err := exec.Command(fvdeinfo, "-p", "heslo124", path).CombinedOutput(); err == nil || !strings.Contains(string(out), "Unable to unlock") {
		t.Errorf("fvdeinfo with the wrong passphrase: %v\n%s", err, out)
	}
}

// TestPeerFvdemount compares the logical volume byte for byte with what
// fvdemount serves through FUSE from the same image.
func TestPeerFvdemount(t *testing.T) {
	if testing.Short() {
		t.Skip("fvdemount reads the volume slowly")
	}
	fvdemount := needTool(t, "fvdemount")
	if os.Geteuid() != 0 {
		t.Skip("fvdemount needs root here")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("no /dev/fuse")
	}
	path := peerCopy(t)
	mnt := t.TempDir()
	if out, err := exec.Command(fvdemount, "-p", samplePass, path, mnt).CombinedOutput(); err != nil {
		t.Fatalf("fvdemount: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		for range 50 {
			if err := unix.Unmount(mnt, 0); err == nil || err == unix.EINVAL {
				return
			}
			time.Sleep(100 * time.Millisecond) // busy until the last reader is gone
		}
		t.Errorf("cannot unmount %s", mnt)
	})
	peer := filepath.Join(mnt, "fvde1")
	var theirs []byte
	var err error
	for range 100 { // fvdemount returns before the kernel has the mount
		if theirs, err = os.ReadFile(peer); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("reading fvdemount's %s: %v", peer, err)
	}
	u, err := unlock(t, openHeader(t, path), req(), samplePass)
	if err != nil {
		t.Fatal(err)
	}
	sum, ours := decryptAll(t, path, u, true)
	if len(theirs) != len(ours) {
		t.Fatalf("fvdemount serves %d bytes, xtsctl %d", len(theirs), len(ours))
	}
	if !bytes.Equal(theirs, ours) {
		for i := range ours {
			if ours[i] != theirs[i] {
				t.Fatalf("first difference from fvdemount at byte %d", i)
			}
		}
	}
	ts := sha256.Sum256(theirs)
	if hex.EncodeToString(ts[:]) != sampleLVSHA256 || sum != sampleLVSHA256 {
		t.Errorf("SHA-256 fvdemount %x, xtsctl %s", ts, sum)
	}
}
