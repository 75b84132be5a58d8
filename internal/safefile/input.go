package safefile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// Why an input is refused; OpenInput's errors wrap one of these (or
// fs.ErrNotExist, or an I/O error) and name the path.
var (
	// ErrPipe: the input is a named pipe where a seekable file is needed.
	ErrPipe = errors.New("input is a pipe")
	// ErrNotImage: the input is a directory, a character device, a
	// socket: neither a regular file nor a block device.
	ErrNotImage = errors.New("input is not a regular file or block device")
	// ErrDirectory: the input is a directory (errors.Is ErrNotImage too).
	ErrDirectory = fmt.Errorf("%w: a directory", ErrNotImage)
	// ErrEmpty: the input holds no bytes.
	ErrEmpty = errors.New("input is empty")
)

// Input is an opened input: a regular file or block device of known size,
// or a stream (standard input, a named pipe) whose size is known only at
// its end.
type Input struct {
	*os.File           // nil for a stream that is no file of ours (Stream)
	Stream   io.Reader // if not nil, read instead of File (standard input)
	Name     string    // the path, or what the input is ("standard input")
	Size     int64     // in bytes; -1 for a stream
	Info     fs.FileInfo

	stall stall
}

// Stop makes a read that waits on a stream (standard input, a named pipe)
// return when ctx ends, with its cause (see stall).
func (in *Input) Stop(ctx context.Context) {
	if in.Stream != nil || in.Size < 0 {
		in.stall.ctx = ctx
	}
}

// Read reads the stream or the file.
func (in *Input) Read(p []byte) (int, error) {
	if in.Stream != nil {
		return in.stall.fill(in.Stream, p)
	}
	if in.Size < 0 {
		return in.stall.fill(in.File, p)
	}
	return in.File.Read(p)
}

// kindError is an error with a message of its own that wraps a kind
// (one of the Err values above, or fs.ErrNotExist).
type kindError struct {
	msg  string
	kind error
}

func (e *kindError) Error() string { return e.msg }
func (e *kindError) Unwrap() error { return e.kind }

// CheckPath names what is wrong with path as an image to read, role
// saying what it is in messages ("input", "image", "header file"):
// missing (the error wraps fs.ErrNotExist), a directory or neither a
// regular file nor a block device (ErrNotImage; ErrDirectory for a
// directory), a named pipe (ErrPipe).
// It returns path's FileInfo when it is a regular file or block device.
func CheckPath(path, role string) (fs.FileInfo, error) {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, &kindError{fmt.Sprintf("%s %s does not exist", role, path), fs.ErrNotExist}
	case err != nil:
		return nil, fmt.Errorf("cannot read %s: %w", role, err)
	case fi.IsDir():
		return nil, &kindError{fmt.Sprintf("%s %s is a directory", role, path), ErrDirectory}
	case fi.Mode()&fs.ModeNamedPipe != 0:
		return nil, &kindError{fmt.Sprintf("%s %s is a pipe: this needs a file or block device", role, path), ErrPipe}
	case !fi.Mode().IsRegular() && (fi.Mode()&fs.ModeDevice == 0 || fi.Mode()&fs.ModeCharDevice != 0):
		return nil, &kindError{fmt.Sprintf("%s %s is not a regular file or block device", role, path), ErrNotImage}
	}
	return fi, nil
}

// OpenInput opens path read-only and finds its size. It accepts regular
// files and block devices (whose size Stat reports as 0: it seeks to the
// end); anything else (CheckPath), and an empty input, is an error naming
// the path.
func OpenInput(path string) (*Input, error) {
	fi, err := CheckPath(path, "input")
	if err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read input: %w", err)
	}
	size, err := f.Seek(0, io.SeekEnd)
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("cannot read input %s: %w", path, err)
	}
	if size == 0 {
		f.Close()
		return nil, &kindError{fmt.Sprintf("input %s is empty", path), ErrEmpty}
	}
	return &Input{File: f, Name: path, Size: size, Info: fi}, nil
}

// OpenStreamInput is OpenInput for a reader that also takes a stream: a
// named pipe is opened with Size -1 (read it to its end). Standard input
// is the caller's: Input{Stream: os.Stdin, Name: "standard input", Size: -1},
// bound to its context with Stop. Opening a named pipe waits for a writer,
// and reading it for data, until ctx ends (see stall).
func OpenStreamInput(ctx context.Context, path string) (*Input, error) {
	if fi, err := os.Stat(path); err == nil && fi.Mode()&fs.ModeNamedPipe != 0 {
		f, err := openPipe(ctx, path, os.O_RDONLY)
		if err != nil {
			return nil, fmt.Errorf("cannot read input: %w", err)
		}
		in := &Input{File: f, Name: path, Size: -1, Info: fi}
		in.Stop(ctx)
		return in, nil
	}
	return OpenInput(path)
}
