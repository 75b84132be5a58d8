package blockdev

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/xtsctl/xtsctl/blockdev/fusefile"
	"github.com/xtsctl/xtsctl/internal/loopdev"
	"github.com/xtsctl/xtsctl/internal/mount"
	"golang.org/x/sys/unix"
)

// fuseBackend serves a volume from a detached xtsctl process (the hidden
// "internal-serve" command): FUSE file, loop device, optional mount.
type fuseBackend struct{}

func (fuseBackend) available() error {
	if os.Geteuid() != 0 {
		return errors.New("serving a volume needs root (loop devices, FUSE and mount)")
	}
	if err := fusefile.CheckFUSE(); err != nil {
		return err
	}
	return checkLoopSupport()
}

// readyTimeout bounds how long open waits for the server; unlocking a
// volume (its KDF) and mounting a large filesystem both fit well inside.
const readyTimeout = 2 * time.Minute

func (fuseBackend) open(a *run, req *Request) (*State, error) {
	if err := os.MkdirAll(filepath.Dir(LogPath(req.Name)), 0o700); err != nil {
		return nil, withKind(KindDevice, fmt.Errorf("cannot create the server log directory: %w", err))
	}
	if v := os.Getenv(fuseDebugEnv); v == fuseDebugOn {
		a.warningf("%s=%s: the server log %s will hold the first bytes of every read and write, in plaintext, and is kept after close: delete it when done", fuseDebugEnv, v, LogPath(req.Name))
	} else if v != "" {
		a.warningf("%s=%s ignored: only %s=%s turns FUSE request logging on (it logs plaintext)", fuseDebugEnv, v, fuseDebugEnv, fuseDebugOn)
	}
	logf, err := os.OpenFile(LogPath(req.Name), os.O_WRONLY|os.O_CREATE|os.O_APPEND|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, withKind(KindDevice, fmt.Errorf("cannot create server log: %w", err))
	}
	defer logf.Close()
	fmt.Fprintf(logf, "%s open %s as %s\n", time.Now().Format(time.RFC3339), req.Path, req.Name)

	cfgR, cfgW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer cfgR.Close()
	defer cfgW.Close()
	readyR, readyW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer readyR.Close()
	defer readyW.Close()

	cmd := &exec.Cmd{
		Path:   "/proc/self/exe", // this very binary, even if the file was replaced since
		Args:   []string{"xtsctl", ServeCommand},
		Dir:    "/",
		Stdout: logf,
		Stderr: logf,
		// fd 3: configuration and secret; fd 4: readiness; fd 5: the
		// image open checked, which the server serves (never reopening
		// it by path); fd 6, with --mount: the mountpoint checked, which
		// the server mounts on (never looking it up by path again).
		ExtraFiles: []*os.File{cfgR, readyW, req.Image},
		// Its own session: the server outlives this command and
		// its terminal, and gets no SIGINT/SIGHUP from them.
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	if req.MountDir != nil {
		cmd.ExtraFiles = append(cmd.ExtraFiles, req.MountDir.dir)
	}
	if err := startIOFlusher(cmd); err != nil {
		return nil, withKind(KindDevice, fmt.Errorf("cannot start the server: %w", err))
	}
	// Record the pid at once: if this command dies now, the next open
	// or close can still tell a live server from a dead one.
	pidLine := fmt.Sprintf("%d %d\n", cmd.Process.Pid, processStart(cmd.Process.Pid))
	os.WriteFile(filepath.Join(stateDir(req.Name), "pid"), []byte(pidLine), 0o600)
	cfgR.Close()
	readyW.Close()

	cfg := &serverConfig{
		Name: req.Name, RunDir: runDir(), Image: req.Path, ImageDev: req.dev, ImageIno: req.ino,
		Format: req.Unlocked.Format, Layout: req.Unlocked.Layout, Session: req.Unlocked.Session,
		Cipher: cipherOf(req.Unlocked), ReadOnly: req.ReadOnly,
		Mount: req.Mount, FSType: req.FSType, Recover: req.Recover,
	}
	if req.MountDir != nil {
		cfg.MountDev, cfg.MountIno = req.MountDir.dev, req.MountDir.ino
	}
	werr := writeConfig(cfgW, cfg, req.Unlocked.Key)
	cfgW.Close()

	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	msg, rerr := readReady(a, readyR, exited)
	if werr != nil || rerr != nil || !msg.OK {
		cmd.Process.Kill()
		<-exited
		// A server that failed cleans up after itself; one that was
		// killed half-way (interrupt, timeout) may have left mounts.
		partial := &entry{name: req.Name, state: &State{Name: req.Name, Mountpoint: req.Mount}}
		if err := (fuseBackend{}).cleanup(a, partial); err != nil {
			a.warningf("%v", err)
		}
		switch {
		case msg != nil && !msg.OK:
			return nil, msg.asError()
		case errors.Is(rerr, context.Canceled):
			return nil, withKind(KindInterrupted, fmt.Errorf("interrupted; %s was not opened", req.Name))
		case rerr != nil:
			return nil, withKind(KindDevice, fmt.Errorf("the server failed to start: %w", rerr), "see "+LogPath(req.Name))
		}
		return nil, withKind(KindDevice, fmt.Errorf("cannot pass the configuration to the server: %w", werr))
	}
	// The server runs on; it is not our child to wait for any more.
	go func() { <-exited }()
	e, err := readEntry(req.Name)
	if err != nil || e.state == nil {
		return nil, withKind(KindDevice, errors.New("the server reported ready but wrote no state record"))
	}
	for _, w := range msg.Warnings {
		a.warningf("%s: %s", req.Path, w)
	}

	return e.state, nil
}

// readReady waits for the server's readiness message, or for an interrupt.
func readReady(a *run, r io.Reader, exited <-chan error) (*readyMsg, error) {
	type result struct {
		msg *readyMsg
		err error
	}
	got := make(chan result, 1)
	go func() {
		var m readyMsg
		err := json.NewDecoder(r).Decode(&m)
		if err != nil {
			got <- result{nil, err}
			return
		}
		got <- result{&m, nil}
	}()
	select {
	case res := <-got:
		if res.err != nil {
			// EOF without a message: the server died. Say how.
			select {
			case werr := <-exited:
				return nil, fmt.Errorf("it exited (%v)", werr)
			case <-time.After(time.Second):
			}
			return nil, res.err
		}
		return res.msg, nil
	case <-a.ctx.Done():
		return nil, a.ctx.Err()
	case <-time.After(readyTimeout):
		return nil, fmt.Errorf("no answer after %v", readyTimeout)
	}
}

// startIOFlusher starts cmd with PR_SET_IO_FLUSHER set. The server is the
// storage below a loop device: when memory is short, the kernel writes
// dirty pages of the filesystem on that device through us, and an
// allocation of ours that waited for that writeback would deadlock.
// PR_SET_IO_FLUSHER (as for loop and nbd daemons) makes our allocations
// never recurse into filesystem I/O. It is a thread attribute that
// fork and exec keep, so it is set on a locked thread that then starts
// the server, and that thread is thrown away.
func startIOFlusher(cmd *exec.Cmd) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// Deliberately no UnlockOSThread: the thread dies with this
		// goroutine, and with it the flag.
		if err := unix.Prctl(unix.PR_SET_IO_FLUSHER, 1, 0, 0, 0); err != nil {
			// Not fatal (an old kernel, no CAP_SYS_RESOURCE): the
			// server still works, with the classic FUSE risk.
			fmt.Fprintf(cmd.Stderr, "warning: PR_SET_IO_FLUSHER (needs CAP_SYS_RESOURCE) not set: %v\n", err)
		}
		done <- cmd.Start()
	}()
	return <-done
}

func (fuseBackend) alive(e *entry) bool { return processAlive(e.pid, e.start) }

func (fuseBackend) close(a *run, st *State) error {
	msg, err := ctlCall(st.Name, "close", 5*time.Minute)
	if err != nil {
		return withKind(KindDevice, fmt.Errorf("cannot reach the server of %s: %w", st.Name, err),
			fmt.Sprintf("if it hangs, stop it (kill %d), then run 'xtsctl close %s' again to clean up", st.PID, st.Name))
	}
	if !msg.OK {
		return msg.asError()
	}
	// Wait for the process to go, so that a following open finds the
	// image and the name free.
	deadline := time.Now().Add(30 * time.Second)
	for processAlive(st.PID, st.PIDStart) {
		if time.Now().After(deadline) {
			return withKind(KindDevice, fmt.Errorf("the server of %s (pid %d) did not exit", st.Name, st.PID))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if msg.Stats != nil && msg.Stats.IntegrityErrors > 0 {
		a.warningf("%d integrity errors were seen while %s was open (see %s)", msg.Stats.IntegrityErrors, st.Name, LogPath(st.Name))
	}
	return nil
}

// suits: the FUSE backend serves every image, and checks the tags of
// volumes that have them.
func (fuseBackend) suits(req *Request) error { return nil }

func (fuseBackend) stats(st *State) (*fusefile.Stats, error) {
	msg, err := ctlCall(st.Name, "status", 10*time.Second)
	if err != nil {
		return nil, err
	}
	if !msg.OK {
		return nil, msg.asError()
	}
	return msg.Stats, nil
}

// cleanup undoes what a dead server left: the filesystem mount, the loop
// device on its FUSE file and the FUSE mount itself.
func (fuseBackend) cleanup(a *run, e *entry) error {
	fuseDir := filepath.Join(stateDir(e.name), "fuse")
	fuseFile := filepath.Join(fuseDir, fusefile.FileName)
	loops, _ := loopdev.BackedBy(fuseFile)
	// The filesystem is ours to unmount if it sits on our device: the one
	// recorded, or (for an open killed before it recorded one) a loop
	// device on our FUSE file.
	ours := func(src string) bool {
		return src != "" && (e.state != nil && src == e.state.Device || slices.Contains(loops, src))
	}
	if st := e.state; st != nil {
		if err := unmountLeftover(a, st.Mountpoint, ours); err != nil {
			return err
		}
		endLeftoverHelper(a, st)
	}
	if err := cleanStaging(e.name); err != nil {
		return err
	}
	for _, d := range loops {
		if err := loopdev.DetachPath(d); err != nil {
			return withKind(KindDevice, err)
		}
	}
	if m, _ := mount.At(fuseDir); m != nil {
		if err := mount.DetachID(fuseDir, m.ID); err != nil {
			return withKind(KindDevice, err)
		}
	}
	return nil
}

// describeLeftovers says what cleanup found, for the warning.
func describeLeftovers(e *entry) string {
	var parts []string
	if e.pid > 0 {
		parts = append(parts, fmt.Sprintf("server pid %d is gone", e.pid))
	}
	if e.state != nil && e.state.Device != "" {
		parts = append(parts, "device "+e.state.Device)
	}
	if e.state != nil && e.state.Mountpoint != "" {
		parts = append(parts, "mountpoint "+e.state.Mountpoint)
	}
	return strings.Join(parts, ", ")
}
