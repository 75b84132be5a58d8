package safefile

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func entries(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	return names
}

func TestCommit(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out.img")
	f, err := Create(out, false, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("hello"))
	if names := entries(t, dir); len(names) != 0 {
		t.Fatalf("directory holds %v before Commit: an unnamed file has no name", names)
	}
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	f.Abort() // harmless after Commit
	if b, _ := os.ReadFile(out); string(b) != "hello" {
		t.Fatalf("output = %q", b)
	}
	if names := entries(t, dir); len(names) != 1 {
		t.Fatalf("directory holds %v, want only the output", names)
	}
	fi, _ := os.Stat(out)
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", fi.Mode())
	}
}

func TestAbortLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	f, err := Create(filepath.Join(dir, "out"), false, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("partial"))
	f.Abort()
	if names := entries(t, dir); len(names) != 0 {
		t.Fatalf("directory holds %v after Abort", names)
	}
}

func TestExisting(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	os.WriteFile(out, []byte("old"), 0o644)
	if _, err := Create(out, false, 0o644); !errors.Is(err, ErrExists) {
		t.Fatalf("Create over an existing file: %v", err)
	}
	f, err := Create(out, true, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("new"))
	if b, _ := os.ReadFile(out); string(b) != "old" {
		t.Fatal("old content replaced before Commit")
	}
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(out); string(b) != "new" {
		t.Fatalf("content %q after overwrite", b)
	}
}

// TestRaceCreatedWhileWriting: without overwrite, a file that appears at the
// final name during the run is not replaced.
func TestRaceCreatedWhileWriting(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	f, err := Create(out, false, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(out, []byte("theirs"), 0o644)
	if err := f.Commit(); !errors.Is(err, ErrExists) {
		t.Fatalf("Commit = %v, want ErrExists", err)
	}
	if b, _ := os.ReadFile(out); string(b) != "theirs" {
		t.Fatal("replaced a file created during the run")
	}
	if names := entries(t, dir); len(names) != 1 {
		t.Fatalf("leftovers: %v", names)
	}
}

func TestUnwritableDirectory(t *testing.T) {
	if _, err := Create(filepath.Join(t.TempDir(), "missing", "out"), false, 0o644); err == nil {
		t.Fatal("created a file in a missing directory")
	}
}
