package blockdev

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestCheckMountpoint: the real path through a symlink, whether the
// directory holds anything, and the refusals with their kinds.
func TestCheckMountpoint(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	full := filepath.Join(dir, "full")
	for _, d := range []string{empty, full} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(full, "f"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(empty, link); err != nil {
		t.Fatal(err)
	}
	realEmpty, err := filepath.EvalSymlinks(empty)
	if err != nil {
		t.Fatal(err)
	}
	mp, err := CheckMountpoint(link)
	if err != nil || mp.Path != realEmpty || mp.Occupied {
		t.Fatalf("through a symlink: %+v, %v", mp, err)
	}
	// It holds the directory itself: a path swapped since does not change it.
	var st unix.Stat_t
	if err := unix.Fstat(int(mp.dir.Fd()), &st); err != nil || st.Ino != mp.ino || mp.ino == 0 {
		t.Fatalf("the held directory: %v, inode %d, recorded %d", err, st.Ino, mp.ino)
	}
	if err := unix.Stat(realEmpty, &st); err != nil || st.Ino != mp.ino || st.Dev != mp.dev {
		t.Fatalf("holds another directory than %s: %v", realEmpty, err)
	}
	mp.Close()
	if mp, err := CheckMountpoint(full); err != nil || !filepath.IsAbs(mp.Path) || !mp.Occupied {
		t.Fatalf("a directory holding a file: %+v, %v", mp, err)
	} else {
		mp.Close()
	}

	var be *Error
	missing := filepath.Join(dir, "nope")
	_, err = CheckMountpoint(missing)
	if !errors.As(err, &be) || be.Kind != KindUsage || err.Error() != "mountpoint "+missing+" does not exist" ||
		len(be.Hints) != 1 || be.Hints[0] != "create it: mkdir -p "+missing {
		t.Fatalf("missing: %v", err)
	}
	file := filepath.Join(full, "f")
	if _, err = CheckMountpoint(file); !errors.As(err, &be) || be.Kind != KindUsage || !strings.Contains(err.Error(), "is not a directory") {
		t.Fatalf("a file: %v", err)
	}
	if _, err = CheckMountpoint("/"); !errors.As(err, &be) || be.Kind != KindUsage {
		t.Fatalf("/: %v", err)
	}
}
