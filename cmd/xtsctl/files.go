package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/xtsctl/xtsctl/internal/safefile"
	"github.com/xtsctl/xtsctl/volume"
	"golang.org/x/term"
)

// openInput opens an image to read (safefile.OpenInput): a file or block
// device.
func openInput(path string) (*safefile.Input, error) {
	if path == "-" {
		return nil, usageError(errors.New("this needs its input as a file or block device, not standard input"),
			"only --type plain encrypts and decrypts standard input (a volume's size is fixed in its header)")
	}
	in, err := safefile.OpenInput(path)
	if err != nil {
		return nil, inputError(err)
	}
	return in, nil
}

func inputError(err error) error {
	if errors.Is(err, safefile.ErrPipe) {
		return usageError(err, "only --type plain encrypts and decrypts a stream")
	}
	if errors.Is(err, context.Canceled) { // waiting for a named pipe's writer
		return withCode(exitInterrupted, err)
	}
	return withCode(exitInput, err)
}

// openStreamInput is openInput for commands that also read a stream: "-"
// (standard input) or a named pipe.
func openStreamInput(a *app, path string) (*safefile.Input, error) {
	if path != "-" {
		in, err := safefile.OpenStreamInput(a.ctx, path)
		if err != nil {
			return nil, inputError(err)
		}
		return in, nil
	}
	if err := a.takeStdin("the input"); err != nil {
		return nil, err
	}
	in := &safefile.Input{Stream: a.stdin, Name: "standard input", Size: -1}
	if f, ok := a.stdin.(*os.File); ok {
		in.Info, _ = f.Stat()
	}
	in.Stop(a.ctx)
	return in, nil
}

// createOutput starts writing path (safefile.CreateOutput), refusing
// binary output to a terminal and writing over in. A write that waits on
// a stalled stream gives up when the command is interrupted.
func createOutput(a *app, path string, in *safefile.Input, force bool) (*safefile.Output, error) {
	if path == "-" && term.IsTerminal(int(os.Stdout.Fd())) {
		return nil, usageError(errors.New("standard output is a terminal: xtsctl writes binary data there"),
			"redirect it to a file or a pipe, or name an output file")
	}
	out, err := safefile.CreateOutput(a.ctx, path, in.Info, force)
	switch {
	case errors.Is(err, context.Canceled): // waiting for a named pipe's reader
		return nil, withCode(exitInterrupted, err)
	case errors.Is(err, safefile.ErrSameFile):
		return nil, usageError(err, "write the output to a new file, or encrypt in place with --in-place")
	case errors.Is(err, safefile.ErrBlockDevice):
		return nil, withCode(exitOutput, fmt.Errorf("%w: xtsctl writes image files", err),
			"to encrypt or decrypt a device where it is, use --in-place")
	case errors.Is(err, safefile.ErrDanglingSymlink):
		return nil, withCode(exitOutput, err, "name the file itself, or create it first and give --force")
	case err != nil:
		return nil, withCode(exitOutput, err)
	}
	return out, nil
}

// finish commits out, or removes it when err is set, and maps the error.
func finish(out *safefile.Output, err error) error {
	if err != nil {
		// A reader that went away stops the run with EPIPE or with
		// SIGPIPE (context.Canceled): either way that is what to say.
		readerGone := out.ReaderGone()
		out.Abort()
		if readerGone {
			return withCode(exitOutput, fmt.Errorf("the reader of %s went away (broken pipe); %s", out.FinalName(), notWritten(out)))
		}
		if errors.Is(err, context.Canceled) {
			return withCode(exitInterrupted, fmt.Errorf("interrupted; %s", notWritten(out)))
		}
		var re *volume.ReadError
		var we *volume.WriteError
		switch {
		case errors.As(err, &re):
			return withCode(exitInput, err)
		case errors.As(err, &we):
			return withCode(exitOutput, fmt.Errorf("%w; %s", err, notWritten(out)))
		}
		return err
	}
	if err := out.Commit(); err != nil {
		return withCode(exitOutput, err)
	}
	return nil
}

// notWritten says what a failed run left of out (after out.Abort).
func notWritten(out *safefile.Output) string {
	switch {
	case out.File != nil:
		return out.FinalName() + " was not written"
	case out.Rewound():
		return "what was written to " + out.FinalName() + " was truncated away"
	}
	return "what was written to " + out.FinalName() + " is incomplete or unverified: discard it"
}
