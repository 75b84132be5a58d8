// Package keyfile reads secrets (raw keys, passphrases) from files and
// from standard input: bounded in size, optionally from a window of a
// larger file or device (cryptsetup's --keyfile-offset and
// --keyfile-size), refusing directories and reporting files that other
// users can read. It only reads: the caller locks memory first (package
// secret) and wipes what it gets.
package keyfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// Window is the part of a file that holds the secret, so that a key can
// live inside a larger file or device.
type Window struct {
	Offset int64 // bytes skipped at the start
	Size   int   // bytes read exactly (taken as they are), or 0: the rest of the file
}

// A WindowError says that a window cannot be used.
type WindowError struct {
	Field string // "offset" or "size"
	Value int64
	Limit int // the most a secret may hold, when Size is above it
}

// Error reads "offset -1 is negative", "size 80 is more than the 64 bytes
// this file can hold".
func (e *WindowError) Error() string {
	if e.Value < 0 {
		return fmt.Sprintf("%s %d is negative", e.Field, e.Value)
	}
	return fmt.Sprintf("%s %d is more than the %d bytes this file can hold", e.Field, e.Value, e.Limit)
}

// Check validates the window for a secret of at most limit bytes.
func (w Window) Check(limit int) error {
	switch {
	case w.Offset < 0:
		return &WindowError{Field: "offset", Value: w.Offset}
	case w.Size < 0:
		return &WindowError{Field: "size", Value: int64(w.Size)}
	case w.Size > limit:
		return &WindowError{Field: "size", Value: int64(w.Size), Limit: limit}
	}
	return nil
}

// A ShortError says that the file holds fewer bytes after the window's
// offset than its size asks for.
type ShortError struct {
	Name, Path string
	Got        int // bytes after the offset
	Window     Window
}

func (e *ShortError) Error() string {
	return fmt.Sprintf("%s %s holds %d bytes after offset %d; the window wants %d", e.Name, e.Path, e.Got, e.Window.Offset, e.Window.Size)
}

var (
	// ErrTooLarge: the secret is longer than Options.Limit.
	ErrTooLarge = errors.New("secret is too large")
	// ErrEmpty: a passphrase is empty (Options.Passphrase).
	ErrEmpty = errors.New("secret is empty")
	// ErrDirectory: the path is a directory.
	ErrDirectory = errors.New("is a directory")
)

// Options say how to read a secret.
type Options struct {
	Name   string // what the file holds, in messages: "key file", "passphrase file"
	Limit  int    // the most bytes the secret may hold
	Window Window
	// Passphrase drops one trailing newline (what echo or an editor
	// adds) unless Window.Size selects the bytes exactly, and makes an
	// empty result an error (ErrEmpty).
	Passphrase bool
	// Prefix takes the first Limit bytes of a larger file instead of
	// refusing it (VeraCrypt's keyfiles, of which only the first MiB
	// counts).
	Prefix bool
	// Exposed, if not nil, is called when other users can read the
	// file (a regular file with group or other permissions).
	Exposed func(perm fs.FileMode)
}

// secretError is an error with a message of its own that wraps a kind.
type secretError struct {
	msg  string
	kind error
}

func (e *secretError) Error() string { return e.msg }
func (e *secretError) Unwrap() error { return e.kind }

// Read returns the secret in the file at path, which the caller wipes.
// Errors name the file (o.Name and path); a missing file wraps
// fs.ErrNotExist.
func Read(path string, o Options) ([]byte, error) {
	if err := o.Window.Check(o.Limit); err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &secretError{fmt.Sprintf("%s %s does not exist", o.Name, path), fs.ErrNotExist}
	} else if err != nil {
		return nil, fmt.Errorf("cannot read %s: %w", o.Name, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %w", o.Name, err)
	}
	if fi.IsDir() {
		return nil, &secretError{fmt.Sprintf("%s %s is a directory", o.Name, path), ErrDirectory}
	}
	if o.Exposed != nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o077 != 0 {
		o.Exposed(fi.Mode().Perm())
	}
	if o.Window.Offset > 0 {
		// Seek where it can (files, devices), read past where not (pipes).
		if _, err := f.Seek(o.Window.Offset, io.SeekStart); err != nil {
			if _, err := io.CopyN(io.Discard, f, o.Window.Offset); err != nil && !errors.Is(err, io.EOF) {
				return nil, fmt.Errorf("cannot read %s %s: %w", o.Name, path, err)
			}
		}
	}
	return read(f, path, o, func(err error) error { return fmt.Errorf("cannot read %s %s: %w", o.Name, path, err) })
}

// ReadStdin is Read for the secret on standard input, r: "-" names it as
// it does on a command line, "standard input" in read errors.
func ReadStdin(r io.Reader, o Options) ([]byte, error) {
	if err := o.Window.Check(o.Limit); err != nil {
		return nil, err
	}
	if _, err := io.CopyN(io.Discard, r, o.Window.Offset); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("cannot read the %s from standard input: %w", o.Name, err)
	}
	return read(r, "-", o, func(err error) error { return fmt.Errorf("cannot read the %s from standard input: %w", o.Name, err) })
}

// read reads the secret from r, positioned after the window's offset;
// readError words an I/O error.
func read(r io.Reader, path string, o Options, readError func(error) error) ([]byte, error) {
	want := o.Limit + 1 // one more, to tell a secret that is too large
	if o.Window.Size > 0 {
		want = o.Window.Size
	}
	buf := make([]byte, want)
	n, err := io.ReadFull(r, buf)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		clear(buf)
		return nil, readError(err)
	}
	switch {
	case o.Window.Size > 0 && n < o.Window.Size:
		clear(buf)
		return nil, &ShortError{Name: o.Name, Path: path, Got: n, Window: o.Window}
	case n > o.Limit && o.Prefix:
		n = o.Limit
	case n > o.Limit:
		clear(buf)
		return nil, &secretError{fmt.Sprintf("%s %s is larger than %d bytes", o.Name, path, o.Limit), ErrTooLarge}
	}
	p := buf[:n]
	if o.Passphrase && o.Window.Size == 0 {
		p = bytes.TrimSuffix(p, []byte("\n"))
	}
	if o.Passphrase && len(p) == 0 {
		clear(buf)
		return nil, &secretError{fmt.Sprintf("%s %s is empty", o.Name, path), ErrEmpty}
	}
	out := bytes.Clone(p)
	clear(buf)
	return out, nil
}
