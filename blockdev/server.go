package blockdev

import (
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/xtsctl/xtsctl/blockdev/fusefile"
	"github.com/xtsctl/xtsctl/disk"
	"github.com/xtsctl/xtsctl/internal/loopdev"
	"github.com/xtsctl/xtsctl/internal/mount"
	"github.com/xtsctl/xtsctl/internal/secret"
	"golang.org/x/sys/unix"
)

// fuseDebugEnv turns go-fuse's request log on in the server: for
// debugging only, since it logs the first bytes of every read and write,
// which are plaintext. It takes one value, so that it is not set by
// accident, and open warns when it is.
const (
	fuseDebugEnv = "XTSCTL_FUSEDEBUG"
	fuseDebugOn  = "plaintext"
)

// server is the running state of internal-serve.
type server struct {
	cfg     *serverConfig
	store   fusefile.Store
	dev     *fusefile.Disk
	srv     *fusefile.Server
	mounted string // the filesystem mountpoint we mounted, if any
	fstype  string
	fs      *fsHelpers // the FUSE program serving the mount, if one does
	state   *State     // the record start wrote
	ln      net.Listener
	log     *log.Logger
	wipe    func() // wipes the key schedule
	// What open reports: warnings, and the Recovery after a crash.
	warnings  []string
	recovered *Recovery
	upgraded  string // what the image was upgraded to, if it was

	mu     sync.Mutex // serialises close attempts
	closed bool
}

func Serve() error {
	cfgFile := os.NewFile(3, "config")
	readyFile := os.NewFile(4, "ready")
	imageFile := os.NewFile(5, "image")
	if cfgFile == nil || readyFile == nil || imageFile == nil {
		return usageError(errors.New("internal-serve is started by xtsctl open, not by hand"))
	}
	logger := log.New(os.Stderr, "", log.LstdFlags|log.Lmsgprefix)
	// Most of the server's goroutines wait in pread/pwrite on the image.
	// A thread blocked in a syscall keeps its P until sysmon takes it
	// back, so with GOMAXPROCS = 2 two slow disk reads stall every other
	// request for that long. More Ps than CPUs keep requests flowing;
	// 4 KiB random reads at queue depth 16 went from 4.4k to 7.8k IOPS
	// (BENCHMARKS.md, "Mounted volumes").
	runtime.GOMAXPROCS(max(4*runtime.NumCPU(), 16))
	// The server holds the key for as long as the volume is open: lock
	// it out of swap and core dumps before reading it.
	if err := secret.Protect(); err != nil {
		logger.Printf("warning: %v", err)
	}
	cfg, key, err := readConfig(cfgFile)
	cfgFile.Close()
	if err != nil {
		secret.Wipe(key)
		return reportReady(readyFile, withKind(KindFailure, err))
	}
	os.Setenv("XTSCTL_RUNDIR", cfg.RunDir) // stateDir and friends follow the parent's
	logger.SetPrefix(cfg.Name + ": ")
	// Detached: the terminal's signals never come, SIGTERM (shutdown)
	// closes cleanly, SIGPIPE from a vanished client is not fatal.
	signal.Ignore(syscall.SIGHUP, syscall.SIGINT, syscall.SIGPIPE)

	s := &server{cfg: cfg, log: logger}
	var mp *Mountpoint
	err = s.checkImage(imageFile)
	if err == nil && cfg.Mount != "" {
		mp, err = s.checkMountpoint(os.NewFile(6, cfg.Mount))
	}
	if err == nil {
		err = s.start(key, mp)
	}
	imageFile.Close()
	mp.Close()
	secret.Wipe(key)
	if err != nil {
		logger.Printf("open failed: %v", err)
		return reportReady(readyFile, err)
	}
	if err := reportReady(readyFile, nil, s.readyMsg()); err != nil {
		logger.Printf("open: %v", err)
	}
	logger.Printf("serving %s on %s (FUSE %s)", cfg.Image, s.srv.LoopDevice().Path, s.srv.Transport())
	return s.run()
}

// reportReady sends the outcome of startup to open and closes fd 4.
func reportReady(f *os.File, err error, ok ...*readyMsg) error {
	msg := &readyMsg{OK: true}
	if err != nil {
		msg = errorMsg(err)
	} else if len(ok) > 0 {
		msg = ok[0]
	}
	werr := json.NewEncoder(f).Encode(msg)
	f.Close()
	if err != nil {
		return err
	}
	return werr
}

func (s *server) readyMsg() *readyMsg {
	return &readyMsg{OK: true, Device: s.srv.LoopDevice().Path, FSType: s.fstype, Recovered: s.recovered, Upgraded: s.upgraded != "", Warnings: s.warnings}
}

// start unlocks the image, serves it, mounts it on mp (with --mount) and
// records the state. On error everything it did is undone.
func (s *server) start(key []byte, mp *Mountpoint) (err error) {
	cfg := s.cfg
	var undo []func()
	defer func() {
		if err != nil {
			for i := len(undo) - 1; i >= 0; i-- {
				undo[i]()
			}
		}
	}()

	store, err := s.openStore(key)
	if err != nil {
		if s.wipe != nil {
			s.wipe()
		}
		return err
	}
	s.store = store
	undo = append(undo, func() { store.Close(); s.wipe() })

	s.dev = fusefile.NewDisk(store, cfg.ReadOnly, s.log.Printf)
	fuseDir := filepath.Join(stateDir(cfg.Name), "fuse")
	if err := os.Mkdir(fuseDir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return withKind(KindDevice, err)
	}
	s.srv, err = fusefile.Start(s.dev, fusefile.Options{Dir: fuseDir, Name: "xtsctl:" + cfg.Name, Debug: os.Getenv(fuseDebugEnv) == fuseDebugOn, Logger: s.log})
	if err != nil {
		return withKind(KindDevice, err)
	}
	undo = append(undo, func() { s.srv.Stop() })
	loop := s.srv.LoopDevice().Path

	if mp != nil {
		var id uint64
		s.fs = &fsHelpers{staging: stagingDir(cfg.Name), log: s.log.Writer(), logf: s.log.Printf}
		if err := os.MkdirAll(filepath.Dir(s.fs.staging), 0o700); err != nil {
			return withKind(KindDevice, err)
		}
		s.fstype, id, err = mountFilesystem(cfg.Image, cfg.Format, loop, mp, cfg.FSType, cfg.ReadOnly, s.fs)
		if err != nil {
			return err
		}
		s.mounted = mp.Path
		undo = append(undo, func() {
			mount.UnmountID(mp.Path, id)
			s.fs.endHelper()
		})
		if h := s.fs.helper; h != nil {
			s.log.Printf("the kernel has no driver for %s: %s (pid %d) serves the mount", s.fstype, h.Program, h.PID)
		}
	}

	ln, err := net.Listen("unix", ctlPath(cfg.Name))
	if err != nil {
		return withKind(KindDevice, fmt.Errorf("control socket: %w", err))
	}
	s.ln = ln
	undo = append(undo, func() { ln.Close() })

	pid := os.Getpid()
	st := &State{
		Name: cfg.Name, Backend: "fuse", Image: cfg.Image, ImageDev: cfg.ImageDev, ImageIno: cfg.ImageIno,
		Type: cfg.Format, Cipher: cfg.Cipher, Device: loop, Mountpoint: s.mounted, FSType: s.fstype,
		ReadOnly: cfg.ReadOnly, PID: pid, PIDStart: processStart(pid), Opened: time.Now().UTC(),
		Recovered: s.recovered, Upgraded: s.upgraded != "",
	}
	if mp != nil {
		st.MountDev, st.MountIno = mp.dev, mp.ino
		st.setHelper(s.fs)
	}
	if err := writeState(st); err != nil {
		return withKind(KindDevice, fmt.Errorf("write state: %w", err))
	}
	s.state = st
	return nil
}

// imagePath is where the server opens the image: the file open checked,
// handed over as fd 5 (a new open of it, for the flags the store needs).
const imagePath = "/proc/self/fd/5"

// checkImage makes sure fd 5 is the image open recorded.
func (s *server) checkImage(f *os.File) error {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil || st.Dev != s.cfg.ImageDev || st.Ino != s.cfg.ImageIno {
		return withKind(KindInput, fmt.Errorf("image %s: the file handed to the server is not the one open checked", s.cfg.Image))
	}
	return nil
}

// checkMountpoint makes sure fd 6 is the directory open checked for the
// mount, and holds it as that.
func (s *server) checkMountpoint(f *os.File) (*Mountpoint, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil || st.Dev != s.cfg.MountDev || st.Ino != s.cfg.MountIno || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		f.Close()
		return nil, withKind(KindDevice, fmt.Errorf("mountpoint %s: the directory handed to the server is not the one open checked", s.cfg.Mount))
	}
	return &Mountpoint{Path: s.cfg.Mount, dir: f, dev: st.Dev, ino: st.Ino}, nil
}

// openStore serves what open unlocked: the layout and key of the
// configuration, through the format's own session (disk.Attach: our
// volume checks tags and settles what a crash left) or the generic extent
// device.
func (s *server) openStore(key []byte) (fusefile.Store, error) {
	cfg := s.cfg
	b, err := openBacking(imagePath, cfg.ReadOnly)
	if err != nil {
		return nil, imageError(cfg.Image, err)
	}
	if b.direct == nil {
		s.log.Printf("the filesystem of %s has no O_DIRECT: using buffered I/O", cfg.Image)
	}
	u := &disk.Unlocked{Format: cfg.Format, Layout: cfg.Layout, Key: key, Session: cfg.Session}
	dev, err := disk.Attach(b, u, disk.AttachOptions{ReadOnly: cfg.ReadOnly, Recover: cfg.Recover, Workers: serveWorkers()})
	if err != nil {
		return nil, imageError(cfg.Image, err)
	}
	s.wipe = func() {} // the device's Close wipes its keys
	if r, ok := dev.(disk.Reporter); ok {
		rep := r.AttachReport()
		for _, w := range rep.Warnings {
			s.log.Printf("warning: %s", w)
		}
		s.warnings = append(s.warnings, rep.Warnings...)
		s.recovered, s.upgraded = rep.Recovered, rep.Upgraded
		if r := s.recovered; r != nil {
			s.log.Printf("not closed cleanly: checked %d regions (%d sectors, all: %v): %d sectors mismatched %v, re-tagged: %v",
				r.DirtyRegions, r.Sectors, r.AllRegions, r.Mismatched, r.BadSectors, r.Repaired)
		}
		if s.upgraded != "" {
			s.log.Printf("upgraded to %s", s.upgraded)
		}
	}
	return dev, nil
}

// run serves control requests until the volume is closed, SIGTERM
// arrives, or the FUSE mount disappears.
func (s *server) run() error {
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	fuseGone := make(chan struct{})
	go func() { s.srv.Wait(); close(fuseGone) }()
	closedByCtl := make(chan struct{})
	loopDone := make(chan struct{})
	go func() { s.acceptLoop(closedByCtl); close(loopDone) }()

	for {
		select {
		case <-closedByCtl:
			<-loopDone
			return nil
		case sig := <-term:
			s.log.Printf("%v: closing", sig)
		case <-fuseGone:
			fuseGone = nil // a closed channel would spin
			if !s.isClosed() {
				s.log.Printf("FUSE mount went away: closing")
			}
		}
		// A close request may be running; shutdown waits for it.
		if err := s.shutdown(); err != nil {
			s.log.Printf("close: %v; still serving", err)
			continue
		}
		<-loopDone // shutdown closed the listener; let a reply go out
		return nil
	}
}

func (s *server) acceptLoop(done chan<- struct{}) {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		if s.handle(c) {
			close(done)
			return
		}
	}
}

// handle answers one request; it reports whether the server has closed.
func (s *server) handle(c net.Conn) (closed bool) {
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var req ctlRequest
	if err := json.NewDecoder(c).Decode(&req); err != nil {
		return false
	}
	reply := func(m *readyMsg) { json.NewEncoder(c).Encode(m) }
	switch req.Op {
	case "status":
		stats := s.srv.Stats()
		reply(&readyMsg{OK: true, Device: s.srv.LoopDevice().Path, Stats: &stats})
	case "close":
		if err := s.shutdown(); err != nil {
			s.log.Printf("close: %v", err)
			reply(errorMsg(err))
			return false
		}
		stats := s.dev.Counters.Snapshot()
		reply(&readyMsg{OK: true, Stats: &stats})
		return true
	default:
		reply(errorMsg(fmt.Errorf("unknown request %q", req.Op)))
	}
	return false
}

func (s *server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// shutdown unmounts, detaches, flushes, marks clean and removes the state.
// If the filesystem or the loop device is still in use, it stops before
// anything is lost (release) and keeps serving, mounted as before.
func (s *server) shutdown() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	if err := s.release(); err != nil {
		return err
	}
	var errs []error
	if err := s.srv.Stop(); err != nil {
		errs = append(errs, err)
	}
	if err := s.store.Close(); err != nil {
		errs = append(errs, fmt.Errorf("flush image: %w", err))
	}
	s.wipe()
	s.closed = true
	s.ln.Close()
	dir := stateDir(s.cfg.Name)
	for _, f := range []string{"state.json", "pid", "ctl.sock"} {
		os.Remove(filepath.Join(dir, f))
	}
	os.Remove(filepath.Join(dir, "fuse"))
	os.Remove(dir)
	if err := errors.Join(errs...); err != nil {
		return withKind(KindDevice, err)
	}
	st := s.dev.Counters.Snapshot()
	s.log.Printf("closed: %d reads (%d bytes), %d writes (%d bytes), %d syncs, %d integrity errors",
		st.Reads, st.ReadBytes, st.Writes, st.WriteBytes, st.Syncs, st.IntegrityErrors)
	return nil
}

// loopReleaseWait bounds how long close waits for a loop device that is
// still held after the unmount (a blkid probe lets go at once; a mount in
// another namespace never does) before it refuses.
const loopReleaseWait = time.Second

// release unmounts the filesystem and lets go of the loop device, the
// first two steps of close: the filesystem must not be busy, and nothing
// but that one mount may hold the device (unmountForClose). A device still
// held after the unmount (open in a program, mounted in another mount
// namespace) is kept, and the filesystem mounted again where it was: the
// volume stays served and mounted, as it was, and release fails.
func (s *server) release() error {
	loop := s.srv.LoopDevice()
	m, err := unmountForClose(s.mounted, loop.Path, s.fs)
	if err != nil {
		return err
	}
	if err := loop.Release(loopReleaseWait); err != nil {
		if errors.Is(err, loopdev.ErrBusy) {
			err = deviceBusy(loop.Path)
		} else {
			err = withKind(KindDevice, err)
		}
		return remountAfter(s.state, loop.Path, m, err, s.fs)
	}
	s.mounted = ""
	return nil
}

// serveWorkers is how many goroutines one large request of the server
// spreads its crypto over: one per CPU. Not GOMAXPROCS, which runServer
// raises for blocking I/O; more goroutines than CPUs only add wakeups
// (a 1 MiB volume read: 1.2 GB/s with 8, 1.45 GB/s with 2).
func serveWorkers() int { return runtime.NumCPU() }
