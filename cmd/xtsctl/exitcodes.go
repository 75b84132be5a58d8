package main

import (
	"context"
	"errors"
	"strings"

	"github.com/xtsctl/xtsctl/disk"
)

// Exit codes are part of the CLI's interface (docs/CLI.md lists them).
// Everything that fails maps to exactly one of them, in exitCode.
const (
	exitOK          = 0
	exitFailure     = 1   // any other failure (I/O error, internal error)
	exitUsage       = 2   // bad command line: unknown flag, missing argument, bad value
	exitInput       = 3   // the input is unusable: missing, unreadable, wrong size, not a volume
	exitKey         = 4   // key or passphrase problem: wrong passphrase, bad key file
	exitOutput      = 5   // the output cannot be written: exists, unwritable, disk full
	exitIntegrity   = 6   // data or header failed an integrity check
	exitDevice      = 7   // loop, FUSE, device-mapper or mount failure
	exitInterrupted = 130 // stopped by SIGINT, SIGTERM, SIGHUP or SIGPIPE (interruptContext); nothing was left behind
)

// exitStatuses describe the exit codes for people, in order: the EXIT
// STATUS of every manual page (docs/CLI.md says more).
var exitStatuses = []struct {
	code    int
	meaning string
}{
	{exitOK, "success"},
	{exitFailure, "any other failure (I/O error, internal error)"},
	{exitUsage, "bad command line: unknown command or flag, missing or extra argument, bad value, unsupported option combination"},
	{exitInput, "the input is unusable: missing, unreadable, wrong size, not an image of the format, a format feature not supported"},
	{exitKey, "key or passphrase problem: wrong passphrase, bad key file, key derivation costs above the limits"},
	{exitOutput, "the output cannot be written: exists, unwritable, disk full"},
	{exitIntegrity, "data or header failed an integrity check (a tag, the end-to-end digest, a header checksum)"},
	{exitDevice, "loop, FUSE, device-mapper or mount failure; the image or NAME is in use"},
	{exitInterrupted, "stopped by SIGINT, SIGTERM, SIGHUP or SIGPIPE; nothing was left behind (an in-place run resumes when run again)"},
}

// cliError carries an exit code and hints with an error.
type cliError struct {
	code  int
	err   error
	hints []string
}

func (e *cliError) Error() string { return e.err.Error() }
func (e *cliError) Unwrap() error { return e.err }

// withCode marks err with an exit code and optional hint lines.
func withCode(code int, err error, hints ...string) error {
	if err == nil {
		return nil
	}
	return &cliError{code: code, err: err, hints: hints}
}

func usageError(err error, hints ...string) error { return withCode(exitUsage, err, hints...) }

// diskCodes maps the kinds of the packages' errors (disk.Error, which
// blockdev's are too) to exit codes.
var diskCodes = map[disk.Kind]int{
	disk.KindFailure:     exitFailure,
	disk.KindUsage:       exitUsage,
	disk.KindInput:       exitInput,
	disk.KindKey:         exitKey,
	disk.KindOutput:      exitOutput,
	disk.KindIntegrity:   exitIntegrity,
	disk.KindDevice:      exitDevice,
	disk.KindInterrupted: exitInterrupted,
}

// exitCode is the one place that decides the process's exit status.
func exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	var ce *cliError
	if errors.As(err, &ce) {
		// A failure that is a cancellation is an interruption, also
		// where a package's error mapping did not know it.
		if ce.code == exitFailure && errors.Is(err, context.Canceled) {
			return exitInterrupted
		}
		return ce.code
	}
	var de *disk.Error
	if errors.As(err, &de) {
		if de.Kind == disk.KindFailure && errors.Is(err, context.Canceled) {
			return exitInterrupted
		}
		return diskCodes[de.Kind]
	}
	if errors.Is(err, context.Canceled) {
		return exitInterrupted
	}
	if isCobraUsageError(err) {
		return exitUsage
	}
	return exitFailure
}

func hintsOf(err error) []string {
	var ce *cliError
	if errors.As(err, &ce) {
		return ce.hints
	}
	if h := disk.HintsOf(err); len(h) > 0 {
		return h
	}
	if isCobraUsageError(err) {
		if h := verbHint(err); h != "" {
			return []string{h}
		}
		return []string{"run 'xtsctl --help' or 'xtsctl COMMAND --help' for usage"}
	}
	return nil
}

// isCobraUsageError recognises the errors cobra returns for bad flags and
// arguments; cobra has no error types for them.
func isCobraUsageError(err error) bool {
	msg := err.Error()
	for _, s := range []string{
		"unknown flag", "unknown shorthand flag", "unknown command", "flag needs an argument",
		"invalid argument", "accepts ", "requires at least", "requires at most", "arg(s)",
		"required flag", "bad flag syntax", "if any flags in the group",
	} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}
