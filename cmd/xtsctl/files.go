package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/xtsctl/xtsctl/internal/safefile"
	"github.com/xtsctl/xtsctl/volume"
)

// input is an opened input image and its size.
type input struct {
	*os.File
	path string
	size int64
	info fs.FileInfo
}

// openInput opens path read-only and finds its size; it accepts regular
// files and block devices and names the problem otherwise.
func openInput(path string) (*input, error) {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, withCode(exitInput, fmt.Errorf("input %s does not exist", path))
	case err != nil:
		return nil, withCode(exitInput, fmt.Errorf("cannot read input: %w", err))
	case fi.IsDir():
		return nil, withCode(exitInput, fmt.Errorf("input %s is a directory, not an image", path))
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

// createOutput starts writing path through a temporary file (see
// internal/safefile). It refuses to write over in, and over an existing
// file unless force is set.
func createOutput(path string, in *input, force bool) (*safefile.File, error) {
	if fi, err := os.Stat(path); err == nil {
		if os.SameFile(fi, in.info) {
			return nil, usageError(fmt.Errorf("input and output are the same file (%s)", path),
				"write the output to a new file")
		}
		if fi.IsDir() {
			return nil, withCode(exitOutput, fmt.Errorf("output %s is a directory", path))
		}
		if fi.Mode()&fs.ModeDevice != 0 {
			return nil, withCode(exitOutput, fmt.Errorf("output %s is a device; xtsctl writes image files", path))
		}
	}
	f, err := safefile.Create(path, force, 0o600)
	if errors.Is(err, safefile.ErrExists) {
		return nil, withCode(exitOutput, err)
	}
	if err != nil {
		return nil, withCode(exitOutput, err)
	}
	return f, nil
}

// finish commits out, or removes it when err is set, and maps the error.
func finish(out *safefile.File, err error) error {
	if err != nil {
		out.Abort()
		if errors.Is(err, context.Canceled) {
			return withCode(exitInterrupted, fmt.Errorf("interrupted; %s was not written", out.FinalName()))
		}
		var re *volume.ReadError
		var we *volume.WriteError
		switch {
		case errors.As(err, &re):
			return withCode(exitInput, err)
		case errors.As(err, &we):
			return withCode(exitOutput, fmt.Errorf("%w; %s was not written", err, out.FinalName()))
		}
		return err
	}
	if err := out.Commit(); err != nil {
		return withCode(exitOutput, err)
	}
	return nil
}
