// Package tty is the controlling terminal, for passphrase prompts and
// confirmations. A line is read with the terminal's own line editing
// (canonical mode) and, for a secret, without echo; its signals stay on, so Ctrl-C sends SIGINT
// as anywhere else. What the terminal was is restored however the read
// ends, and the cursor goes to a new line. The read does not wait for
// Enter once the command is interrupted: SIGINT (Ctrl-C), SIGTERM or
// SIGHUP cancel the command's context (xtsctl's interruptContext), which
// ends the read at once. Ctrl-D ends the input: no answer.
package tty

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// ErrNoInput: the input ended at the prompt (Ctrl-D, or the terminal went
// away) before a line was entered.
var ErrNoInput = errors.New("input ended (Ctrl-D)")

// Terminal is /dev/tty, open for one dialogue.
type Terminal struct {
	f *os.File
}

// Open opens the controlling terminal. Its reads go through Go's
// poller (the descriptor stays non-blocking), so that a deadline can end
// them; that is why the descriptor is only ever used through
// SyscallConn, never Fd (which would make it blocking).
func Open() (*Terminal, error) {
	f, err := os.OpenFile("/dev/tty", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	return &Terminal{f: f}, nil
}

func (t *Terminal) Close() error { return t.f.Close() }

func (t *Terminal) Write(p []byte) (int, error) { return t.f.Write(p) }

// control runs fn on the terminal's descriptor.
func (t *Terminal) control(fn func(fd int) error) error {
	rc, err := t.f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = fn(int(fd)) }); err != nil {
		return err
	}
	return ferr
}

// maxLine bounds a line read from the terminal: the kernel's canonical
// mode keeps at most 4095 characters of a line, so one read returns a
// whole line.
const maxLine = 8 << 10

// ReadLine writes prompt and reads one line, without echo when secret
// (echo is off before the prompt appears, so nothing typed at once is
// shown), and returns it without its newline; the caller wipes it. It fails with ErrNoInput at
// Ctrl-D (at the start of the line or after some characters), and with
// the cause of ctx (an interruption: a context.Canceled) once ctx is
// cancelled. The terminal is left as it was, with the cursor on a new
// line.
func (t *Terminal) ReadLine(ctx context.Context, prompt string, secret bool) (line []byte, err error) {
	var old *unix.Termios
	if err := t.control(func(fd int) (err error) {
		old, err = unix.IoctlGetTermios(fd, unix.TCGETS)
		return err
	}); err != nil {
		return nil, fmt.Errorf("not a terminal: %w", err)
	}
	mode := *old
	mode.Lflag |= unix.ICANON | unix.ISIG
	mode.Iflag |= unix.ICRNL
	if secret {
		mode.Lflag &^= unix.ECHO
	}
	// TCSETS, not TCSETSF: what was typed ahead of the prompt stays.
	if err := t.control(func(fd int) error { return unix.IoctlSetTermios(fd, unix.TCSETS, &mode) }); err != nil {
		return nil, fmt.Errorf("cannot set up the terminal: %w", err)
	}
	defer func() {
		_ = t.control(func(fd int) error { return unix.IoctlSetTermios(fd, unix.TCSETS, old) })
		if secret || err != nil {
			// No echo, or the line was cut short: the user's Enter
			// did not move the cursor.
			fmt.Fprint(t.f, "\n")
		}
	}()
	if _, err := io.WriteString(t.f, prompt); err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { t.f.SetReadDeadline(time.Now()) })
	defer stop()
	buf := make([]byte, maxLine)
	defer clear(buf)
	n, err := t.f.Read(buf)
	switch {
	case ctx.Err() != nil:
		// Interrupted; the signal flushed what was typed.
		return nil, context.Cause(ctx)
	case err == io.EOF, err == nil && n == 0:
		return nil, ErrNoInput
	case err != nil:
		return nil, err
	case buf[n-1] != '\n':
		// In canonical mode a read returns before the newline only
		// when Ctrl-D pushes out what was typed.
		return nil, ErrNoInput
	}
	line = make([]byte, n-1)
	copy(line, buf[:n-1])
	return line, nil
}
