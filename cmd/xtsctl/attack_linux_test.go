//go:build linux

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xtsctl/xtsctl/blockdev"
	"github.com/xtsctl/xtsctl/internal/mount"
	"golang.org/x/sys/unix"
)

// TestMountSymlinkSwap: --mount through a symlink records the real
// directory. Repointing the symlink afterwards at another mountpoint (here
// a tmpfs) does not make close unmount that one; a filesystem mounted over
// ours makes close refuse and change nothing.
func TestMountSymlinkSwap(t *testing.T) {
	skipUnlessServing(t)
	dir := servingEnv(t)
	img, flags := plainImage(t, dir, 16<<20)
	formatExt4(t, img, "sw", flags)
	real, other := filepath.Join(dir, "real"), filepath.Join(dir, "other")
	link := filepath.Join(dir, "link")
	os.Mkdir(real, 0o755)
	os.Mkdir(other, 0o755)
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	mustRun(t, args("open", flags, "--mount", link, img, "sw")...)
	if st := statusOf(t, "sw"); st.Mountpoint != real {
		t.Fatalf("mountpoint recorded as %q, want the real path %q", st.Mountpoint, real)
	}
	if err := unix.Mount("tmpfs", other, "tmpfs", 0, ""); err != nil {
		t.Fatal(err)
	}
	defer unix.Unmount(other, unix.MNT_DETACH)
	os.Remove(link)
	os.Symlink(other, link)

	// Something mounted over ours: close refuses, nothing changes.
	if err := unix.Mount("tmpfs", real, "tmpfs", 0, ""); err != nil {
		t.Fatal(err)
	}
	mustFail(t, exitDevice, "has tmpfs mounted on it, not /dev/loop", "close", "sw")
	if statusOf(t, "sw").Mountpoint != real {
		t.Fatal("the refused close changed the record")
	}
	unix.Unmount(real, 0)

	mustRun(t, "close", "sw")
	if mount.Source(other) != "tmpfs" {
		t.Error("close unmounted the tmpfs the symlink leads to now")
	}
	if mount.Source(real) != "" {
		t.Error("close left the volume's filesystem mounted")
	}
}

// TestNameLogCollision: NAME "x.log" and NAME "x" open side by side; each
// has its own log, neither is taken for the other's.
func TestNameLogCollision(t *testing.T) {
	skipUnlessServing(t)
	dir := servingEnv(t)
	a, flags := plainImage(t, dir, 4<<20)
	b := filepath.Join(dir, "b.enc")
	if err := exec.Command("cp", a, b).Run(); err != nil {
		t.Fatal(err)
	}
	mustRun(t, args("open", flags, a, "x")...)
	mustRun(t, args("open", flags, b, "x.log")...)
	for _, n := range []string{"x", "x.log"} {
		if st := statusOf(t, n); st.Name != n {
			t.Errorf("status of %s: %+v", n, st)
		}
		if log, err := os.ReadFile(blockdev.LogPath(n)); err != nil || !strings.Contains(string(log), "open ") {
			t.Errorf("log of %s: %v %q", n, err, log)
		}
	}
	mustRun(t, "close", "x")
	mustRun(t, "close", "x.log")
}

// TestFuseDebugNeedsItsValue: the FUSE request log holds plaintext, so it
// takes one value, and open says so; any other value is ignored, with a
// warning.
func TestFuseDebugNeedsItsValue(t *testing.T) {
	skipUnlessServing(t)
	dir := servingEnv(t)
	img, flags := plainImage(t, dir, 4<<20)
	t.Setenv("XTSCTL_FUSEDEBUG", "1")
	r := mustRun(t, args("open", flags, img, "dbg")...)
	if !strings.Contains(r.stderr, "XTSCTL_FUSEDEBUG=1 ignored") {
		t.Errorf("open with XTSCTL_FUSEDEBUG=1: %q", r.stderr)
	}
	mustRun(t, "close", "dbg")
	t.Setenv("XTSCTL_FUSEDEBUG", "plaintext")
	r = mustRun(t, args("open", flags, img, "dbg")...)
	if !strings.Contains(r.stderr, "will hold the first bytes of every read and write, in plaintext") {
		t.Errorf("open with XTSCTL_FUSEDEBUG=plaintext: %q", r.stderr)
	}
	mustRun(t, "close", "dbg")
}
