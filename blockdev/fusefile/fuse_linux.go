//go:build linux

package fusefile

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/xtsctl/xtsctl/internal/loopdev"
	"golang.org/x/sys/unix"
)

// FileName is the name of the decrypted file inside the FUSE mount.
const FileName = "data"

// Options configure Start.
type Options struct {
	// Dir is where the FUSE filesystem is mounted: an existing empty
	// directory, private to the caller.
	Dir string
	// Name shows in /proc/mounts as the FUSE filesystem's source.
	Name string
	// Debug logs every FUSE request.
	Debug bool
	// Logger receives FUSE debug output; nil means the standard logger.
	Logger *log.Logger
	// NoRing keeps requests on /dev/fuse even where the kernel offers
	// FUSE over io_uring.
	NoRing bool
}

// A Server is a Device exposed as a FUSE file with a loop device on top.
type Server struct {
	dev  *Disk
	fuse *fuse.Server
	ring *ringServer // nil: requests come through /dev/fuse only
	// ownMount: we mounted FUSE ourselves (for the ring), so go-fuse,
	// which only saw /dev/fd/N, cannot unmount it.
	ownMount bool
	dir      string
	loop     *loopdev.Device
}

// ErrNoFUSE is returned when the kernel offers no FUSE device.
var ErrNoFUSE = errors.New("FUSE is not available: /dev/fuse is missing (load the fuse module: modprobe fuse)")

// CheckFUSE reports whether this process can serve through FUSE.
func CheckFUSE() error {
	f, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return ErrNoFUSE
	}
	if err != nil {
		return fmt.Errorf("cannot open /dev/fuse: %w", err)
	}
	f.Close()
	return nil
}

// mountOptions are the FUSE settings for serving a block device's backing
// file. The loop device above us talks to the file with direct I/O, so the
// kernel sends us the block layer's own requests, unchanged and in parallel.
func mountOptions(o Options) *fs.Options {
	// The file never changes behind the kernel's back, and there is only
	// one: long timeouts spare GETATTR round trips.
	timeout := time.Hour
	return &fs.Options{
		EntryTimeout: &timeout,
		AttrTimeout:  &timeout,
		MountOptions: fuse.MountOptions{
			// 1 MiB requests (the kernel maximum, FUSE_MAX_MAX_PAGES):
			// the loop device hands over bios of up to its
			// max_sectors_kb (1 MiB..), and each request costs a
			// round trip through /dev/fuse, so fewer, larger
			// requests; sector.Codec spreads a large request over
			// all cores. BENCHMARKS.md "Mounted volumes" has the
			// 128 KiB vs 1 MiB measurements.
			MaxWrite: MaxRequest,
			// With direct I/O the loop device submits asynchronous
			// reads and writes (CAP_ASYNC_DIO below), which FUSE
			// queues as background requests; the default limit of
			// 12 would cap the queue depth that reaches us below
			// what the loop device's queue and our readers keep busy.
			MaxBackground: 64,
			// Let the kernel send concurrent async DIO requests
			// instead of one at a time per file.
			ExtraCapabilities: fuse.CAP_ASYNC_DIO,
			// As root we call mount(2) ourselves: no fusermount
			// binary (Debian's fuse3 package) is needed, and no
			// fallback to it hides a failure.
			DirectMountStrict: true,
			// Nothing here has extended attributes; without this
			// every write would first ask for security.capability.
			DisableXAttrs: true,
			// Splicing a reply only pays for data already in a
			// file; ours is freshly decrypted memory, and a 1 MiB
			// reply plus header does not fit a default pipe anyway.
			DisableSplice:        true,
			IgnoreSecurityLabels: true,
			FsName:               o.Name,
			Name:                 "xtsctl",
			Debug:                o.Debug,
			Logger:               o.Logger,
		},
	}
}

// Start mounts FUSE on opts.Dir serving dev as the file FileName, then
// attaches a loop device to that file. On error nothing is left mounted or
// attached.
func Start(dev *Disk, opts Options) (*Server, error) {
	if err := CheckFUSE(); err != nil {
		return nil, err
	}
	root := &rootNode{dev: dev}
	s := &Server{dev: dev, dir: opts.Dir}
	var err error
	if !opts.NoRing && RingAvailable() {
		logf := log.Printf
		if opts.Logger != nil {
			logf = opts.Logger.Printf
		}
		if s.ring, err = newRingServer(dev, logf); err != nil {
			logf("FUSE over io_uring unavailable, using /dev/fuse: %v", err)
		}
	}
	if s.ring != nil {
		err = s.mountWithRing(root, mountOptions(opts))
	} else {
		s.fuse, err = fs.Mount(opts.Dir, root, mountOptions(opts))
	}
	if err != nil {
		return nil, fmt.Errorf("mount FUSE on %s: %w", opts.Dir, err)
	}
	loop, err := loopdev.Attach(s.filePath(), loopdev.Options{
		ReadOnly: dev.ReadOnly(),
		// Direct I/O: the loop driver then neither caches the file
		// (the block device above already has a page cache) nor
		// serialises requests through its worker: it submits them
		// asynchronously and they reach us in parallel.
		DirectIO: true,
		// Filesystems on the device then issue whole sectors only,
		// so no request needs a read-modify-write.
		BlockSize: uint32(dev.SectorSize()),
	})
	if err != nil {
		s.unmountFUSE()
		return nil, err
	}
	s.loop = loop
	return s, nil
}

// Stats is the counters of the Disk it serves, with the transport.
func (s *Server) Stats() Stats {
	st := s.dev.Counters.Snapshot()
	st.Transport = s.Transport()
	if s.ring != nil {
		st.RingReads = s.ring.fastReads()
	}
	return st
}

// Transport says how FUSE requests reach the server: "over io_uring, N
// queue threads" or "/dev/fuse".
func (s *Server) Transport() string {
	if s.ring != nil {
		return s.ring.describe()
	}
	return "/dev/fuse"
}

// filePath is the decrypted file's path inside the FUSE mount.
func (s *Server) filePath() string { return filepath.Join(s.dir, FileName) }

// LoopDevice is the attached loop device, e.g. /dev/loop3.
func (s *Server) LoopDevice() *loopdev.Device { return s.loop }

// Wait blocks until the FUSE filesystem is unmounted, by Stop or by someone
// else.
func (s *Server) Wait() { s.fuse.Wait() }

// Stop detaches the loop device (the kernel completes the detach once a
// mount on it is gone: unmount it first) and unmounts FUSE. It syncs the
// device first.
func (s *Server) Stop() error {
	err := s.dev.Sync()
	if s.loop != nil {
		if derr := s.loop.Detach(); err == nil {
			err = derr
		}
		s.loop = nil
	}
	if uerr := s.unmountFUSE(); err == nil {
		err = uerr
	}
	return err
}

func (s *Server) unmountFUSE() error {
	// MNT_FORCE makes FUSE abort the connection before the unmount:
	// copies of this mount that mount namespaces made meanwhile took
	// (private ones, which an unmount here does not reach) would keep it
	// up, and this server waiting for its end, for as long as they live.
	// Nothing of ours uses it by now: the loop device is detached and
	// the disk synced. The loop driver drops its file reference
	// asynchronously after LOOP_CLR_FD, so the mount can be briefly busy.
	var err error
	for range 100 {
		if err = unix.Unmount(s.dir, unix.MNT_FORCE); err == nil || !errors.Is(err, syscall.EBUSY) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("unmount FUSE at %s: %w", s.dir, err)
	}
	s.fuse.Wait()
	if s.ring != nil {
		if err := s.ring.wait(); err != nil {
			return fmt.Errorf("FUSE over io_uring: %w", err)
		}
	}
	return nil
}

// ringDeclined makes mountWithRing leave FUSE_OVER_IO_URING out of its
// INIT reply, as if the kernel had not offered it: tests of that fallback.
var ringDeclined bool

// mountWithRing mounts FUSE itself, so that it holds the /dev/fuse
// descriptor the rings need, and lets go-fuse serve it through the
// /dev/fd/N form. INIT offers FUSE_OVER_IO_URING; when the kernel takes it,
// the queues register and from then on carry every request but FORGET and
// INTERRUPT, which stay on /dev/fuse with go-fuse.
func (s *Server) mountWithRing(root *rootNode, o *fs.Options) error {
	fd, err := unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		s.ring.abort()
		return err
	}
	var st unix.Stat_t
	if err := unix.Stat(s.dir, &st); err != nil {
		unix.Close(fd)
		s.ring.abort()
		return err
	}
	data := fmt.Sprintf("fd=%d,rootmode=%o,user_id=%d,group_id=%d,max_read=%d",
		fd, st.Mode&unix.S_IFMT, os.Geteuid(), os.Getegid(), o.MaxWrite)
	if err := unix.Mount(o.FsName, s.dir, "fuse."+o.Name, unix.MS_NOSUID|unix.MS_NODEV, data); err != nil {
		unix.Close(fd)
		s.ring.abort()
		return err
	}
	// The rings get their own descriptor: go-fuse closes its one when
	// its loop ends, possibly before the last commit of a queue.
	ringFd, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		unix.Unmount(s.dir, unix.MNT_DETACH)
		unix.Close(fd)
		s.ring.abort()
		return err
	}
	if !ringDeclined {
		o.ExtraCapabilities |= fuseOverIOURing
	}
	// Directory listings with attributes would need go-fuse internals
	// the ring does not reach; plain READDIR is enough for one file.
	o.DisabledCapabilities |= fuse.CAP_READDIRPLUS
	// go-fuse must not mount anything itself: it would take the
	// /dev/fd/N path for a mount point before recognising it.
	o.DirectMount, o.DirectMountStrict = false, false
	raw := fs.NewNodeFS(root, o)
	srv, err := fuse.NewServer(raw, fmt.Sprintf("/dev/fd/%d", fd), &o.MountOptions)
	if err != nil {
		unix.Unmount(s.dir, unix.MNT_DETACH)
		unix.Close(ringFd)
		s.ring.abort()
		return err
	}
	s.fuse, s.ownMount = srv, true
	if ringDeclined || srv.KernelSettings().Flags64()&fuseOverIOURing == 0 {
		unix.Close(ringFd)
		s.ring.abort()
		s.ring = nil
	} else {
		s.ring.register(ringFd, raw)
	}
	go srv.Serve()
	return srv.WaitMount()
}

// rootNode is the FUSE root directory; it holds the single file.
type rootNode struct {
	fs.Inode
	dev *Disk
}

func (r *rootNode) OnAdd(ctx context.Context) {
	child := r.NewPersistentInode(ctx, &fileNode{dev: r.dev}, fs.StableAttr{Mode: syscall.S_IFREG})
	r.AddChild(FileName, child, false)
}

func (r *rootNode) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.Mode = syscall.S_IFDIR | 0o700
	return 0
}

// fileNode is the decrypted image.
type fileNode struct {
	fs.Inode
	dev *Disk
}

func (n *fileNode) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	n.attr(&out.Attr)
	return 0
}

func (n *fileNode) attr(a *fuse.Attr) {
	a.Mode = syscall.S_IFREG | 0o600
	if n.dev.ReadOnly() {
		a.Mode = syscall.S_IFREG | 0o400
	}
	a.Size = uint64(n.dev.Size())
	a.Blocks = a.Size / 512
	a.Blksize = uint32(n.dev.SectorSize())
	a.Nlink = 1
}

func (n *fileNode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if n.dev.ReadOnly() && flags&syscall.O_ACCMODE != syscall.O_RDONLY {
		return nil, 0, syscall.EROFS
	}
	// FOPEN_DIRECT_IO: every read and write comes to us, so no
	// plaintext is cached for this file (the block device above has its
	// own cache) and an fsync cannot find pages of ours left unwritten.
	// FOPEN_PARALLEL_DIRECT_WRITES: without it the kernel serialises
	// writes to a file on its inode lock; the Device locks what needs
	// locking itself.
	return nil, fuse.FOPEN_DIRECT_IO | fuse.FOPEN_PARALLEL_DIRECT_WRITES, 0
}

func (n *fileNode) Read(ctx context.Context, fh fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	size := n.dev.Size()
	if off >= size {
		return fuse.ReadResultData(nil), 0
	}
	dest = dest[:min(int64(len(dest)), size-off)]
	// Never a short read on failure: the loop driver fills the rest of a
	// short read with zeros, which a filesystem would take for data.
	if err := n.dev.ReadAt(dest, off); err != nil {
		return nil, syscall.EIO
	}
	return fuse.ReadResultData(dest), 0
}

func (n *fileNode) Write(ctx context.Context, fh fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	switch err := n.dev.WriteAt(data, off); {
	case err == nil:
		return uint32(len(data)), 0
	case errors.Is(err, ErrReadOnly):
		return 0, syscall.EROFS
	case errors.Is(err, ErrOutOfRange):
		return 0, syscall.ENOSPC
	default:
		return 0, syscall.EIO
	}
}

func (n *fileNode) Fsync(ctx context.Context, fh fs.FileHandle, flags uint32) syscall.Errno {
	if err := n.dev.Sync(); err != nil {
		return syscall.EIO
	}
	return 0
}

func (n *fileNode) Flush(ctx context.Context, fh fs.FileHandle) syscall.Errno { return 0 }

// Setattr accepts only what leaves the file as it is: its size is the
// image's, and the loop driver sets nothing else.
func (n *fileNode) Setattr(ctx context.Context, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if sz, ok := in.GetSize(); ok && int64(sz) != n.dev.Size() {
		return syscall.EPERM
	}
	n.attr(&out.Attr)
	return 0
}
