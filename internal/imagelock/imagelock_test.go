package imagelock

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestLocks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "img")
	if err := os.WriteFile(path, make([]byte, 4096), 0o600); err != nil {
		t.Fatal(err)
	}
	r1, err := Open(path, true, 0)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := Open(path, true, 0)
	if err != nil {
		t.Fatalf("two readers: %v", err)
	}
	if _, err := Open(path, false, 0); !errors.Is(err, ErrInUse) {
		t.Fatalf("a writer beside readers: %v, want ErrInUse", err)
	}
	r1.Close()
	r2.Close()
	w, err := Open(path, false, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := Open(path, true, 0); !errors.Is(err, ErrInUse) {
		t.Fatalf("a reader beside a writer: %v, want ErrInUse", err)
	}
	if _, err := Open(filepath.Join(t.TempDir(), "missing"), true, 0); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing image: %v", err)
	}
}
