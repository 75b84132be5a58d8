//go:build linux

package main

// The passphrase prompt on a real terminal (a pseudo-terminal whose
// other side is the test, as a person at the keyboard): Ctrl-C and Ctrl-D
// end it at once, a wrong passphrase is asked for again (--tries), and
// the terminal is left as it was.

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// ptySession is xtsctl running with a pseudo-terminal as its controlling
// terminal; the test types on the other side.
type ptySession struct {
	t              *testing.T
	master, slave  *os.File
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
	mu             sync.Mutex
	screen         bytes.Buffer // what xtsctl wrote to the terminal
	done           chan error
	termios        *unix.Termios // the terminal's mode before xtsctl ran
}

// openPTY opens a pseudo-terminal pair.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	return m, s
}

// startOnPTY runs xtsctl args in dir with a new pseudo-terminal as its
// controlling terminal (and nothing on standard input).
func startOnPTY(t *testing.T, dir string, args ...string) *ptySession {
	t.Helper()
	s := &ptySession{t: t, done: make(chan error, 1)}
	s.master, s.slave = openPTY(t)
	var err error
	if s.termios, err = unix.IoctlGetTermios(int(s.slave.Fd()), unix.TCGETS); err != nil {
		t.Fatal(err)
	}
	s.cmd = exec.Command("xtsctl", args...)
	s.cmd.Dir = dir
	s.cmd.Stdout, s.cmd.Stderr = &s.stdout, &s.stderr
	s.cmd.ExtraFiles = []*os.File{s.slave} // fd 3
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 3}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := s.master.Read(buf)
			s.mu.Lock()
			s.screen.Write(buf[:n])
			s.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	go func() { s.done <- s.cmd.Wait() }()
	t.Cleanup(func() {
		s.cmd.Process.Kill()
		s.master.Close()
		s.slave.Close()
	})
	return s
}

func (s *ptySession) shown() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.screen.String()
}

// waitFor waits until the terminal shows text n times (a minute at most:
// a guard against a hang, not a measure of speed).
func (s *ptySession) waitFor(text string, n int) {
	s.t.Helper()
	for deadline := time.Now().Add(time.Minute); strings.Count(s.shown(), text) < n; time.Sleep(10 * time.Millisecond) {
		select {
		case err := <-s.done:
			s.done <- err
			s.t.Fatalf("xtsctl ended (%v) before the terminal showed %q %d times; it shows %q; stderr: %s", err, text, n, s.shown(), s.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("the terminal did not show %q %d times; it shows %q", text, n, s.shown())
		}
	}
}

// typeKeys writes to the terminal as the keyboard would.
func (s *ptySession) typeKeys(keys string) {
	s.t.Helper()
	if _, err := s.master.Write([]byte(keys)); err != nil {
		s.t.Fatal(err)
	}
}

// wait returns xtsctl's exit code (a minute at most).
func (s *ptySession) wait() int {
	s.t.Helper()
	select {
	case err := <-s.done:
		var ee *exec.ExitError
		switch {
		case err == nil:
			return 0
		case errors.As(err, &ee):
			return ee.ExitCode()
		}
		s.t.Fatal(err)
	case <-time.After(time.Minute):
		s.t.Fatalf("xtsctl did not end; the terminal shows %q", s.shown())
	}
	return -1
}

// checkRestored fails unless the terminal's mode is what it was before
// xtsctl ran (echo on), and the last thing on it is a newline.
func (s *ptySession) checkRestored() {
	s.t.Helper()
	now, err := unix.IoctlGetTermios(int(s.slave.Fd()), unix.TCGETS)
	if err != nil {
		s.t.Fatal(err)
	}
	if now.Lflag != s.termios.Lflag || now.Iflag != s.termios.Iflag || now.Lflag&unix.ECHO == 0 {
		s.t.Errorf("terminal mode after xtsctl: lflag %#x iflag %#x, want %#x %#x (echo on)", now.Lflag, now.Iflag, s.termios.Lflag, s.termios.Iflag)
	}
	// The reader may lag behind the exit by a moment.
	for deadline := time.Now().Add(5 * time.Second); !strings.HasSuffix(s.shown(), "\n") && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.HasSuffix(s.shown(), "\n") {
		s.t.Errorf("the terminal does not end with a newline: %q", s.shown())
	}
}

// promptVolume makes a volume with passphrase "right passphrase" whose
// key slot takes a real (if small) Argon2id run.
func promptVolume(t *testing.T) (dir string) {
	t.Helper()
	dir = t.TempDir()
	pass := filepath.Join(dir, "pass")
	if err := os.WriteFile(pass, []byte("right passphrase\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runOut(t, "format", "-q", "--passphrase-file", pass, "--size", "64K", filepath.Join(dir, "disk.vol")); code != 0 {
		t.Fatalf("format: %d %s", code, stderr)
	}
	return dir
}

// TestPromptCtrlC: Ctrl-C at the prompt stops xtsctl at once, without
// Enter: exit 130, the terminal restored, no output file.
func TestPromptCtrlC(t *testing.T) {
	dir := promptVolume(t)
	s := startOnPTY(t, dir, "decrypt", "disk.vol", "out.img")
	s.waitFor("Enter the passphrase for disk.vol: ", 1)
	s.typeKeys("half a passp") // typed, not entered
	s.typeKeys("\x03")
	if code := s.wait(); code != exitInterrupted {
		t.Errorf("exit %d, want %d; stderr: %s", code, exitInterrupted, s.stderr.String())
	}
	if want := "xtsctl: error: interrupted by SIGINT at the prompt for the passphrase for disk.vol\n"; s.stderr.String() != want {
		t.Errorf("stderr %q, want %q", s.stderr.String(), want)
	}
	if strings.Contains(s.shown(), "half") {
		t.Errorf("the passphrase was echoed: %q", s.shown())
	}
	s.checkRestored()
	if names := dirNames(t, dir); strings.Join(names, " ") != "disk.vol pass" {
		t.Errorf("after Ctrl-C the directory holds %v", names)
	}
}

// TestPromptCtrlD: Ctrl-D at the prompt, on an empty line or after some
// characters, gives no passphrase: exit 4 at once.
func TestPromptCtrlD(t *testing.T) {
	dir := promptVolume(t)
	for _, typed := range []string{"", "some"} {
		s := startOnPTY(t, dir, "verify", "disk.vol")
		s.waitFor("Enter the passphrase for disk.vol: ", 1)
		s.typeKeys(typed + "\x04")
		if code := s.wait(); code != exitKey {
			t.Errorf("%q then Ctrl-D: exit %d, want %d; stderr: %s", typed, code, exitKey, s.stderr.String())
		}
		if want := "xtsctl: error: no passphrase given: the input ended (Ctrl-D) at the prompt for the passphrase for disk.vol\n"; s.stderr.String() != want {
			t.Errorf("%q then Ctrl-D: stderr %q, want %q", typed, s.stderr.String(), want)
		}
		if s.stdout.Len() != 0 {
			t.Errorf("stdout: %q", s.stdout.String())
		}
		s.checkRestored()
	}
}

// TestPromptTries: a wrong passphrase at the terminal is asked for again,
// three times in all by default (--tries N otherwise), saying why; the
// right one on a later try opens. Each try is one unlock.
func TestPromptTries(t *testing.T) {
	dir := promptVolume(t)
	const prompt = "Enter the passphrase for disk.vol: "

	// Wrong, wrong, right: opens on the third try.
	s := startOnPTY(t, dir, "-v", "verify", "disk.vol")
	s.waitFor(prompt, 1)
	s.typeKeys("wrong one\n")
	s.waitFor(prompt, 2)
	s.typeKeys("wrong two\n")
	s.waitFor(prompt, 3)
	s.typeKeys("right passphrase\n")
	if code := s.wait(); code != 0 {
		t.Fatalf("right on the third try: exit %d; stderr: %s", code, s.stderr.String())
	}
	for _, want := range []string{"wrong passphrase: no key slot opens with it (try 2 of 3)\r\n", "(try 3 of 3)\r\n"} {
		if !strings.Contains(s.shown(), want) {
			t.Errorf("the terminal does not say %q: %q", want, s.shown())
		}
	}
	if strings.Contains(s.shown(), "wrong one") || strings.Contains(s.shown(), "right passphrase") {
		t.Errorf("a passphrase was echoed: %q", s.shown())
	}
	if n := strings.Count(s.stderr.String(), "trying key slot 0"); n != 3 {
		t.Errorf("key slot 0 tried %d times, want 3 (one unlock per try): %s", n, s.stderr.String())
	}
	if !strings.Contains(s.stdout.String(), "data: 16 sectors, 0 bad") {
		t.Errorf("stdout: %q", s.stdout.String())
	}
	s.checkRestored()

	// Three wrong: exit 4 after the third, one error line.
	s = startOnPTY(t, dir, "verify", "disk.vol")
	for i := 1; i <= 3; i++ {
		s.waitFor(prompt, i)
		s.typeKeys("wrong\n")
	}
	if code := s.wait(); code != exitKey {
		t.Errorf("three wrong: exit %d, want %d", code, exitKey)
	}
	if want := "xtsctl: error: disk.vol: wrong passphrase: no key slot opens with it\n"; s.stderr.String() != want {
		t.Errorf("three wrong: stderr %q, want %q", s.stderr.String(), want)
	}
	if n := strings.Count(s.shown(), prompt); n != 3 {
		t.Errorf("three wrong: asked %d times, want 3", n)
	}
	s.checkRestored()

	// --tries 1: one prompt only.
	s = startOnPTY(t, dir, "verify", "--tries", "1", "disk.vol")
	s.waitFor(prompt, 1)
	s.typeKeys("wrong\n")
	if code := s.wait(); code != exitKey {
		t.Errorf("--tries 1: exit %d, want %d", code, exitKey)
	}
	if n := strings.Count(s.shown(), prompt); n != 1 {
		t.Errorf("--tries 1: asked %d times, want 1: %q", n, s.shown())
	}

	// Ctrl-C at the second prompt still stops at once.
	s = startOnPTY(t, dir, "verify", "disk.vol")
	s.waitFor(prompt, 1)
	s.typeKeys("wrong\n")
	s.waitFor(prompt, 2)
	s.typeKeys("\x03")
	if code := s.wait(); code != exitInterrupted {
		t.Errorf("Ctrl-C at the second try: exit %d, want %d", code, exitInterrupted)
	}
	s.checkRestored()
}
