package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/xtsctl/xtsctl/internal/safefile"
	"golang.org/x/sys/unix"
)

// These tests stop xtsctl while it writes an output (SIGKILL, SIGHUP,
// SIGTERM, SIGINT, a reader that closes the pipe) and list the directory
// afterwards: nothing may be named like an output, nor hold part of one.

// lockedBuffer is a stderr that can be read while the process runs.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startWriting starts xtsctl with args and returns once ready says it is
// in the middle of writing its output. done delivers cmd.Wait's error.
func startWriting(t *testing.T, ready func(pid int) bool, stdout io.Writer, args ...string) (cmd *exec.Cmd, stderr *lockedBuffer, done <-chan error) {
	t.Helper()
	stderr = &lockedBuffer{}
	cmd = exec.Command("xtsctl", args...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ch := make(chan error, 1)
	go func() { ch <- cmd.Wait() }()
	for deadline := time.Now().Add(60 * time.Second); !ready(cmd.Process.Pid); time.Sleep(time.Millisecond) {
		select {
		case err := <-ch:
			t.Fatalf("xtsctl %s ended before it was seen writing: %v; stderr: %s", strings.Join(args, " "), err, stderr)
		default:
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			<-ch
			t.Fatalf("xtsctl %s was never seen writing its output", strings.Join(args, " "))
		}
	}
	return cmd, stderr, ch
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	return names
}

// checkStopped checks how a run stopped by sig ended: killed by SIGKILL,
// or exit 130 saying that out was not written.
func checkStopped(t *testing.T, sig syscall.Signal, err error, stderr, out string) {
	t.Helper()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("%v: xtsctl finished (%v); stderr: %s", sig, err, stderr)
	}
	if sig == syscall.SIGKILL {
		if ws, ok := ee.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("not killed by SIGKILL: %v", err)
		}
		return
	}
	if ee.ExitCode() != exitInterrupted || !strings.Contains(stderr, "interrupted; "+out+" was not written") {
		t.Errorf("%v: exit %v, stderr %q; want exit %d and \"interrupted; %s was not written\"", sig, err, stderr, exitInterrupted, out)
	}
}

// leftoverInputs makes, in a new directory, the inputs the tests below
// decrypt and encrypt: 256 MiB each, so that a run is stopped in the
// middle.
type leftoverInputs struct {
	dir, key, pass, plainEnc, vol, src string
	names                              []string
}

func makeLeftoverInputs(t *testing.T) *leftoverInputs {
	t.Helper()
	in := &leftoverInputs{dir: t.TempDir()}
	in.key = writeTestKey(t, in.dir)
	in.pass = filepath.Join(in.dir, "pass")
	os.WriteFile(in.pass, []byte("leftovers"), 0o600)
	in.plainEnc = filepath.Join(in.dir, "plain.enc")
	in.src = filepath.Join(in.dir, "src.img")
	in.vol = filepath.Join(in.dir, "disk.vol")
	for _, p := range []string{in.plainEnc, in.src} {
		if err := os.Truncate(createEmpty(t, p), 256<<20); err != nil {
			t.Fatal(err)
		}
	}
	if code, _, stderr := runOut(t, "encrypt", "-q", "--passphrase-file", in.pass, in.src, in.vol); code != 0 {
		t.Fatal(stderr)
	}
	in.names = dirNames(t, in.dir)
	return in
}

// onlyInputs fails unless dir holds the inputs and nothing else.
func (in *leftoverInputs) onlyInputs(t *testing.T, what string, extra ...string) {
	t.Helper()
	want := slices.Sorted(slices.Values(append(slices.Clone(in.names), extra...)))
	if got := dirNames(t, in.dir); !slices.Equal(got, want) {
		t.Errorf("%s: the directory holds %v, want only %v", what, got, want)
	}
}

func (in *leftoverInputs) decrypts() map[string][]string {
	return map[string][]string{
		"plain":  {"decrypt", "--type", "plain", "--key-file", in.key, in.plainEnc},
		"volume": {"decrypt", "--passphrase-file", in.pass, in.vol},
	}
}

// TestDecryptLeavesNothing: decrypt (of a plain image and of a volume)
// stopped in the middle by SIGKILL, SIGHUP (a dropped ssh connection),
// SIGTERM or SIGINT leaves nothing beside its input: no output, no
// temporary file holding part of the plaintext.
func TestDecryptLeavesNothing(t *testing.T) {
	in := makeLeftoverInputs(t)
	out := filepath.Join(in.dir, "out.img")
	for kind, args := range in.decrypts() {
		for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGHUP, syscall.SIGTERM, syscall.SIGINT} {
			cmd, stderr, done := startWriting(t, func(pid int) bool { return writingOutput(pid, in.dir, 1<<20) }, nil, append(args, out)...)
			cmd.Process.Signal(sig)
			checkStopped(t, sig, <-done, stderr.String(), out)
			in.onlyInputs(t, fmt.Sprintf("%s decrypt stopped by %v", kind, sig))
		}
	}
}

// TestDecryptToClosedPipe: decrypt to a pipe whose reader closes early
// (standard output, or a named pipe) ends with exit 5 and an error that
// says so, instead of dying of SIGPIPE; nothing is left beside the input.
func TestDecryptToClosedPipe(t *testing.T) {
	in := makeLeftoverInputs(t)
	for kind, args := range in.decrypts() {
		var stderr bytes.Buffer
		cmd := exec.Command("xtsctl", append(args, "-")...)
		cmd.Stderr = &stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(stdout, make([]byte, 64<<10)); err != nil {
			t.Fatalf("%s: %v; stderr: %s", kind, err, stderr.String())
		}
		stdout.Close()
		err = cmd.Wait()
		code := 0
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			code = ee.ExitCode() // -1 if killed by a signal
		}
		if code != exitOutput || !strings.Contains(stderr.String(), "the reader of standard output went away (broken pipe); what was written to standard output is incomplete or unverified: discard it") {
			t.Errorf("%s to a closed pipe: %v, stderr %q; want exit %d saying the reader went away", kind, err, stderr.String(), exitOutput)
		}
		in.onlyInputs(t, kind+" decrypt to a closed pipe")

		// A named pipe as OUT.
		fifo := filepath.Join(in.dir, "fifo")
		if err := unix.Mkfifo(fifo, 0o600); err != nil {
			t.Fatal(err)
		}
		go func() {
			r, err := os.Open(fifo)
			if err == nil {
				io.ReadFull(r, make([]byte, 64<<10))
				r.Close()
			}
		}()
		code, _, msg := runOutProcess(t, append(args, fifo)...)
		if code != exitOutput || !strings.Contains(msg, "the reader of "+fifo+" went away (broken pipe)") {
			t.Errorf("%s to a named pipe closed early: exit %d, stderr %q", kind, code, msg)
		}
		in.onlyInputs(t, kind+" decrypt to a closed named pipe", "fifo")
		os.Remove(fifo)
	}
}

// runOutProcess runs xtsctl as a process (SIGPIPE is the process's).
func runOutProcess(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	cmd := exec.Command("xtsctl", args...)
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode(), o.String(), e.String()
	case err != nil:
		t.Fatal(err)
	}
	return 0, o.String(), e.String()
}

// TestOtherOutputsLeaveNothing: the other commands that write outputs
// (encrypt, format, header backup, info --key-output) killed with
// SIGKILL leave no output and no part of one: the long ones in the middle
// of writing, the short ones at random moments (then the output is either
// absent or complete).
func TestOtherOutputsLeaveNothing(t *testing.T) {
	in := makeLeftoverInputs(t)
	out := filepath.Join(in.dir, "out")
	for _, args := range [][]string{
		{"encrypt", "--type", "plain", "--key-file", in.key, in.src, out},
		{"encrypt", "--passphrase-file", in.pass, in.src, out},
		{"format", "--passphrase-file", in.pass, "--size", "256M", out},
	} {
		for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGHUP} {
			cmd, stderr, done := startWriting(t, func(pid int) bool { return writingOutput(pid, in.dir, 1<<20) }, nil, args...)
			cmd.Process.Signal(sig)
			checkStopped(t, sig, <-done, stderr.String(), out)
			in.onlyInputs(t, fmt.Sprintf("%s stopped by %v", strings.Join(args, " "), sig))
		}
	}
	r := rand.New(rand.NewPCG(23, 6))
	for _, args := range [][]string{
		{"header", "backup", in.vol, out},
		{"info", "--dm-table", "--show-key", "--passphrase-file", in.pass, "--key-output", out, in.vol},
	} {
		if code, _, stderr := runOutProcess(t, args...); code != 0 {
			t.Fatalf("%s: %s", strings.Join(args, " "), stderr)
		}
		want, _ := os.ReadFile(out)
		os.Remove(out)
		start := time.Now()
		runOutProcess(t, args...)
		full := time.Since(start)
		os.Remove(out)
		complete := 0
		for range 12 {
			cmd := exec.Command("xtsctl", args...)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Duration(r.Int64N(int64(full))))
			cmd.Process.Signal(syscall.SIGKILL)
			cmd.Wait()
			if got, err := os.ReadFile(out); err == nil {
				if !bytes.Equal(got, want) {
					t.Fatalf("%s killed: %s holds %d bytes, not the complete output", strings.Join(args, " "), out, len(got))
				}
				complete++
				os.Remove(out)
			}
			in.onlyInputs(t, strings.Join(args, " ")+" killed at a random moment")
		}
		t.Logf("%s: a run takes %v; %d of 12 killed runs had finished", args[0], full, complete)
	}
}

// TestStdoutRedirected: an output that is standard output redirected to
// a file is written through it: with >> it is appended to (with or
// without --force, named - or /dev/stdout or /proc/self/fd/1), never
// replaced; with > it is written where the shell left it, and a run
// stopped by a signal truncates it back, leaving no partial plaintext.
func TestStdoutRedirected(t *testing.T) {
	in := makeLeftoverInputs(t)
	small := filepath.Join(t.TempDir(), "small.enc")
	os.WriteFile(small, bytes.Repeat([]byte("ciphertext sector"), 1<<14)[:1<<18], 0o600)
	plain := filepath.Join(t.TempDir(), "small.img")
	if code, _, stderr := runOut(t, "decrypt", "-q", "--type", "plain", "--key-file", in.key, small, plain); code != 0 {
		t.Fatal(stderr)
	}
	data, _ := os.ReadFile(plain)

	logPath := filepath.Join(t.TempDir(), "log")
	os.WriteFile(logPath, []byte("log\n"), 0o644)
	want := []byte("log\n")
	var before unix.Stat_t
	unix.Stat(logPath, &before)
	for _, name := range []string{"-", "/dev/stdout", "/proc/self/fd/1"} {
		for _, force := range []string{"--force=false", "--force"} {
			log, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			var stderr bytes.Buffer
			cmd := exec.Command("xtsctl", "decrypt", "-q", force, "--type", "plain", "--key-file", in.key, small, name)
			cmd.Stdout, cmd.Stderr = log, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("%s %s >> log: %v: %s", name, force, err, stderr.String())
			}
			log.Close()
			want = append(want, data...)
		}
	}
	var after unix.Stat_t
	unix.Stat(logPath, &after)
	if got, _ := os.ReadFile(logPath); !bytes.Equal(got, want) || after.Ino != before.Ino {
		t.Errorf("log is %d bytes (inode %d, was %d), want the %d of the log and the outputs appended", len(got), after.Ino, before.Ino, len(want))
	}

	// > redirection, stopped in the middle.
	redirected := filepath.Join(t.TempDir(), "redirected")
	for _, name := range []string{"-", "/dev/stdout"} {
		for kind, args := range in.decrypts() {
			f, err := os.OpenFile(redirected, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
			if err != nil {
				t.Fatal(err)
			}
			grown := func(int) bool {
				fi, err := f.Stat()
				return err == nil && fi.Size() >= 1<<20
			}
			cmd, stderr, done := startWriting(t, grown, f, append(args, name)...)
			cmd.Process.Signal(syscall.SIGHUP)
			err = <-done
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != exitInterrupted || !strings.Contains(stderr.String(), "was truncated away") {
				t.Errorf("%s decrypt > file stopped by SIGHUP: %v, stderr %q", kind, err, stderr)
			}
			if fi, _ := f.Stat(); fi.Size() != 0 {
				t.Errorf("%s decrypt to %s > file stopped by SIGHUP left %d bytes in it", kind, name, fi.Size())
			}
			f.Close()
		}
	}
	in.onlyInputs(t, "decrypts to standard output")
}

// noTmpfileNode is a loopback FUSE node whose filesystem has no O_TMPFILE,
// as some FUSE, NFS and overlay setups.
type noTmpfileNode struct{ *fs.LoopbackNode }

func (*noTmpfileNode) Tmpfile(context.Context, uint32, uint32, *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	return nil, nil, 0, syscall.EOPNOTSUPP
}

func (*noTmpfileNode) WrapChild(_ context.Context, ops fs.InodeEmbedder) fs.InodeEmbedder {
	return &noTmpfileNode{ops.(*fs.LoopbackNode)}
}

// mountNoTmpfile mounts a directory without O_TMPFILE, or skips.
func mountNoTmpfile(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting FUSE needs root")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("no /dev/fuse")
	}
	backing, mnt := t.TempDir(), t.TempDir()
	loopback, err := fs.NewLoopbackRoot(backing)
	if err != nil {
		t.Fatal(err)
	}
	root := &noTmpfileNode{loopback.(*fs.LoopbackNode)}
	server, err := fs.Mount(mnt, root, &fs.Options{MountOptions: fuse.MountOptions{DirectMountStrict: true, FsName: "xtsctl-test-notmpfile"}})
	if err != nil {
		t.Skipf("FUSE mount: %v", err)
	}
	t.Cleanup(func() { server.Unmount() })
	if fd, err := unix.Open(mnt, unix.O_TMPFILE|unix.O_RDWR, 0o600); err == nil {
		unix.Close(fd)
		t.Fatal("the test filesystem has O_TMPFILE")
	}
	return mnt
}

// TestOutputWithoutTmpfile: where the filesystem has no O_TMPFILE, the
// output goes through a hidden temporary file: a run that ends (fails,
// SIGHUP, SIGTERM) removes it; only SIGKILL leaves it, named
// .xtsctl-tmp-OUT.RANDOM and readable by its owner only (docs/CLI.md).
func TestOutputWithoutTmpfile(t *testing.T) {
	mnt := mountNoTmpfile(t)
	in := makeLeftoverInputs(t)
	out := filepath.Join(mnt, "out.img")
	args := in.decrypts()["plain"]
	if code, _, stderr := runOutProcess(t, append(args, out)...); code != 0 {
		t.Fatal(stderr)
	}
	if names := dirNames(t, mnt); !slices.Equal(names, []string{"out.img"}) {
		t.Fatalf("after a complete run the directory holds %v", names)
	}
	if code, _, stderr := runOutProcess(t, append(args, "--force", out)...); code != 0 {
		t.Fatal(stderr)
	}
	os.Remove(out)
	for _, sig := range []syscall.Signal{syscall.SIGHUP, syscall.SIGTERM, syscall.SIGKILL} {
		cmd, stderr, done := startWriting(t, func(pid int) bool { return writingOutput(pid, mnt, 1<<20) }, nil, append(args, out)...)
		cmd.Process.Signal(sig)
		checkStopped(t, sig, <-done, stderr.String(), out)
		names := dirNames(t, mnt)
		if sig != syscall.SIGKILL {
			if len(names) != 0 {
				t.Errorf("stopped by %v: the directory holds %v", sig, names)
			}
			continue
		}
		if len(names) != 1 || !strings.HasPrefix(names[0], safefile.TempPrefix+"out.img.") {
			t.Fatalf("killed: the directory holds %v, want one %sout.img.RANDOM", names, safefile.TempPrefix)
		}
		if fi, err := os.Stat(filepath.Join(mnt, names[0])); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("the leftover %v, %v: want mode 0600", fi, err)
		}
	}
	in.onlyInputs(t, "runs writing elsewhere")
}

// TestResultsToClosedPipe: results printed to a standard output whose
// reader is gone (a digest, JSON) end the command with exit 5 saying so,
// not with a death by SIGPIPE and not with exit 0.
func TestResultsToClosedPipe(t *testing.T) {
	dir := t.TempDir()
	pass := filepath.Join(dir, "pass")
	os.WriteFile(pass, []byte("results"), 0o600)
	vol := filepath.Join(dir, "v.vol")
	if code, _, stderr := runOut(t, "format", "-q", "--passphrase-file", pass, "--size", "64K", vol); code != 0 {
		t.Fatal(stderr)
	}
	for _, args := range [][]string{{"info", "--json", vol}, {"verify", "--passphrase-file", pass, vol}} {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		r.Close()
		var stderr bytes.Buffer
		cmd := exec.Command("xtsctl", args...)
		cmd.Stdout, cmd.Stderr = w, &stderr
		err = cmd.Run()
		w.Close()
		code := 0
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			code = ee.ExitCode()
		}
		if code != exitOutput || !strings.Contains(stderr.String(), "the reader of standard output went away before all results were printed (broken pipe)") {
			t.Errorf("%s to a closed pipe: %v, stderr %q; want exit %d", args[0], err, stderr.String(), exitOutput)
		}
	}
}

// TestVerifyInterrupted: a command without output stopped by SIGHUP exits
// 130 naming the signal, as after Ctrl-C.
func TestVerifyInterrupted(t *testing.T) {
	in := makeLeftoverInputs(t)
	for _, sig := range []syscall.Signal{syscall.SIGHUP, syscall.SIGINT} {
		var stdout lockedBuffer
		started := func(int) bool { return strings.Contains(stdout.String(), "key slots in use") }
		cmd, stderr, done := startWriting(t, started, &stdout, "verify", "--passphrase-file", in.pass, in.vol)
		cmd.Process.Signal(sig)
		err := <-done
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitInterrupted || !strings.Contains(stderr.String(), "interrupted by "+unix.SignalName(sig)) {
			t.Errorf("verify stopped by %v: %v, stderr %q; want exit %d", sig, err, stderr, exitInterrupted)
		}
	}
}
