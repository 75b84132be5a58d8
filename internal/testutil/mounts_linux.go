package testutil

import (
	"bytes"
	"os/exec"
	"time"
)

// deadMountWait bounds how long OutputBesideDeadMounts waits for a dead
// FUSE mount to go: the tests that kill a server on purpose clean up
// within seconds.
const deadMountWait = 30 * time.Second

// OutputBesideDeadMounts runs the command newCmd makes and returns its
// combined output, running it again while it fails for a dead FUSE mount
// somewhere on the machine (DeadMountRefusal). Tools such as mkfs.btrfs
// stat every mount point and give up on the first that answers "transport
// endpoint is not connected": a FUSE server another test (or another
// package's tests, run at the same time) has just killed on purpose.
// Hiding the machine's mounts from the tool in a private mount namespace
// is no cure: the namespace's copies of the other tests' mounts would make
// their devices "mounted elsewhere" while the tool runs, and their close
// refuse.
func OutputBesideDeadMounts(newCmd func() *exec.Cmd) ([]byte, error) {
	deadline := time.Now().Add(deadMountWait)
	for {
		out, err := newCmd().CombinedOutput()
		if err == nil || !DeadMountRefusal(out) || time.Now().After(deadline) {
			return out, err
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// DeadMountRefusal reports whether a tool's output says it stopped at a
// dead FUSE mount: one that outlasted OutputBesideDeadMounts's wait was
// left by something else on the machine, and the caller may skip.
func DeadMountRefusal(out []byte) bool {
	return bytes.Contains(out, []byte("Transport endpoint is not connected"))
}
