//go:build !linux

package inplace

import (
	"errors"
	"os"
)

// FileTarget is an image file or block device opened for an in-place run.
type FileTarget struct {
	*os.File
	Path string
}

var (
	ErrReadOnly = errors.New("the target is read-only")
	ErrBusy     = errors.New("the target is in use")
)

// BusyError says what holds the target.
type BusyError struct{ Why string }

func (e *BusyError) Error() string { return "the target is in use: " + e.Why }
func (e *BusyError) Unwrap() error { return ErrBusy }

var errUnsupported = errors.New("in-place conversion is supported on Linux only")

// OpenTarget is supported on Linux only.
func OpenTarget(path string) (*FileTarget, error) { return nil, errUnsupported }

func (t *FileTarget) Size() (int64, error)      { return 0, errUnsupported }
func (t *FileTarget) Resizable() bool           { return false }
func (t *FileTarget) Truncate(size int64) error { return errUnsupported }
func (t *FileTarget) Reserve(size int64) error  { return errUnsupported }

// FileJournal is the journal of a plain run, a file at Path.
type FileJournal struct{ Path string }

// DefaultJournal is the journal of an image file: beside it, named after it.
func DefaultJournal(image string) string { return image + ".xtsctl-journal" }

func (j FileJournal) Open() (JournalFile, error) { return nil, errUnsupported }
func (j FileJournal) Create(size int64, init func(Device) error, replace bool) (JournalFile, error) {
	return nil, errUnsupported
}
