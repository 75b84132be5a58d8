package stream

import (
	"errors"
	"io/fs"
)

// ReadError reports that the input could not be read, or ended early.
type ReadError struct{ Err error }

func (e *ReadError) Error() string { return e.Err.Error() }
func (e *ReadError) Unwrap() error { return e.Err }

// WriteError reports that the output could not be written (for example a
// full disk).
type WriteError struct{ Err error }

func (e *WriteError) Error() string {
	// The output is usually a temporary file whose name means nothing to
	// the user: report the cause without it.
	var pe *fs.PathError
	if errors.As(e.Err, &pe) {
		return "cannot write output: " + pe.Err.Error()
	}
	return "cannot write output: " + e.Err.Error()
}
func (e *WriteError) Unwrap() error { return e.Err }
