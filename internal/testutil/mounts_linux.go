package testutil

import "os/exec"

// WithoutFUSEMounts runs name in a private mount namespace from which every
// FUSE mount is detached first. Tools such as mkfs.btrfs stat every mount
// point on the machine and give up on the first that answers "transport
// endpoint is not connected": a FUSE server another test (or another
// package's tests, run at the same time) has just stopped or killed. The
// private namespace hides those from the tool and leaves the machine's
// mounts as they are.
func WithoutFUSEMounts(name string, args ...string) *exec.Cmd {
	const detach = `awk '$3 ~ /^fuse/ {print $2}' /proc/self/mounts | sort -r | while read -r m; do umount -l "$(printf '%b' "$m")" 2>/dev/null; done; exec "$@"`
	return exec.Command("unshare", append([]string{"--mount", "--propagation", "private", "sh", "-c", detach, "sh", name}, args...)...)
}
