package testutil

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestOutputBesideDeadMounts: a tool that stops at a dead FUSE mount (as
// mkfs.btrfs does when a mounted loop device's backing file sits on one) is
// run again until the mount is gone; a failure of another cause is
// returned at once, and a success as it is.
func TestOutputBesideDeadMounts(t *testing.T) {
	dir := t.TempDir()
	count := filepath.Join(dir, "runs")
	// The stand-in fails like mkfs.btrfs its first two runs, then works.
	tool := `n=$(cat "$1" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$1"
if [ $n -le 2 ]; then echo "ERROR: cannot check mount status of x: Transport endpoint is not connected"; exit 1; fi
echo made`
	start := time.Now()
	out, err := OutputBesideDeadMounts(func() *exec.Cmd { return exec.Command("sh", "-c", tool, "sh", count) })
	if err != nil || strings.TrimSpace(string(out)) != "made" {
		t.Fatalf("%v: %s", err, out)
	}
	if b, _ := os.ReadFile(count); strings.TrimSpace(string(b)) != "3" {
		t.Errorf("ran %s times, want 3", b)
	}
	if time.Since(start) > deadMountWait {
		t.Errorf("took %v", time.Since(start))
	}
	runs := 0
	out, err = OutputBesideDeadMounts(func() *exec.Cmd {
		runs++
		return exec.Command("sh", "-c", "echo no space left on device; exit 1")
	})
	if err == nil || runs != 1 || DeadMountRefusal(out) {
		t.Errorf("a failure of another cause: %v after %d runs: %s", err, runs, out)
	}
}
