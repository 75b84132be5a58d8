package disk

import (
	"context"
	"io"
	"os"
)

// An Image is an image file or block device opened (and locked) for a
// format to read: its data, and a detached header where the format keeps
// one apart (LUKS --header).
type Image struct {
	Path string   // as the user named it, for messages
	File *os.File // the image (or, with a detached header, the data)
	Size int64    // of File, in bytes (block devices: from seeking); -1 for a Stream
	// Stream, when File is nil, is an image read once, in order
	// (standard input, a pipe): only formats without a header read one.
	Stream io.Reader
	// HeaderFile is a detached header, nil when the header is in File.
	HeaderFile *os.File
	HeaderPath string
	HeaderSize int64
	Writable   bool // File (and HeaderFile) were opened read-write
	borrowed   bool // File belongs to the caller (OpenImageOn)
}

// HeaderReader returns where the header is read from, and its size: the
// detached header file if there is one, else the image.
func (img *Image) HeaderReader() (io.ReaderAt, int64) {
	if img.HeaderFile != nil {
		return img.HeaderFile, img.HeaderSize
	}
	return img.File, img.Size
}

// A Header is an image's header(s), read and checked by Format.Open.
type Header interface {
	Format() Format
	// Report is what `info` shows of the header: no secret is needed
	// unless opt asks for what only a key shows.
	Report(opt ReportOptions) (*Report, error)
	// Check checks an unlock request before anyone is asked for a
	// secret: the key slot asked for exists and can be tried, its KDF
	// costs are within bounds, nothing the request needs is unsupported.
	// It returns what Unlock will need.
	Check(req *Request) (*Need, error)
	// Unlock opens the header with sec and returns what to serve. It runs
	// the KDFs (bounded by req) and stops when ctx is cancelled. A wrong
	// secret fails with an error wrapping ErrWrongSecret (KindKey).
	Unlock(ctx context.Context, req *Request, sec *Secret) (*Unlocked, error)
}

// A Request is what an unlock is for.
type Request struct {
	// Slot is the key slot (protector, ...) to try; -1 tries every one.
	Slot int
	// AllowExpensiveKDF runs key derivations whatever they cost (the user
	// trusts the image); otherwise costs above the format's bounds are
	// refused before they run.
	AllowExpensiveKDF bool
	// ReadOnly: the unlocked image will only be read.
	ReadOnly bool
	// TestOnly: only the secret is checked (open --test-passphrase): a
	// header whose data cannot be served may still be unlocked.
	TestOnly bool
	// Options are the values of the formats' own options.
	Options Options
	// KeyFiles is how many key files the user gave (--key-file), so that
	// Check can say whether a passphrase is needed besides.
	KeyFiles int
	// Progress, if set, is told about slow steps (which key slot's KDF
	// runs), one line each, for the user; Verbose about every step.
	Progress func(format string, args ...any)
	Verbose  func(format string, args ...any)
}

// Say tells Progress, if set.
func (r *Request) Say(format string, args ...any) {
	if r.Progress != nil {
		r.Progress(format, args...)
	}
}

// Detail tells Verbose, if set.
func (r *Request) Detail(format string, args ...any) {
	if r.Verbose != nil {
		r.Verbose(format, args...)
	}
}

// Want says whether an unlock takes a secret of some sort.
type Want int

const (
	WantNone     Want = iota // not asked for
	WantOptional             // asked for, may be empty
	WantRequired             // must be given
)

// A Need is what Unlock needs, as Check found it.
type Need struct {
	// Passphrase: whether to ask for a passphrase (terminal or
	// --passphrase-file). A format whose --key-file replaces the
	// passphrase says WantNone when key files are given.
	Passphrase Want
	// Prompt names what is asked: "passphrase for disk.img", "recovery
	// password for ...".
	Prompt string
	// KeyFile: whether key files (--key-file) are used.
	KeyFile Want
	// Confirm: the passphrase is a new one, asked twice on a terminal.
	Confirm bool
	// Tries names what will be tried, for messages: "keyslots 0, 2".
	Tries string
}

// A Secret is what the user gave to unlock: a passphrase and the contents
// of key files. The caller wipes it.
type Secret struct {
	Passphrase []byte
	KeyFiles   [][]byte
	// KeyFileNames name the key files, in the same order, for messages.
	KeyFileNames []string
}

// Wipe erases the secret's bytes.
func (s *Secret) Wipe() {
	if s == nil {
		return
	}
	clear(s.Passphrase)
	for _, k := range s.KeyFiles {
		clear(k)
	}
}

// ReportOptions say what Report shows.
type ReportOptions struct {
	// ShowKey asks for the data key too (info --show-key); it needs
	// Unlocked, which the caller unlocked.
	ShowKey  bool
	Unlocked *Unlocked
}

// A Report is what `info` shows: lines for people and one document for
// --json.
type Report struct {
	Lines []Line
	// Doc is the --json document, marshalled as it is.
	Doc any
	// Warnings are what reading found wrong, for the user.
	Warnings []string
}

// A Line is one "key: value" line of a report; Indent nests it under the
// line before.
type Line struct {
	Indent int
	Key    string
	Value  string
}

// Add appends a line to r.
func (r *Report) Add(indent int, key, value string) {
	r.Lines = append(r.Lines, Line{Indent: indent, Key: key, Value: value})
}
