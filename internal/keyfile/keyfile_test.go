package keyfile

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"

	"golang.org/x/sys/unix"
)

func write(t *testing.T, content string, perm fs.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(p, []byte(content), perm); err != nil {
		t.Fatal(err)
	}
	os.Chmod(p, perm) // past the umask
	return p
}

func TestWindowCheck(t *testing.T) {
	for _, c := range []struct {
		w   Window
		msg string
	}{
		{Window{}, ""},
		{Window{Offset: 1 << 40, Size: 64}, ""},
		{Window{Offset: -1}, "offset -1 is negative"},
		{Window{Size: -3}, "size -3 is negative"},
		{Window{Size: 65}, "size 65 is more than the 64 bytes this file can hold"},
	} {
		err := c.w.Check(64)
		var we *WindowError
		if (err == nil) != (c.msg == "") || (err != nil && (err.Error() != c.msg || !errors.As(err, &we))) {
			t.Errorf("%+v: %v, want %q", c.w, err, c.msg)
		}
		// Read refuses the same windows before opening anything.
		if _, err := Read("/nonexistent", Options{Name: "key file", Limit: 64, Window: c.w}); c.msg != "" && !errors.As(err, &we) {
			t.Errorf("Read with %+v: %v", c.w, err)
		}
	}
}

func TestReadWindows(t *testing.T) {
	const data = "0123456789abcdefghij"
	p := write(t, data, 0o600)
	for _, c := range []struct {
		w    Window
		want string
	}{
		{Window{}, data},
		{Window{Offset: 5}, data[5:]},
		{Window{Size: 4}, data[:4]},
		{Window{Offset: 10, Size: 10}, data[10:]},
		{Window{Offset: 100}, ""}, // past the end: nothing, not an error
	} {
		got, err := Read(p, Options{Name: "key file", Limit: 64, Window: c.w})
		if err != nil || string(got) != c.want {
			t.Errorf("%+v: %q, %v; want %q", c.w, got, err, c.want)
		}
	}
	_, err := Read(p, Options{Name: "key file", Limit: 64, Window: Window{Offset: 15, Size: 8}})
	var se *ShortError
	if !errors.As(err, &se) || se.Got != 5 || se.Path != p || se.Name != "key file" {
		t.Fatalf("short window: %v", err)
	}
}

// TestReadLimit: Limit bytes are accepted, one more is ErrTooLarge; a
// window picks Limit bytes out of a larger file.
func TestReadLimit(t *testing.T) {
	exact := write(t, strings.Repeat("k", 32), 0o600)
	if got, err := Read(exact, Options{Name: "key file", Limit: 32}); err != nil || len(got) != 32 {
		t.Fatalf("at the limit: %d bytes, %v", len(got), err)
	}
	big := write(t, strings.Repeat("k", 33), 0o600)
	_, err := Read(big, Options{Name: "key file", Limit: 32})
	if !errors.Is(err, ErrTooLarge) || err.Error() != "key file "+big+" is larger than 32 bytes" {
		t.Fatalf("over the limit: %v", err)
	}
	if got, err := Read(big, Options{Name: "key file", Limit: 32, Window: Window{Offset: 1, Size: 32}}); err != nil || len(got) != 32 {
		t.Fatalf("window in a larger file: %d bytes, %v", len(got), err)
	}
}

func TestReadPassphrase(t *testing.T) {
	for _, c := range []struct {
		content string
		w       Window
		want    string // "" for ErrEmpty
	}{
		{"secret\n", Window{}, "secret"},
		{"secret", Window{}, "secret"},
		{"secret\n\n", Window{}, "secret\n"}, // one newline only
		{"secret\r\n", Window{}, "secret\r"},
		{"secret\n", Window{Size: 7}, "secret\n"}, // a window is taken as it is
		{"\n", Window{}, ""},
		{"", Window{}, ""},
	} {
		p := write(t, c.content, 0o600)
		got, err := Read(p, Options{Name: "passphrase file", Limit: 1024, Window: c.w, Passphrase: true})
		if c.want == "" {
			if !errors.Is(err, ErrEmpty) || err.Error() != "passphrase file "+p+" is empty" {
				t.Errorf("%q: %q, %v; want ErrEmpty", c.content, got, err)
			}
			continue
		}
		if err != nil || string(got) != c.want {
			t.Errorf("%q %+v: %q, %v; want %q", c.content, c.w, got, err, c.want)
		}
	}
	// Without Passphrase an empty file is no error: the caller judges.
	if got, err := Read(write(t, "", 0o600), Options{Name: "key file", Limit: 64}); err != nil || len(got) != 0 {
		t.Fatalf("empty key file: %q, %v", got, err)
	}
}

func TestReadRefuses(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")
	if _, err := Read(missing, Options{Name: "key file", Limit: 64}); !errors.Is(err, fs.ErrNotExist) || err.Error() != "key file "+missing+" does not exist" {
		t.Errorf("missing: %v", err)
	}
	if _, err := Read(dir, Options{Name: "key file", Limit: 64}); !errors.Is(err, ErrDirectory) || err.Error() != "key file "+dir+" is a directory" {
		t.Errorf("directory: %v", err)
	}
}

// TestExposed: Exposed is called for a regular file with group or other
// permissions, with those permissions, and not otherwise.
func TestExposed(t *testing.T) {
	for _, perm := range []fs.FileMode{0o600, 0o400, 0o640, 0o604, 0o644} {
		var got fs.FileMode
		called := false
		p := write(t, "key", perm)
		if _, err := Read(p, Options{Name: "key file", Limit: 64, Exposed: func(m fs.FileMode) { called, got = true, m }}); err != nil {
			t.Fatal(err)
		}
		if want := perm&0o077 != 0; called != want || (called && got != perm) {
			t.Errorf("mode %04o: called %v with %04o", perm, called, got)
		}
	}
}

// TestReadPipe: an offset in a file that cannot seek is read past.
func TestReadPipe(t *testing.T) {
	p := filepath.Join(t.TempDir(), "fifo")
	if err := unix.Mkfifo(p, 0o600); err != nil {
		t.Skip(err)
	}
	go func() {
		if w, err := os.OpenFile(p, os.O_WRONLY, 0); err == nil {
			w.WriteString("skipmekey!")
			w.Close()
		}
	}()
	got, err := Read(p, Options{Name: "key file", Limit: 64, Window: Window{Offset: 6}})
	if err != nil || string(got) != "key!" {
		t.Fatalf("%q, %v", got, err)
	}
}

func TestReadStdin(t *testing.T) {
	in := "0123456789secret\n"
	got, err := ReadStdin(iotest.HalfReader(strings.NewReader(in)), Options{Name: "passphrase file", Limit: 64, Window: Window{Offset: 10}, Passphrase: true})
	if err != nil || string(got) != "secret" {
		t.Fatalf("%q, %v", got, err)
	}
	_, err = ReadStdin(strings.NewReader("abc"), Options{Name: "key file", Limit: 64, Window: Window{Size: 8}})
	var se *ShortError
	if !errors.As(err, &se) || se.Path != "-" || se.Got != 3 {
		t.Fatalf("short: %v", err)
	}
	boom := errors.New("boom")
	_, err = ReadStdin(iotest.ErrReader(boom), Options{Name: "key file", Limit: 64})
	if !errors.Is(err, boom) || err.Error() != "cannot read the key file from standard input: boom" {
		t.Fatalf("read error: %v", err)
	}
	_, err = ReadStdin(iotest.ErrReader(boom), Options{Name: "key file", Limit: 64, Window: Window{Offset: 3}})
	if !errors.Is(err, boom) {
		t.Fatalf("error while skipping: %v", err)
	}
	if _, err := ReadStdin(bytes.NewReader(make([]byte, 65)), Options{Name: "key file", Limit: 64}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("too large: %v", err)
	}
}

func TestPrefix(t *testing.T) {
	path := filepath.Join(t.TempDir(), "k")
	if err := os.WriteFile(path, []byte("0123456789"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := Read(path, Options{Name: "keyfile", Limit: 4, Prefix: true})
	if err != nil || string(got) != "0123" {
		t.Fatalf("Read with Prefix = %q, %v; want the first 4 bytes", got, err)
	}
	if _, err := Read(path, Options{Name: "keyfile", Limit: 4}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Read without Prefix = %v, want ErrTooLarge", err)
	}
}
