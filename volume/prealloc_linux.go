package volume

import "golang.org/x/sys/unix"

// preallocate reserves size bytes for dev when it is a file, so that the
// writes that follow land in allocated space rather than in holes: on
// tmpfs, filling a hole costs several times an append.
func preallocate(dev Device, size int64) bool {
	f, ok := dev.(interface{ Fd() uintptr })
	return ok && unix.Fallocate(int(f.Fd()), 0, 0, size) == nil
}
