package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/xtsctl/xtsctl/internal/safefile"
)

// startAndSignal starts xtsctl on a large sparse input, waits until it
// writes its output, sends sig, and returns the exit error and the
// directory contents. The input is large enough (1 GiB) that xtsctl cannot
// finish before the signal arrives.
func startAndSignal(t *testing.T, sig syscall.Signal) (dir, stderr string, err error) {
	t.Helper()
	dir = t.TempDir()
	in := filepath.Join(dir, "in.img")
	if err := os.Truncate(createEmpty(t, in), 1<<30); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(dir, "k")
	os.WriteFile(key, []byte("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ!?"), 0o600)
	var errBuf strings.Builder
	cmd := exec.Command("xtsctl", "encrypt", "--type", "plain", "--key-file", key, in, filepath.Join(dir, "out.img"))
	cmd.Stderr = &errBuf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for !writingOutput(cmd.Process.Pid, dir, 1) {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("xtsctl was never seen writing its output")
		}
		time.Sleep(time.Millisecond)
	}
	cmd.Process.Signal(sig)
	err = cmd.Wait()
	return dir, errBuf.String(), err
}

// writingOutput reports whether process pid has an output open in dir
// (an unnamed file, "#INODE (deleted)", or a temporary file of the
// fallback) holding at least min bytes.
func writingOutput(pid int, dir string, min int64) bool {
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	for _, fd := range fds {
		link := fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())
		target, err := os.Readlink(link)
		name, unnamed := strings.CutSuffix(target, " (deleted)")
		if err != nil || filepath.Dir(name) != dir {
			continue
		}
		if !unnamed && !strings.HasPrefix(filepath.Base(name), safefile.TempPrefix) {
			continue
		}
		if fi, err := os.Stat(link); err == nil && fi.Size() >= min {
			return true
		}
	}
	return false
}

func createEmpty(t *testing.T, path string) string {
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	return path
}

func hasTemp(t *testing.T, dir string) bool {
	des, _ := os.ReadDir(dir)
	for _, de := range des {
		if strings.HasPrefix(de.Name(), safefile.TempPrefix) {
			return true
		}
	}
	return false
}

// TestInterruptLeavesNoOutput: Ctrl-C (SIGINT), SIGTERM and SIGHUP stop
// xtsctl with exit code 130, no file named OUT, and no temporary file
// either.
func TestInterruptLeavesNoOutput(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		dir, stderr, err := startAndSignal(t, sig)
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("%v: xtsctl finished before the signal (err %v)", sig, err)
		}
		if ee.ExitCode() != exitInterrupted {
			t.Errorf("%v: exit code %d, want %d; stderr: %s", sig, ee.ExitCode(), exitInterrupted, stderr)
		}
		if !strings.Contains(stderr, "interrupted;") || !strings.Contains(stderr, "out.img was not written") {
			t.Errorf("%v: stderr %q does not say the output was not written", sig, stderr)
		}
		if _, err := os.Stat(filepath.Join(dir, "out.img")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%v: out.img exists after interruption", sig)
		}
		if hasTemp(t, dir) {
			t.Errorf("%v: temporary file left behind", sig)
		}
	}
}

// TestKillLeavesNoOutput: SIGKILL cannot be caught; still, nothing is
// left beside the input: the output was an unnamed file.
func TestKillLeavesNoOutput(t *testing.T) {
	dir, _, err := startAndSignal(t, syscall.SIGKILL)
	if err == nil {
		t.Fatal("xtsctl finished before SIGKILL")
	}
	if names := dirNames(t, dir); !slices.Equal(names, []string{"in.img", "k"}) {
		t.Errorf("after SIGKILL the directory holds %v, want only the input and the key", names)
	}
}

// TestInterruptWaitingForSecret: a passphrase file that is a FIFO nobody
// writes to (open(2) waits for a writer), or standard input from a pipe
// whose writer never writes, does not keep Ctrl-C or SIGTERM from ending
// the command at once (exit 130, naming the signal), nothing written.
func TestInterruptWaitingForSecret(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.img")
	if err := os.WriteFile(in, make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "pass")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		sig   syscall.Signal
		file  string
		stdin bool
	}{
		{"a FIFO without a writer, SIGINT", syscall.SIGINT, fifo, false},
		{"a FIFO without a writer, SIGTERM", syscall.SIGTERM, fifo, false},
		{"a silent pipe on standard input, SIGINT", syscall.SIGINT, "-", true},
	} {
		out := filepath.Join(dir, "out.vol")
		cmd := exec.Command("xtsctl", "encrypt", "--passphrase-file", c.file, in, out)
		var errBuf strings.Builder
		cmd.Stderr = &errBuf
		var w *os.File
		if c.stdin {
			r, pw, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stdin, w = r, pw
			defer r.Close()
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Once it waits for the secret: in open(2) of the FIFO, or with
		// the pipe open.
		err := signalWhen(t, cmd, c.name+" waiting for the secret", func() bool { return waitingFor(cmd.Process.Pid) }, c.sig)
		if w != nil {
			w.Close()
		}
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitInterrupted || !strings.Contains(errBuf.String(), "interrupted by "+map[syscall.Signal]string{syscall.SIGINT: "SIGINT", syscall.SIGTERM: "SIGTERM"}[c.sig]) {
			t.Errorf("%s: %v, stderr:\n%s\nwant exit %d naming the signal", c.name, err, errBuf.String(), exitInterrupted)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%s: %s was written", c.name, out)
		}
	}
}

// waitingFor reports whether process pid waits for its secret: one of
// its threads blocked in open(2) of the FIFO (wchan wait_for_partner) or
// in a read of the pipe (pipe_read).
// signalWhen sends sig to cmd once ready holds (what says when: it is an
// error if that never comes) and returns cmd's end (an error, and killed,
// if it does not end).
func signalWhen(t *testing.T, cmd *exec.Cmd, what string, ready func() bool, sig syscall.Signal) error {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ready() {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("xtsctl was never seen %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cmd.Process.Signal(sig)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Errorf("xtsctl %s did not end after %v", what, sig)
		return <-done
	}
}

func waitingFor(pid int) bool {
	return waitingIn(pid, "wait_for_partner", "pipe_read")
}

// waitingIn reports whether a thread of process pid waits in one of the
// kernel functions named (its wchan).
func waitingIn(pid int, funcs ...string) bool {
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	for _, task := range tasks {
		w, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/wchan", pid, task.Name()))
		for _, f := range funcs {
			if strings.Contains(string(w), f) {
				return true
			}
		}
	}
	return false
}

// TestInterruptStalledStream: a dropped ssh connection (SIGHUP), SIGTERM
// or Ctrl-C ends a --type plain run whose standard output is a pipe nobody
// reads any more, whose standard input is a pipe that went silent, or
// whose IN or OUT is a named pipe nobody opened the other end of
// (write(2), read(2) and open(2) wait in the kernel there): exit 130, and
// an output file is not written. They used to wait for the pipe forever.
func TestInterruptStalledStream(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.img")
	if err := os.Truncate(createEmpty(t, in), 64<<20); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(dir, "k")
	os.WriteFile(key, []byte("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ!?"), 0o600)
	out := filepath.Join(dir, "out.img")
	for _, c := range []struct {
		name   string
		sig    syscall.Signal
		stream string // what stalls: stdout, stdin, fifo-in, fifo-out
	}{
		{"standard output stalled, SIGHUP", syscall.SIGHUP, "stdout"},
		{"standard output stalled, SIGTERM", syscall.SIGTERM, "stdout"},
		{"standard input stalled, SIGHUP", syscall.SIGHUP, "stdin"},
		{"IN a named pipe without a writer, SIGTERM", syscall.SIGTERM, "fifo-in"},
		{"OUT a named pipe without a reader, SIGINT", syscall.SIGINT, "fifo-out"},
	} {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		args := []string{"encrypt", "--type", "plain", "--key-file", key}
		fifo := filepath.Join(dir, "fifo-"+c.stream)
		var feeding chan struct{}
		switch c.stream {
		case "stdin":
			args = append(args, "-", out)
			feeding = make(chan struct{})
			go func() { // some data, then silence with the pipe open
				w.Write(make([]byte, 1<<20))
				close(feeding)
			}()
		case "stdout":
			args = append(args, in, "-")
		case "fifo-in", "fifo-out":
			if err := syscall.Mkfifo(fifo, 0o600); err != nil {
				t.Fatal(err)
			}
			if c.stream == "fifo-in" {
				args = append(args, fifo, out)
			} else {
				args = append(args, in, fifo)
			}
		}
		cmd := exec.Command("xtsctl", args...)
		switch c.stream {
		case "stdin":
			cmd.Stdin = r
		case "stdout":
			cmd.Stdout = w
		}
		var errBuf strings.Builder
		cmd.Stderr = &errBuf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		stalled := map[string]func() bool{
			"stdout": func() bool { return waitingIn(cmd.Process.Pid, "pipe_write") },
			"stdin": func() bool {
				select {
				case <-feeding:
					return waitingIn(cmd.Process.Pid, "pipe_read")
				default:
					return false
				}
			},
			"fifo-in":  func() bool { return waitingIn(cmd.Process.Pid, "wait_for_partner") },
			"fifo-out": func() bool { return waitingIn(cmd.Process.Pid, "wait_for_partner") },
		}[c.stream]
		err = signalWhen(t, cmd, c.name+" waiting on the pipe", stalled, c.sig)
		r.Close()
		w.Close()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitInterrupted || !strings.Contains(errBuf.String(), "interrupted") {
			t.Errorf("%s: %v, stderr:\n%s\nwant exit %d, interrupted", c.name, err, errBuf.String(), exitInterrupted)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%s: %s was written", c.name, out)
		}
	}
}
