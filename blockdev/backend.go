package blockdev

import (
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/xtsctl/xtsctl/blockdev/fusefile"
)

// A backend turns an unlocked image into a block device: "fuse" serves it
// from a background xtsctl process through FUSE and a loop device; "dm"
// hands it to the kernel's dm-crypt on a loop device. open, close and
// status go through this interface only, and the run directory records
// which backend serves each NAME.
type backend interface {
	// available reports what this host lacks for the backend, or nil.
	available() error
	// open serves req, mounts it when req.Mount is set, saves the
	// state record and returns it. On error nothing is left behind
	// except the state directory, which the caller removes.
	open(a *run, req *Request) (*State, error)
	// alive reports whether the volume is still served; a dead one's
	// leftovers are removed with cleanup.
	alive(e *entry) bool
	// close unmounts what open mounted, releases the device, flushes,
	// marks the image clean and stops serving; it leaves the state
	// directory to the caller.
	close(a *run, st *State) error
	// cleanup removes what a dead instance left: mount, devices.
	cleanup(a *run, e *entry) error
	// stats returns the live I/O counters, or nil if the backend has none.
	stats(st *State) (*fusefile.Stats, error)
	// suits reports why --backend auto must not pick this backend for
	// req, or nil. available has been checked.
	suits(req *Request) error
}

// backends holds every backend by name; autoOrder is the preference of
// --backend auto: the kernel's dm-crypt where it is there and the image
// suits it (plain images, volumes without integrity tags), else FUSE,
// which checks the tags of every read.
var (
	backends  = map[string]backend{"fuse": fuseBackend{}, "dm": dmBackend{}}
	autoOrder = []string{"dm", "fuse"}
)

// BackendNames lists the backends and "auto", for help texts.
func BackendNames() string {
	names := make([]string, 0, len(backends))
	for n := range backends {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(append(names, "auto"), ", ")
}

// CheckBackend checks a backend name before the image is unlocked, so that a
// backend that cannot work here fails before any passphrase prompt: a
// named backend must be available, and auto needs one available backend.
func CheckBackend(name string) error {
	if name == "auto" {
		var why []string
		for _, n := range autoOrder {
			err := backends[n].available()
			if err == nil {
				return nil
			}
			why = append(why, fmt.Sprintf("%s: %v", n, err))
		}
		return withKind(KindDevice, fmt.Errorf("no backend can serve volumes here (%s)", strings.Join(why, "; ")))
	}
	b, ok := backends[name]
	if !ok {
		return usageError(fmt.Errorf("unknown --backend %q (want %s)", name, BackendNames()))
	}
	if err := b.available(); err != nil {
		var hints []string
		if name == "dm" {
			hints = append(hints, "the fuse backend needs no device-mapper: --backend fuse, or --backend auto")
		}
		return withKind(KindDevice, err, hints...)
	}
	return nil
}

// pickBackend resolves --backend for req, whose image is unlocked: a
// named backend as checkBackend allowed it, or under auto the first of
// autoOrder that is available and suits req.
func pickBackend(name string, req *Request) (string, backend, error) {
	if err := CheckBackend(name); err != nil {
		return "", nil, err
	}
	if name != "auto" {
		return name, backends[name], nil
	}
	var why []string
	for _, n := range autoOrder {
		b := backends[n]
		err := b.available()
		if err == nil {
			err = b.suits(req)
		}
		if err == nil {
			return n, b, nil
		}
		why = append(why, fmt.Sprintf("%s: %v", n, err))
	}
	return "", nil, withKind(KindDevice, fmt.Errorf("no backend can serve %s here (%s)", req.Path, strings.Join(why, "; ")))
}

// backendOf returns the backend recorded for e; entries without a
// record (an open that died early) belong to the FUSE backend, the only
// one that starts a process before the record exists.
func backendOf(e *entry) backend {
	if e.state != nil {
		if b, ok := backends[e.state.Backend]; ok {
			return b
		}
	}
	return backends["fuse"]
}

// checkLoopSupport names what is missing for loop devices.
func checkLoopSupport() error {
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		return fmt.Errorf("loop devices are not available: /dev/loop-control is missing (load the loop module: modprobe loop)")
	}
	return nil
}
