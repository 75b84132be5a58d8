package disk

import (
	"context"
	"errors"
	"fmt"
)

// Kind classifies an *Error: what went wrong, in the terms the command
// line turns into exit codes.
type Kind int

const (
	KindFailure     Kind = iota // anything else: I/O error, internal error
	KindUsage                   // the request is wrong: bad options, options that do not go together
	KindInput                   // the image is unusable: missing, unreadable, not what it claims, unsupported
	KindKey                     // the key, passphrase or key file does not open it
	KindOutput                  // an output cannot be written
	KindIntegrity               // a header or data failed an integrity check
	KindDevice                  // loop, FUSE, device-mapper or mount; busy; in use; already open
	KindInterrupted             // stopped by a signal; nothing was left behind
)

var kindNames = [...]string{"failure", "usage", "input", "key", "output", "integrity", "device", "interrupted"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// An Error is a failure of the format layer or of a package below the
// command line, with its kind and hints for the user: what they can do
// about it, one line each.
type Error struct {
	Kind  Kind
	Err   error
	Hints []string
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error of kind k with a formatted message (%w wraps).
func Errorf(k Kind, format string, args ...any) error {
	return &Error{Kind: k, Err: fmt.Errorf(format, args...)}
}

// WithKind marks err with a kind and hints; nil stays nil. An err that
// already carries a kind keeps it, and the hints are added to its own.
func WithKind(k Kind, err error, hints ...string) error {
	if err == nil {
		return nil
	}
	return &Error{Kind: k, Err: err, Hints: hints}
}

// WithHints adds hints to err, keeping its kind (KindFailure if it has
// none).
func WithHints(err error, hints ...string) error {
	if err == nil || len(hints) == 0 {
		return err
	}
	return &Error{Kind: KindOf(err), Err: err, Hints: append(HintsOf(err), hints...)}
}

// KindOf returns err's kind: the outermost *Error's, KindInterrupted for
// a cancelled context, KindFailure otherwise.
func KindOf(err error) Kind {
	var e *Error
	switch {
	case errors.As(err, &e):
		return e.Kind
	case errors.Is(err, context.Canceled):
		return KindInterrupted
	}
	return KindFailure
}

// HintsOf returns the hints of every *Error in err's chain, outermost
// first, without repeats.
func HintsOf(err error) []string {
	var hints []string
	seen := map[string]bool{}
	for err != nil {
		if e, ok := err.(*Error); ok {
			for _, h := range e.Hints {
				if !seen[h] {
					seen[h] = true
					hints = append(hints, h)
				}
			}
		}
		err = errors.Unwrap(err)
	}
	return hints
}

// Sentinels the formats wrap, so that callers can test for them whatever
// the format.
var (
	// ErrWrongSecret: no key slot (protector, header) opens with the
	// secret given. Its kind is KindKey.
	ErrWrongSecret = errors.New("no key available with this passphrase")
	// ErrUnsupported: the header is valid but asks for something xtsctl
	// does not do (a cipher, a mode, a feature). Its kind is KindInput.
	ErrUnsupported = errors.New("not supported")
	// ErrNotFormat: the image does not hold the format asked for.
	ErrNotFormat = errors.New("not this format")
)

// sentinelError is a message of its own that is also a sentinel (errors.Is).
type sentinelError struct {
	msg      string
	sentinel error
}

func (e *sentinelError) Error() string        { return e.msg }
func (e *sentinelError) Is(target error) bool { return target == e.sentinel }

// NotFormat is ErrNotFormat with a message of the format's own: "disk.img
// is not an xtsctl volume (no volume header at its start or end)". Its
// kind is KindInput.
func NotFormat(format string, args ...any) error {
	return WithKind(KindInput, &sentinelError{fmt.Sprintf(format, args...), ErrNotFormat})
}
