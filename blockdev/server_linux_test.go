package blockdev

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestServerChecksTheImageFile: the server serves the file open checked
// (fd 5), and refuses one that is not it.
func TestServerChecksTheImageFile(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	os.WriteFile(a, []byte("a"), 0o600)
	os.WriteFile(b, []byte("b"), 0o600)
	var st unix.Stat_t
	unix.Stat(a, &st)
	s := &server{cfg: &serverConfig{Image: a, ImageDev: st.Dev, ImageIno: st.Ino}}
	fa, _ := os.Open(a)
	defer fa.Close()
	fb, _ := os.Open(b)
	defer fb.Close()
	if err := s.checkImage(fa); err != nil {
		t.Errorf("the right file: %v", err)
	}
	if err := s.checkImage(fb); err == nil {
		t.Error("the server took another file for the image")
	}
}

// TestLogsApartFromNames: no NAME's state directory is another's log.
func TestLogsApartFromNames(t *testing.T) {
	t.Setenv("XTSCTL_RUNDIR", t.TempDir())
	for _, n := range []string{"x", "x.log", "log", "a.b"} {
		if err := CheckName(n); err != nil {
			t.Fatal(err)
		}
		for _, m := range []string{"x", "x.log", "log", "a.b"} {
			if LogPath(n) == stateDir(m) || filepath.Dir(LogPath(n)) == stateDir(m) {
				t.Errorf("the log of %s is in the state directory of %s", n, m)
			}
		}
	}
}
