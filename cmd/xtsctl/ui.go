package main

// All user-facing output goes through this file. The rules (from age's tui):
// everything that is not the command's result goes to stderr, prefixed
// "xtsctl: ", lowercase, with no final period; errors are one line, followed
// by "hint:" lines when there is something the user can do. Results (device
// paths, digests, JSON) go to stdout. Secrets never pass through here.

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/xtsctl/xtsctl/blockdev"

	"golang.org/x/term"
)

type ui struct {
	stdout, stderr io.Writer
	quiet          bool // --quiet: only errors and warnings
	verbose        bool // --verbose: more details (verbosef)
	progressShown  bool // a progressLinef line is on the terminal
}

func (u *ui) errorf(format string, args ...any) {
	fmt.Fprintf(u.stderr, "xtsctl: error: "+format+"\n", args...)
}

func (u *ui) warningf(format string, args ...any) {
	fmt.Fprintf(u.stderr, "xtsctl: warning: "+format+"\n", args...)
}

func (u *ui) hintf(format string, args ...any) {
	fmt.Fprintf(u.stderr, "xtsctl: hint: "+format+"\n", args...)
}

// infof reports what was done; --quiet silences it.
func (u *ui) infof(format string, args ...any) {
	if !u.quiet {
		fmt.Fprintf(u.stderr, "xtsctl: "+format+"\n", args...)
	}
}

// verbosef reports a detail that only --verbose shows.
func (u *ui) verbosef(format string, args ...any) {
	if u.verbose && !u.quiet {
		fmt.Fprintf(u.stderr, "xtsctl: "+format+"\n", args...)
	}
}

// resultf prints the command's result on stdout.
func (u *ui) resultf(format string, args ...any) {
	fmt.Fprintf(u.stdout, format+"\n", args...)
}

// stderrIsTerminal reports whether progress bars and prompts make sense.
func (u *ui) stderrIsTerminal() bool {
	f, ok := u.stderr.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// reportError prints err and its hints.
func (u *ui) reportError(err error) {
	u.errorf("%v", err)
	for _, h := range hintsOf(err) {
		u.hintf("%s", h)
	}
}

// progressLinef rewrites one status line on a terminal's stderr; callers
// check stderrIsTerminal first. clearProgressLine erases it.
func (u *ui) progressLinef(format string, args ...any) {
	u.progressShown = true
	fmt.Fprintf(u.stderr, "\r\033[Kxtsctl: "+format, args...)
}

func (u *ui) clearProgressLine() {
	if u.progressShown {
		fmt.Fprint(u.stderr, "\r\033[K")
		u.progressShown = false
	}
}

// promptTTY writes a passphrase prompt to the terminal itself (not stderr,
// which may be redirected): the prompt is for the person at the keyboard.
func (u *ui) promptTTY(tty io.Writer, format string, args ...any) {
	fmt.Fprintf(tty, format, args...)
}

// stdoutIsTerminal reports whether results are read by a person: secrets
// (a master key asked for with --show-key) go only there or to a file.
func (u *ui) stdoutIsTerminal() bool {
	w := u.stdout
	if r, ok := w.(*resultWriter); ok {
		w = r.w
	}
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// resultWriter is standard output for results. It keeps the first write
// error, so that a command whose results did not all get out (a reader
// that closed the pipe early) fails saying so, instead of exiting 0.
type resultWriter struct {
	w   io.Writer
	err error
}

func (r *resultWriter) Write(p []byte) (int, error) {
	n, err := r.w.Write(p)
	if err != nil && r.err == nil {
		r.err = err
	}
	return n, err
}

// failure is the error of a command that could not write all its
// results.
func (r *resultWriter) failure() error {
	switch {
	case r.err == nil:
		return nil
	case errors.Is(r.err, syscall.EPIPE):
		return withCode(exitOutput, errors.New("the reader of standard output went away before all results were printed (broken pipe)"))
	}
	return withCode(exitOutput, fmt.Errorf("cannot print the results: %w", r.err))
}

// blockdevOptions passes blockdev's warnings to the user.
func (a *app) blockdevOptions() blockdev.Options {
	return blockdev.Options{Warn: a.warningf}
}
