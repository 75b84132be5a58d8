package safefile

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
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
	if _, err := CreateOutput(dev, nil, true); !errors.Is(err, ErrBlockDevice) || err.Error() != "output "+dev+" is a block device" {
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
	in, err := OpenStreamInput(p)
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
	if in, err := OpenStreamInput(f); err != nil || in.Size != 1 {
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
		out, err := CreateOutput(c.path, fi, true)
		if err == nil || (c.kind != nil && !errors.Is(err, c.kind)) || err.Error() != c.msg {
			t.Errorf("CreateOutput(%s) = %v, %v; want %q", c.path, out, err, c.msg)
		}
	}
	if b, _ := os.ReadFile(in); string(b) != "data" {
		t.Fatal("input changed")
	}
	if _, err := CreateOutput(in, nil, false); !errors.Is(err, ErrExists) {
		t.Fatalf("existing output without overwrite: %v", err)
	}
}

// TestCreateOutputSymlink: the file a symlink leads to is written (also
// when it does not exist yet); the link stays a link.
func TestCreateOutputSymlink(t *testing.T) {
	dir := t.TempDir()
	for _, exists := range []bool{false, true} {
		target := filepath.Join(dir, "target")
		os.Remove(target)
		if exists {
			os.WriteFile(target, []byte("old"), 0o600)
		}
		link := filepath.Join(dir, "link")
		os.Remove(link)
		os.Symlink("target", link)
		out, err := CreateOutput(link, nil, true)
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
	}
	// A dangling link to a dangling link is refused.
	chain := filepath.Join(dir, "chain")
	os.Symlink("nowhere", filepath.Join(dir, "mid"))
	os.Symlink("mid", chain)
	if _, err := CreateOutput(chain, nil, true); err == nil || !strings.Contains(err.Error(), "symlink that cannot be followed: it leads to another symlink that leads nowhere") {
		t.Fatalf("chain: %v", err)
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
	out, err := CreateOutput(p, nil, false)
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
	null, err := CreateOutput("/dev/null", nil, false)
	if err != nil || null.File != nil {
		t.Fatalf("/dev/null: %+v %v", null, err)
	}
	null.Abort()
	if std, err := CreateOutput("-", nil, false); err != nil || std.Stream != os.Stdout || std.FinalName() != "standard output" {
		t.Fatalf("-: %+v %v", std, err)
	}
	f, err := CreateOutput(filepath.Join(dir, "out"), nil, false)
	if err != nil || f.File == nil {
		t.Fatalf("file: %+v %v", f, err)
	}
	f.Write([]byte("partial"))
	f.Abort()
	if names := entries(t, dir); len(names) != 1 || names[0] != "fifo" {
		t.Fatalf("left %v", names)
	}
}
