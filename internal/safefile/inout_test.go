package safefile

import (
	"bytes"
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
	"testing"

	"github.com/xtsctl/xtsctl/internal/loopdev"
	"golang.org/x/sys/unix"
)

// blockDevice attaches a loop device holding data, or skips.
func blockDevice(t *testing.T, data []byte) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("attaching a loop device needs root")
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		t.Skip("no loop devices")
	}
	backing := filepath.Join(t.TempDir(), "backing")
	if err := os.WriteFile(backing, data, 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := loopdev.Attach(backing, loopdev.Options{ReadOnly: true})
	if err != nil {
		t.Skipf("loop device: %v", err)
	}
	t.Cleanup(func() { d.Detach() })
	return d.Path
}

func fifo(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(p, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	return p
}

func TestOpenInputRefuses(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, nil, 0o600)
	for _, c := range []struct {
		path string
		kind error
		msg  string
	}{
		{filepath.Join(dir, "missing"), fs.ErrNotExist, "input " + dir + "/missing does not exist"},
		{dir, ErrDirectory, "input " + dir + " is a directory"},
		{dir, ErrNotImage, "input " + dir + " is a directory"},
		{"/dev/null", ErrNotImage, "input /dev/null is not a regular file or block device"},
		{fifo(t, dir), ErrPipe, "input " + dir + "/fifo is a pipe: this needs a file or block device"},
		{empty, ErrEmpty, "input " + empty + " is empty"},
	} {
		in, err := OpenInput(c.path)
		if !errors.Is(err, c.kind) || err.Error() != c.msg {
			t.Errorf("OpenInput(%s) = %v, %v; want %q wrapping %v", c.path, in, err, c.msg, c.kind)
		}
	}
}

func TestOpenInput(t *testing.T) {
	p := filepath.Join(t.TempDir(), "in")
	os.WriteFile(p, []byte("0123456789"), 0o600)
	in, err := OpenInput(p)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if in.Size != 10 || in.Name != p || in.Info == nil || !in.Info.Mode().IsRegular() {
		t.Fatalf("size %d, name %q, info %v", in.Size, in.Name, in.Info)
	}
	if b, _ := io.ReadAll(in); string(b) != "0123456789" {
		t.Fatalf("read %q: not positioned at the start", b)
	}
}

// TestOpenInputBlockDevice: a block device's size comes from seeking, as
// Stat reports 0.
func TestOpenInputBlockDevice(t *testing.T) {
	data := bytes.Repeat([]byte("block device"), 1<<17)[:1<<20]
	dev := blockDevice(t, data)
	in, err := OpenInput(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if in.Size != int64(len(data)) {
		t.Fatalf("size %d, want %d", in.Size, len(data))
	}
	if b, _ := io.ReadAll(in); !bytes.Equal(b, data) {
		t.Fatal("read other data")
	}
	if _, err := CreateOutput(context.Background(), dev, nil, true); !errors.Is(err, ErrBlockDevice) || err.Error() != "output "+dev+" is a block device" {
		t.Fatalf("block device as output: %v", err)
	}
}

func TestOpenStreamInput(t *testing.T) {
	dir := t.TempDir()
	p := fifo(t, dir)
	go func() {
		w, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err == nil {
			w.WriteString("streamed")
			w.Close()
		}
	}()
	in, err := OpenStreamInput(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if in.Size != -1 {
		t.Fatalf("size %d for a pipe, want -1", in.Size)
	}
	if b, _ := io.ReadAll(in); string(b) != "streamed" {
		t.Fatalf("read %q", b)
	}
	// A file is still a file.
	f := filepath.Join(dir, "f")
	os.WriteFile(f, []byte("x"), 0o600)
	if in, err := OpenStreamInput(context.Background(), f); err != nil || in.Size != 1 {
		t.Fatalf("file: %v, %v", in, err)
	}
	// Input.Stream is read instead of the file.
	in2 := &Input{Stream: strings.NewReader("from stdin"), Size: -1}
	if b, _ := io.ReadAll(in2); string(b) != "from stdin" {
		t.Fatalf("stream read %q", b)
	}
}

func TestCreateOutputRefuses(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	os.WriteFile(in, []byte("data"), 0o600)
	link := filepath.Join(dir, "link")
	os.Symlink("in", link)
	fi, _ := os.Stat(in)
	for _, c := range []struct {
		path string
		kind error
		msg  string
	}{
		{in, ErrSameFile, "input and output are the same file (" + in + ")"},
		{link, ErrSameFile, "input and output are the same file (" + link + ")"},
		{dir, nil, "output " + dir + " is a directory"},
	} {
		out, err := CreateOutput(context.Background(), c.path, fi, true)
		if err == nil || (c.kind != nil && !errors.Is(err, c.kind)) || err.Error() != c.msg {
			t.Errorf("CreateOutput(context.Background(), %s) = %v, %v; want %q", c.path, out, err, c.msg)
		}
	}
	if b, _ := os.ReadFile(in); string(b) != "data" {
		t.Fatal("input changed")
	}
	if _, err := CreateOutput(context.Background(), in, nil, false); !errors.Is(err, ErrExists) {
		t.Fatalf("existing output without overwrite: %v", err)
	}
}

// TestCreateOutputSymlink: the file a symlink leads to is written; the
// link stays a link. A symlink that leads nowhere is refused, as GNU cp
// refuses it: nothing is created where it points.
func TestCreateOutputSymlink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	os.WriteFile(target, []byte("old"), 0o600)
	link := filepath.Join(dir, "link")
	os.Symlink("target", link)
	out, err := CreateOutput(context.Background(), link, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	if out.FinalName() != target {
		t.Fatalf("FinalName %q, want %q", out.FinalName(), target)
	}
	out.Write([]byte("new"))
	if err := out.Commit(); err != nil {
		t.Fatal(err)
	}
	if lfi, err := os.Lstat(link); err != nil || lfi.Mode()&fs.ModeSymlink == 0 {
		t.Fatalf("link replaced: %v %v", lfi, err)
	}
	if b, _ := os.ReadFile(target); string(b) != "new" {
		t.Fatalf("target holds %q", b)
	}

	os.Remove(target)
	os.Symlink("nowhere", filepath.Join(dir, "mid"))
	os.Symlink("mid", filepath.Join(dir, "chain"))
	for _, c := range []struct{ name, dest string }{{"link", "target"}, {"chain", "mid"}} {
		for _, force := range []bool{false, true} {
			out, err := CreateOutput(context.Background(), filepath.Join(dir, c.name), nil, force)
			want := "output " + filepath.Join(dir, c.name) + " is a symlink to " + c.dest + ", which does not exist: xtsctl does not create files through a symlink"
			if !errors.Is(err, ErrDanglingSymlink) || err.Error() != want {
				t.Errorf("dangling %s (force %v): %v, %v; want %q", c.name, force, out, err, want)
			}
		}
	}
	if names := entries(t, dir); strings.Join(names, " ") != "chain link mid" {
		t.Fatalf("directory holds %v", names)
	}
}

// openFD opens path with flags and returns the file and the names that
// lead to its descriptor: /proc/self/fd/N, /dev/fd/N, and symlinks to
// them (one through another).
func openFD(t *testing.T, path string, flags int) (*os.File, []string) {
	t.Helper()
	f, err := os.OpenFile(path, flags, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	fd := strconv.Itoa(int(f.Fd()))
	links := t.TempDir()
	os.Symlink("/proc/self/fd/"+fd, filepath.Join(links, "to-proc"))
	os.Symlink("/dev/fd/"+fd, filepath.Join(links, "to-dev-fd"))
	os.Symlink("to-dev-fd", filepath.Join(links, "to-link"))
	return f, []string{"/proc/self/fd/" + fd, "/dev/fd/" + fd, "/proc/thread-self/fd/" + fd,
		filepath.Join(links, "to-proc"), filepath.Join(links, "to-dev-fd"), filepath.Join(links, "to-link")}
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// TestCreateOutputAppends: an output that leads to an open descriptor of
// a file opened for appending (>> log, named /dev/stdout or
// /proc/self/fd/N) is appended to through that descriptor, with or
// without --force: never replaced, never refused as existing.
func TestCreateOutputAppends(t *testing.T) {
	log := filepath.Join(t.TempDir(), "log")
	os.WriteFile(log, []byte("log\n"), 0o644)
	ino := inode(t, log)
	_, names := openFD(t, log, os.O_WRONLY|os.O_APPEND)
	want := "log\n"
	for _, name := range names {
		for _, force := range []bool{false, true} {
			out, err := CreateOutput(context.Background(), name, nil, force)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if out.File != nil || out.Stream == nil || out.FinalName() != name {
				t.Fatalf("%s: %+v is not written through", name, out)
			}
			line := fmt.Sprintf("%s %v\n", name, force)
			out.Write([]byte(line))
			want += line
			if err := out.Commit(); err != nil {
				t.Fatal(err)
			}
			// Abort of an appended output leaves what was appended.
			out, _ = CreateOutput(context.Background(), name, nil, force)
			out.Write([]byte("aborted\n"))
			want += "aborted\n"
			out.Abort()
			if out.Rewound() {
				t.Fatal("an appended output was taken back")
			}
		}
	}
	if b, _ := os.ReadFile(log); string(b) != want {
		t.Fatalf("log holds %q, want %q", b, want)
	}
	if inode(t, log) != ino {
		t.Fatal("the log was replaced")
	}
}

// TestCreateOutputTruncated: an output that leads to a descriptor of a
// file the shell truncated (>) is written from where the descriptor
// stands; Abort truncates it back, so that a failed run leaves no partial
// data in it. A file opened without truncation (1<>) with data past the
// descriptor's offset is not truncated.
func TestCreateOutputTruncated(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "redirected")
	f, names := openFD(t, path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
	f.Write([]byte("before "))
	out, err := CreateOutput(context.Background(), names[1], nil, false)
	if err != nil {
		t.Fatal(err)
	}
	out.Write([]byte("partial plaintext"))
	out.Abort()
	if b, _ := os.ReadFile(path); string(b) != "before " || !out.Rewound() {
		t.Fatalf("after Abort the file holds %q (rewound %v)", b, out.Rewound())
	}
	f.Write([]byte("after")) // the shell's next writer continues where it was
	out, _ = CreateOutput(context.Background(), names[0], nil, false)
	out.Write([]byte(" complete"))
	if err := out.Commit(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "before after complete" {
		t.Fatalf("file holds %q", b)
	}

	other := filepath.Join(dir, "rw")
	os.WriteFile(other, []byte("0123456789"), 0o600)
	_, names = openFD(t, other, os.O_RDWR)
	out, _ = CreateOutput(context.Background(), names[0], nil, true)
	out.Write([]byte("ab"))
	out.Abort()
	if b, _ := os.ReadFile(other); string(b) != "ab23456789" || out.Rewound() {
		t.Fatalf("1<> file holds %q after Abort (rewound %v)", b, out.Rewound())
	}
}

// TestCreateOutputDescriptorRefuses: a descriptor open only for reading,
// and a descriptor of the input, are refused.
func TestCreateOutputDescriptorRefuses(t *testing.T) {
	in := filepath.Join(t.TempDir(), "in")
	os.WriteFile(in, []byte("input"), 0o600)
	fi, _ := os.Stat(in)
	r, names := openFD(t, in, os.O_RDONLY)
	if _, err := CreateOutput(context.Background(), names[0], nil, true); err == nil || !strings.Contains(err.Error(), "is not open for writing") {
		t.Fatalf("read-only descriptor: %v", err)
	}
	r.Close()
	_, names = openFD(t, in, os.O_WRONLY|os.O_APPEND)
	if _, err := CreateOutput(context.Background(), names[0], fi, true); !errors.Is(err, ErrSameFile) {
		t.Fatalf("the input's descriptor: %v", err)
	}
	if b, _ := os.ReadFile(in); string(b) != "input" {
		t.Fatal("input changed")
	}
}

// TestReaderGone: a pipe whose reader closed is recognised, and a write
// to it marks the output.
func TestReaderGone(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	out, err := CreateOutput(context.Background(), "/proc/self/fd/"+strconv.Itoa(int(w.Fd())), nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := out.Write([]byte("x")); err != nil || out.ReaderGone() {
		t.Fatalf("write %v, reader gone %v with a reader", err, out.ReaderGone())
	}
	r.Close()
	if !out.ReaderGone() || !ReaderGone(w) {
		t.Fatal("a pipe without reader not recognised")
	}
	if _, err := out.Write([]byte("x")); !errors.Is(err, syscall.EPIPE) {
		t.Fatalf("write to a pipe without reader: %v", err)
	}
	out.Abort()
	if f, _ := os.Open(os.DevNull); ReaderGone(f) {
		t.Fatal("/dev/null has no reader?")
	}
}

// TestCreateOutputStreams: pipes and character devices are written
// through, and Commit closes them; Abort of a file leaves nothing.
func TestCreateOutputStreams(t *testing.T) {
	dir := t.TempDir()
	p := fifo(t, dir)
	r, err := os.OpenFile(p, os.O_RDWR, 0) // a reader, so that opening to write does not block
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	out, err := CreateOutput(context.Background(), p, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if out.File != nil || out.Stream == nil || out.FinalName() != p {
		t.Fatalf("pipe output %+v", out)
	}
	out.Write([]byte("through"))
	if err := out.Commit(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 7)
	if _, err := io.ReadFull(r, buf); err != nil || string(buf) != "through" {
		t.Fatalf("pipe got %q, %v", buf, err)
	}
	null, err := CreateOutput(context.Background(), "/dev/null", nil, false)
	if err != nil || null.File != nil {
		t.Fatalf("/dev/null: %+v %v", null, err)
	}
	null.Abort()
	if std, err := CreateOutput(context.Background(), "-", nil, false); err != nil || std.Stream != os.Stdout || std.FinalName() != "standard output" {
		t.Fatalf("-: %+v %v", std, err)
	}
	f, err := CreateOutput(context.Background(), filepath.Join(dir, "out"), nil, false)
	if err != nil || f.File == nil {
		t.Fatalf("file: %+v %v", f, err)
	}
	f.Write([]byte("partial"))
	f.Abort()
	if names := entries(t, dir); len(names) != 1 || names[0] != "fifo" {
		t.Fatalf("left %v", names)
	}
}
