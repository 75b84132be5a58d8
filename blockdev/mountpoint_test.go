package blockdev

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
	if real, occupied, err := CheckMountpoint(link); err != nil || real != realEmpty || occupied {
		t.Fatalf("through a symlink: %q, %v, %v", real, occupied, err)
	}
	if real, occupied, err := CheckMountpoint(full); err != nil || !filepath.IsAbs(real) || !occupied {
		t.Fatalf("a directory holding a file: %q, %v, %v", real, occupied, err)
	}

	var be *Error
	missing := filepath.Join(dir, "nope")
	_, _, err = CheckMountpoint(missing)
	if !errors.As(err, &be) || be.Kind != KindUsage || err.Error() != "mountpoint "+missing+" does not exist" ||
		len(be.Hints) != 1 || be.Hints[0] != "create it: mkdir -p "+missing {
		t.Fatalf("missing: %v", err)
	}
	file := filepath.Join(full, "f")
	if _, _, err = CheckMountpoint(file); !errors.As(err, &be) || be.Kind != KindUsage || !strings.Contains(err.Error(), "is not a directory") {
		t.Fatalf("a file: %v", err)
	}
}
