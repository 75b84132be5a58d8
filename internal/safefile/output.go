package safefile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Why CreateOutput refuses an output; its errors wrap these and name the
// path.
var (
	// ErrSameFile: the output is the input, which would be destroyed.
	ErrSameFile = errors.New("input and output are the same file")
	// ErrBlockDevice: the output is a block device. An image is written
	// to a file; a device is converted where it is, by other means.
	ErrBlockDevice = errors.New("output is a block device")
)

// Output is where a result goes: a file, written through a temporary file
// that is synced and renamed into place when complete (File), or a stream
// written through as it comes (standard output, a pipe, a character
// device), which cannot be taken back.
type Output struct {
	*File           // nil for a stream
	Stream *os.File // the stream, nil for a file
	Name   string   // the path as given, or "standard output"
}

// Write writes to the file or the stream.
func (o *Output) Write(p []byte) (int, error) {
	if o.File != nil {
		return o.File.Write(p)
	}
	return o.Stream.Write(p)
}

// Commit completes the output: the file appears under its name, a stream
// is closed (standard output is left open).
func (o *Output) Commit() error {
	if o.File != nil {
		return o.File.Commit()
	}
	if o.Stream == os.Stdout {
		return nil
	}
	return o.Stream.Close()
}

// Abort removes the temporary file; what a stream got cannot be recalled.
func (o *Output) Abort() {
	if o.File != nil {
		o.File.Abort()
	} else if o.Stream != os.Stdout {
		o.Stream.Close()
	}
}

// FinalName names the output in messages: for a file behind a symlink,
// the file the link leads to.
func (o *Output) FinalName() string {
	if o.File != nil {
		return o.File.FinalName()
	}
	return o.Name
}

// CreateOutput starts writing path. "-" is standard output; a pipe, a
// socket or a character device (even behind a symlink, like /dev/stdout)
// is written through; a block device is refused (ErrBlockDevice). Anything
// else is a file, written through a temporary file beside it (Create): an
// existing path is refused unless overwrite is set, and a symlink is never
// replaced (the file it leads to is). in, if not nil, is the input's
// FileInfo: writing over it is refused (ErrSameFile).
func CreateOutput(path string, in fs.FileInfo, overwrite bool) (*Output, error) {
	if path == "-" {
		return &Output{Stream: os.Stdout, Name: "standard output"}, nil
	}
	if fi, err := os.Stat(path); err == nil {
		switch {
		case in != nil && os.SameFile(fi, in):
			return nil, fmt.Errorf("%w (%s)", ErrSameFile, path)
		case fi.IsDir():
			return nil, fmt.Errorf("output %s is a directory", path)
		case fi.Mode()&(fs.ModeNamedPipe|fs.ModeSocket|fs.ModeCharDevice) != 0:
			f, err := os.OpenFile(path, os.O_WRONLY, 0)
			if err != nil {
				return nil, fmt.Errorf("cannot write %s: %w", path, err)
			}
			return &Output{Stream: f, Name: path}, nil
		case fi.Mode()&fs.ModeDevice != 0:
			return nil, &kindError{fmt.Sprintf("output %s is a block device", path), ErrBlockDevice}
		}
	}
	target := path
	if lfi, err := os.Lstat(path); err == nil && lfi.Mode()&fs.ModeSymlink != 0 {
		if target, err = resolveLink(path); err != nil {
			return nil, fmt.Errorf("output %s is a symlink that cannot be followed: %w", path, err)
		}
	}
	f, err := Create(target, overwrite, 0o600)
	if err != nil {
		return nil, err
	}
	return &Output{File: f, Name: path}, nil
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
