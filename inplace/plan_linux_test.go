package inplace

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestJournalFor: a plain run's journal is beside an image unless named,
// and never the target itself, whatever name reaches it.
func TestJournalFor(t *testing.T) {
	dir := t.TempDir()
	img := filepath.Join(dir, "img")
	if err := os.WriteFile(img, make([]byte, 1<<16), 0o600); err != nil {
		t.Fatal(err)
	}
	tg, err := OpenTarget(img)
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	if j, err := JournalFor(tg, ""); err != nil || j.Path != DefaultJournal(img) {
		t.Fatalf("default: %+v, %v", j, err)
	}
	other := filepath.Join(dir, "j")
	if j, err := JournalFor(tg, other); err != nil || j.Path != other || j.Name() != other {
		t.Fatalf("named: %+v, %v", j, err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(img, link); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{img, link} {
		if _, err := JournalFor(tg, p); !errors.Is(err, ErrJournalIsTarget) {
			t.Fatalf("%s: %v", p, err)
		}
	}
}
