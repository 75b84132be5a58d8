package safefile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Why CreateOutput refuses an output; its errors wrap these and name the
// path.
var (
	// ErrSameFile: the output is the input, which would be destroyed.
	ErrSameFile = errors.New("input and output are the same file")
	// ErrBlockDevice: the output is a block device. An image is written
	// to a file; a device is converted where it is, by other means.
	ErrBlockDevice = errors.New("output is a block device")
	// ErrDanglingSymlink: the output is a symlink that leads to nothing.
	// Writing would create a file wherever it points, which GNU cp
	// refuses too.
	ErrDanglingSymlink = errors.New("output is a symlink that leads nowhere")
)

// Output is where a result goes: a file, written unnamed and linked in
// when complete (File), or a stream written through as it comes
// (standard output, an open descriptor named as /dev/stdout or
// /proc/self/fd/N, a pipe, a character device), which cannot be taken
// back.
type Output struct {
	*File           // nil for a stream
	Stream *os.File // the stream, nil for a file
	Name   string   // the path as given, or "standard output"

	own     bool  // Stream was opened here: Commit and Abort close it
	regular bool  // Stream is a regular file (a redirection): Commit syncs it
	rewind  bool  // Abort truncates Stream back to start
	start   int64 // where writing to a regular Stream started
	broken  bool  // a write failed with EPIPE
	rewound bool  // Abort took back what was written
	stall   stall
}

// stop makes a write that waits on a stream (a pipe, a socket, a
// terminal) return when ctx ends, with its cause (see stall).
func (o *Output) stop(ctx context.Context) *Output {
	if o.Stream != nil && !o.regular {
		o.stall.ctx = ctx
	}
	return o
}

// Write writes to the file or the stream.
func (o *Output) Write(p []byte) (int, error) {
	if o.File != nil {
		return o.File.Write(p)
	}
	n, err := o.stall.do(func() (int, error) { return o.Stream.Write(p) })
	if errors.Is(err, syscall.EPIPE) {
		o.broken = true
	}
	return n, err
}

// Commit completes the output: the file appears under its name; a stream
// that is a regular file is synced; a stream opened here is closed
// (standard output and error stay open).
func (o *Output) Commit() error {
	if o.File != nil {
		return o.File.Commit()
	}
	var err error
	if o.regular {
		if err = o.Stream.Sync(); err != nil {
			err = fmt.Errorf("cannot sync %s: %w", o.Name, unwrapPath(err))
		}
	}
	if o.own {
		if cerr := o.Stream.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("cannot write %s: %w", o.Name, unwrapPath(cerr))
		}
	}
	return err
}

// Abort drops the file. What a stream got cannot be recalled, with one
// exception: a regular file that ended where writing started (as after
// the shell's > redirection) is truncated back to that length, so that
// no partial data is left in it.
func (o *Output) Abort() {
	if o.File != nil {
		o.File.Abort()
		return
	}
	if o.rewind {
		o.rewind = false
		if o.Stream.Truncate(o.start) == nil {
			o.Stream.Seek(o.start, io.SeekStart)
			o.rewound = true
		}
	}
	if o.own {
		o.Stream.Close()
		o.own = false
	}
}

// Rewound reports whether Abort took back everything written to the
// stream (see Abort).
func (o *Output) Rewound() bool { return o.rewound }

// ReaderGone reports whether the output is a pipe or socket whose reader
// has closed it: what was written did not all arrive. Ask before Abort.
func (o *Output) ReaderGone() bool {
	return o.Stream != nil && (o.broken || ReaderGone(o.Stream))
}

// ReaderGone reports whether f is a pipe or socket with no reader left:
// writing to it fails with EPIPE (and raises SIGPIPE).
func ReaderGone(f *os.File) bool {
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	gone := false
	rc.Control(func(fd uintptr) {
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
		if n, err := unix.Poll(pfd, 0); err == nil && n == 1 {
			gone = pfd[0].Revents&(unix.POLLERR|unix.POLLHUP) != 0
		}
	})
	return gone
}

// FinalName names the output in messages: for a file behind a symlink,
// the file the link leads to.
func (o *Output) FinalName() string {
	if o.File != nil {
		return o.File.FinalName()
	}
	return o.Name
}

// CreateOutput starts writing path. "-" is standard output. A path that
// leads to one of this process's open descriptors (/dev/stdout, /dev/fd/N,
// /proc/self/fd/N, or a symlink to one) is written through that
// descriptor, never replaced, whatever overwrite says: a file opened for
// appending (>>) is appended to, one opened by > is written from where it
// stands. A pipe, a socket or a character device is written through too;
// a block device is refused (ErrBlockDevice), and so is a symlink that
// leads nowhere (ErrDanglingSymlink). Anything else is a file, written
// unnamed and linked in when complete (Create): an existing path is
// refused unless overwrite is set, and a symlink is never replaced (the
// file it leads to is). in, if not nil, is the input's FileInfo: writing
// over it is refused (ErrSameFile). Opening a named pipe waits for a
// reader, and a write to a stream for room, until ctx ends (see stall).
func CreateOutput(ctx context.Context, path string, in fs.FileInfo, overwrite bool) (*Output, error) {
	if path == "-" {
		return descriptorOutput(ctx, 1, "standard output", in)
	}
	if fd, ok := ownDescriptor(path); ok {
		return descriptorOutput(ctx, fd, path, in)
	}
	fi, statErr := os.Stat(path)
	if statErr == nil {
		switch {
		case in != nil && os.SameFile(fi, in):
			return nil, fmt.Errorf("%w (%s)", ErrSameFile, path)
		case fi.IsDir():
			return nil, fmt.Errorf("output %s is a directory", path)
		case fi.Mode()&(fs.ModeNamedPipe|fs.ModeSocket|fs.ModeCharDevice) != 0:
			f, err := openPipe(ctx, path, os.O_WRONLY)
			if err != nil {
				return nil, fmt.Errorf("cannot write %s: %w", path, err)
			}
			return (&Output{Stream: f, Name: path, own: true}).stop(ctx), nil
		case fi.Mode()&fs.ModeDevice != 0:
			return nil, &kindError{fmt.Sprintf("output %s is a block device", path), ErrBlockDevice}
		}
	}
	target := path
	if lfi, err := os.Lstat(path); err == nil && lfi.Mode()&fs.ModeSymlink != 0 {
		switch dest, _ := os.Readlink(path); {
		case errors.Is(statErr, fs.ErrNotExist):
			return nil, &kindError{fmt.Sprintf("output %s is a symlink to %s, which does not exist: xtsctl does not create files through a symlink", path, dest), ErrDanglingSymlink}
		case statErr != nil:
			return nil, fmt.Errorf("output %s is a symlink that cannot be followed: %w", path, unwrapPath(statErr))
		}
		if target, err = filepath.EvalSymlinks(path); err != nil {
			return nil, fmt.Errorf("output %s is a symlink that cannot be followed: %w", path, err)
		}
	}
	f, err := Create(target, overwrite, 0o600)
	if err != nil {
		return nil, err
	}
	return &Output{File: f, Name: path}, nil
}

// descriptorOutput writes through the open descriptor fd, named name.
func descriptorOutput(ctx context.Context, fd int, name string, in fs.FileInfo) (*Output, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("cannot write %s: %w", name, err)
	}
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err != nil {
		return nil, fmt.Errorf("cannot write %s: %w", name, err)
	}
	if flags&unix.O_ACCMODE == unix.O_RDONLY || flags&unix.O_PATH != 0 {
		return nil, fmt.Errorf("cannot write %s: descriptor %d is not open for writing", name, fd)
	}
	kind := st.Mode & unix.S_IFMT
	if in != nil && (kind == unix.S_IFREG || kind == unix.S_IFBLK) {
		if s, ok := in.Sys().(*syscall.Stat_t); ok && s.Dev == st.Dev && s.Ino == st.Ino {
			return nil, fmt.Errorf("%w (%s)", ErrSameFile, name)
		}
	}
	o := &Output{Name: name}
	switch fd {
	case 1:
		o.Stream = os.Stdout
	case 2:
		o.Stream = os.Stderr
	default:
		// A duplicate shares the descriptor's offset and O_APPEND, and
		// closing it leaves the descriptor alone.
		dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 3)
		if err != nil {
			return nil, fmt.Errorf("cannot write %s: %w", name, err)
		}
		o.Stream, o.own = os.NewFile(uintptr(dup), name), true
	}
	if kind == unix.S_IFREG {
		o.regular = true
		// Appending (>>) is never taken back: the file may be a log
		// that others write too.
		if flags&unix.O_APPEND == 0 {
			if off, err := unix.Seek(fd, 0, io.SeekCurrent); err == nil && off >= st.Size {
				o.rewind, o.start = true, off
			}
		}
	}
	return o.stop(ctx), nil
}

// ownDescriptor reports whether path leads to one of this process's open
// descriptors, as /dev/stdout, /dev/fd/N and /proc/self/fd/N do (also
// through symlinks of one's own), and to which.
func ownDescriptor(path string) (int, bool) {
	for range 40 { // the kernel's limit on symlinks followed
		dir, err := filepath.EvalSymlinks(filepath.Dir(path))
		if err != nil {
			return 0, false
		}
		base := filepath.Base(path)
		if isOwnFdDir(dir) {
			fd, err := strconv.Atoi(base)
			if err != nil || fd < 0 {
				return 0, false
			}
			// The name leads to the descriptor's file (the
			// descriptor is open, and nothing moved meanwhile).
			var st, pst unix.Stat_t
			if unix.Fstat(fd, &st) != nil || unix.Stat(path, &pst) != nil || st.Dev != pst.Dev || st.Ino != pst.Ino {
				return 0, false
			}
			return fd, true
		}
		dest, err := os.Readlink(filepath.Join(dir, base))
		if err != nil {
			return 0, false // not a symlink, or missing
		}
		if !filepath.IsAbs(dest) {
			dest = filepath.Join(dir, dest)
		}
		path = dest
	}
	return 0, false
}

// isOwnFdDir reports whether dir is this process's /proc/PID/fd, or that
// of one of its threads (/proc/thread-self/fd).
func isOwnFdDir(dir string) bool {
	self := "/proc/" + strconv.Itoa(os.Getpid())
	if dir == self+"/fd" {
		return true
	}
	rest, ok := strings.CutPrefix(dir, self+"/task/")
	if !ok {
		return false
	}
	tid, ok := strings.CutSuffix(rest, "/fd")
	_, err := strconv.Atoi(tid)
	return ok && err == nil
}
