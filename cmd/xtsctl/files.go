package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/xtsctl/xtsctl/internal/safefile"
	"github.com/xtsctl/xtsctl/volume"
	"golang.org/x/term"
)

// input is an opened input image and its size (-1 for a stream, whose
// size is known only at its end).
type input struct {
	*os.File           // nil for standard input
	stream   io.Reader // standard input
	path     string
	size     int64
	info     fs.FileInfo
}

// Read reads the stream or the file.
func (in *input) Read(p []byte) (int, error) {
	if in.stream != nil {
		return in.stream.Read(p)
	}
	return in.File.Read(p)
}

// openInput opens path read-only and finds its size; it accepts regular
// files and block devices and names the problem otherwise.
func openInput(path string) (*input, error) {
	if path == "-" {
		return nil, usageError(errors.New("this needs its input as a file or block device, not standard input"),
			"only --type plain encrypts and decrypts standard input (a volume's size is fixed in its header)")
	}
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, withCode(exitInput, fmt.Errorf("input %s does not exist", path))
	case err != nil:
		return nil, withCode(exitInput, fmt.Errorf("cannot read input: %w", err))
	case fi.IsDir():
		return nil, withCode(exitInput, fmt.Errorf("input %s is a directory, not an image", path))
	case fi.Mode()&fs.ModeNamedPipe != 0:
		return nil, usageError(fmt.Errorf("input %s is a pipe: this needs a file or block device", path),
			"only --type plain encrypts and decrypts a stream")
	case !fi.Mode().IsRegular() && (fi.Mode()&fs.ModeDevice == 0 || fi.Mode()&fs.ModeCharDevice != 0):
		return nil, withCode(exitInput, fmt.Errorf("input %s is not a regular file or block device", path))
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, withCode(exitInput, fmt.Errorf("cannot read input: %w", err))
	}
	size, err := f.Seek(0, io.SeekEnd) // block devices report size 0 in Stat
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		f.Close()
		return nil, withCode(exitInput, fmt.Errorf("cannot read input %s: %w", path, err))
	}
	if size == 0 {
		f.Close()
		return nil, withCode(exitInput, fmt.Errorf("input %s is empty", path))
	}
	return &input{File: f, path: path, size: size, info: fi}, nil
}

// openStreamInput is openInput for commands that also read a stream: "-"
// (standard input) or a named pipe, whose size is unknown (-1) until it
// ends.
func openStreamInput(a *app, path string) (*input, error) {
	if path == "-" {
		if err := a.takeStdin("the input"); err != nil {
			return nil, err
		}
		in := &input{stream: a.stdin, path: "standard input", size: -1}
		if f, ok := a.stdin.(*os.File); ok {
			in.info, _ = f.Stat()
		}
		return in, nil
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode()&fs.ModeNamedPipe != 0 {
		f, err := os.Open(path)
		if err != nil {
			return nil, withCode(exitInput, fmt.Errorf("cannot read input: %w", err))
		}
		return &input{File: f, path: path, size: -1, info: fi}, nil
	}
	return openInput(path)
}

// An output is where a command writes its result: a file, written through
// a temporary file that is synced and renamed into place when complete
// (internal/safefile), or a stream written through as it comes (standard
// output, a pipe, a character device), which cannot be taken back.
type output struct {
	*safefile.File // nil for a stream
	stream         *os.File
	name           string
}

// Write writes to the file or the stream.
func (o *output) Write(p []byte) (int, error) {
	if o.File != nil {
		return o.File.Write(p)
	}
	return o.stream.Write(p)
}

// Commit completes the output: the file appears under its name, a stream
// is flushed and closed (standard output is left open).
func (o *output) Commit() error {
	if o.File != nil {
		return o.File.Commit()
	}
	if o.stream == os.Stdout {
		return nil
	}
	return o.stream.Close()
}

// Abort removes the temporary file; what a stream got cannot be recalled.
func (o *output) Abort() {
	if o.File != nil {
		o.File.Abort()
	} else if o.stream != os.Stdout {
		o.stream.Close()
	}
}

// FinalName names the output in messages.
func (o *output) FinalName() string {
	if o.File != nil {
		return o.File.FinalName()
	}
	return o.name
}

// createOutput starts writing path. "-" is standard output; a pipe, a
// socket or a character device (even behind a symlink, like /dev/stdout)
// is written through; a block device is refused (xtsctl writes images; a
// device is encrypted in place with --in-place). Anything else is a file,
// written through a temporary file beside it: an existing path is refused
// unless force is set, and a symlink is never replaced (the file it points
// to is). It refuses to write over in.
func createOutput(path string, in *input, force bool) (*output, error) {
	if path == "-" {
		if term.IsTerminal(int(os.Stdout.Fd())) {
			return nil, usageError(errors.New("standard output is a terminal: xtsctl writes binary data there"),
				"redirect it to a file or a pipe, or name an output file")
		}
		return &output{stream: os.Stdout, name: "standard output"}, nil
	}
	fi, err := os.Stat(path)
	if err == nil {
		switch {
		case in.info != nil && os.SameFile(fi, in.info):
			return nil, usageError(fmt.Errorf("input and output are the same file (%s)", path),
				"write the output to a new file, or encrypt in place with --in-place")
		case fi.IsDir():
			return nil, withCode(exitOutput, fmt.Errorf("output %s is a directory", path))
		case fi.Mode()&(fs.ModeNamedPipe|fs.ModeSocket|fs.ModeCharDevice) != 0:
			f, err := os.OpenFile(path, os.O_WRONLY, 0)
			if err != nil {
				return nil, withCode(exitOutput, fmt.Errorf("cannot write %s: %w", path, err))
			}
			return &output{stream: f, name: path}, nil
		case fi.Mode()&fs.ModeDevice != 0:
			return nil, withCode(exitOutput, fmt.Errorf("output %s is a block device: xtsctl writes image files", path),
				"to encrypt or decrypt a device where it is, use --in-place")
		}
	}
	// A symlink stays a symlink: the file it leads to is what is written.
	target := path
	if lfi, err := os.Lstat(path); err == nil && lfi.Mode()&fs.ModeSymlink != 0 {
		if target, err = resolveLink(path); err != nil {
			return nil, withCode(exitOutput, fmt.Errorf("output %s is a symlink that cannot be followed: %w", path, err))
		}
	}
	f, err := safefile.Create(target, force, 0o600)
	if err != nil {
		return nil, withCode(exitOutput, err)
	}
	return &output{File: f, name: path}, nil
}

// resolveLink returns the path a symlink leads to, also when that file
// does not exist yet (the output is created there).
func resolveLink(path string) (string, error) {
	if real, err := filepath.EvalSymlinks(path); err == nil {
		return real, nil
	}
	dest, err := os.Readlink(path)
	if err != nil {
		return "", err
	}
	if !filepath.IsAbs(dest) {
		dest = filepath.Join(filepath.Dir(path), dest)
	}
	if lfi, err := os.Lstat(dest); err == nil && lfi.Mode()&fs.ModeSymlink != 0 {
		return "", errors.New("it leads to another symlink that leads nowhere")
	}
	return dest, nil
}

// finish commits out, or removes it when err is set, and maps the error.
func finish(out *output, err error) error {
	if err != nil {
		out.Abort()
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

// needFile refuses a stream for an output that must be written out of
// order: a volume's header goes at its start, after the data.
func needFile(out *output) error {
	if out.File != nil {
		return nil
	}
	out.Abort()
	return usageError(fmt.Errorf("%s cannot take a volume: its header is written at its start after the data, so it must be a file", out.FinalName()),
		"write the volume to a file; --type plain streams")
}

// notWritten says what a failed run left of out.
func notWritten(out *output) string {
	if out.File == nil {
		return "what was written to " + out.FinalName() + " is incomplete or unverified: discard it"
	}
	return out.FinalName() + " was not written"
}
