package luksimage

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/xtsctl/xtsctl/luks"
	"github.com/xtsctl/xtsctl/volume"
)

var cheap = &luks.Argon2Params{Time: 4, MemoryKiB: 32 << 10, Threads: 1}

const imgSize = 17 << 20 // the 16 MiB header area and 1 MiB of data

// newImage writes a LUKS2 image with one keyslot for pass.
func newImage(t testing.TB, dir, name string, pass []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(imgSize); err != nil {
		t.Fatal(err)
	}
	opt := luks.FormatOptions{Keyslot: luks.KeyslotOptions{Argon2: cheap}, DigestIterations: 1000}
	if _, err := luks.Create(context.Background(), f, imgSize, pass, opt, nil, nil); err != nil {
		t.Fatal(err)
	}
	return p
}

func fileProblem(t *testing.T, err error, role, path string, p Problem) {
	t.Helper()
	var fe *FileError
	if !errors.As(err, &fe) || fe.Role != role || fe.Path != path || fe.Problem != p {
		t.Errorf("%s %s: got %v, want a %v FileError", role, path, err, p)
	}
}

// TestOpenErrors: what is wrong with the image or header file comes back
// typed, naming the file and its role.
func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	img := newImage(t, dir, "img", []byte("p"))
	junk := filepath.Join(dir, "junk")
	if err := os.WriteFile(junk, bytes.Repeat([]byte{7}, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")

	_, err := Open(missing, "", Inspect)
	fileProblem(t, err, "image", missing, Missing)
	if err == nil || err.Error() != "image "+missing+" does not exist" {
		t.Errorf("message %q", err)
	}
	_, err = Open(dir, "", Inspect)
	fileProblem(t, err, "image", dir, Directory)
	_, err = Open("/dev/null", "", Inspect)
	fileProblem(t, err, "image", "/dev/null", NotImage)
	_, err = Open(img, missing, Read)
	fileProblem(t, err, "header file", missing, Missing)

	_, err = Open(junk, "", Inspect)
	var he *HeaderError
	if !errors.As(err, &he) || he.Path != junk || !errors.Is(err, luks.ErrNotLUKS) {
		t.Errorf("junk: %v", err)
	}
	// A detached header that is not one: the header file is named.
	_, err = Open(img, junk, Inspect)
	if !errors.As(err, &he) || he.Path != junk {
		t.Errorf("junk header: %v", err)
	}
}

// TestOpenLocks: Read shares the image with readers, WriteHeader wants it
// alone, as volume.LockImage has every xtsctl process lock it.
func TestOpenLocks(t *testing.T) {
	dir := t.TempDir()
	img := newImage(t, dir, "img", []byte("p"))
	shared, err := volume.LockImage(img, true, 0) // as a read-only open holds it
	if err != nil {
		t.Fatal(err)
	}
	r, err := Open(img, "", Read)
	if err != nil {
		t.Fatalf("Read beside a reader: %v", err)
	}
	r.Close()
	_, err = Open(img, "", WriteHeader)
	fileProblem(t, err, "image", img, InUse)
	if !errors.Is(err, volume.ErrInUse) {
		t.Errorf("%v is not volume.ErrInUse", err)
	}
	shared.Close()

	w, err := Open(img, "", WriteHeader)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Open(img, "", Read)
	fileProblem(t, err, "image", img, InUse)
	if i, err := Open(img, "", Inspect); err != nil {
		t.Errorf("Inspect takes no lock: %v", err)
	} else {
		i.Close()
	}
	w.Close()
}

// TestOpenDetached: with a detached header, the header comes from its
// file; WriteHeader does not open (nor lock) the data device.
func TestOpenDetached(t *testing.T) {
	dir := t.TempDir()
	hdr := newImage(t, dir, "hdr", []byte("p"))
	data := filepath.Join(dir, "data")
	if err := os.WriteFile(data, make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	held, err := volume.LockImage(data, false, 0)
	if err != nil {
		t.Fatal(err)
	}
	w, err := Open(data, hdr, WriteHeader)
	if err != nil {
		t.Fatalf("WriteHeader with the data device held: %v", err)
	}
	if w.Data != nil || !w.Detached || w.HeaderPath != hdr || w.HeaderSize != imgSize || w.Header == nil {
		t.Errorf("WriteHeader, detached: %+v", w)
	}
	w.Close()
	_, err = Open(data, hdr, Read)
	fileProblem(t, err, "image", data, InUse)
	held.Close()

	r, err := Open(data, hdr, Read)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Data == nil || r.DataSize != 1<<20 || r.HeaderSize != imgSize {
		t.Errorf("Read, detached: data %v, %d bytes; header %d bytes", r.Data, r.DataSize, r.HeaderSize)
	}
	if _, slot, err := r.Unlock(context.Background(), []byte("p"), nil, nil); err != nil || slot != 0 {
		t.Errorf("Unlock through the header file: keyslot %d, %v", slot, err)
	}
}

// TestOpenOn: an image the caller opened stays open after Close.
func TestOpenOn(t *testing.T) {
	dir := t.TempDir()
	img := newImage(t, dir, "img", []byte("p"))
	f, err := os.Open(img)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	li, err := OpenOn(f, img, "")
	if err != nil {
		t.Fatal(err)
	}
	if li.DataSize != imgSize || li.HeaderFile != f {
		t.Errorf("OpenOn: %d bytes, header file %v", li.DataSize, li.HeaderFile)
	}
	li.Close()
	if _, err := f.Stat(); err != nil {
		t.Errorf("Close closed the caller's file: %v", err)
	}
}

// TestChangeKeyslots: add, change and remove through one transaction;
// refusals come before the passphrase is asked, and the passphrases
// handed over are wiped.
func TestChangeKeyslots(t *testing.T) {
	img := newImage(t, t.TempDir(), "img", []byte("zero"))
	var asked []string
	var given [][]byte
	change := func(op KeyslotOp, pick *int, pass, newPass string) (int, error) {
		t.Helper()
		li, err := Open(img, "", WriteHeader)
		if err != nil {
			t.Fatal(err)
		}
		defer li.Close()
		return li.ChangeKeyslots(context.Background(), KeyslotChange{
			Op: op, Keyslot: pick,
			Passphrase: func() ([]byte, error) {
				asked = append(asked, "old")
				b := []byte(pass)
				given = append(given, b)
				return b, nil
			},
			New: func() ([]byte, *luks.Argon2Params, error) {
				asked = append(asked, "new")
				b := []byte(newPass)
				given = append(given, b)
				return b, cheap, nil
			},
		})
	}
	opens := func(pass string) int {
		t.Helper()
		li, err := Open(img, "", Inspect)
		if err != nil {
			t.Fatal(err)
		}
		defer li.Close()
		_, slot, err := li.Unlock(context.Background(), []byte(pass), nil, nil)
		if err != nil {
			return -1
		}
		return slot
	}

	zero, five := 0, 5
	_, err := change(AddKeyslot, &zero, "zero", "x")
	var se *luks.KeyslotStateError
	if !errors.As(err, &se) || !se.InUse || len(asked) != 0 {
		t.Fatalf("add to keyslot 0 in use: %v, asked %v", err, asked)
	}
	_, err = change(RemoveKeyslot, &five, "zero", "")
	if !errors.As(err, &se) || se.InUse || len(asked) != 0 {
		t.Fatalf("remove keyslot 5 not in use: %v, asked %v", err, asked)
	}
	_, err = change(AddKeyslot, nil, "wrong", "x")
	if !errors.Is(err, luks.ErrWrongPassphrase) || !slices.Equal(asked, []string{"old"}) {
		t.Fatalf("wrong passphrase: %v, asked %v", err, asked)
	}

	asked = nil
	if slot, err := change(AddKeyslot, &five, "zero", "five"); err != nil || slot != 5 {
		t.Fatalf("add keyslot 5: %d, %v", slot, err)
	}
	if !slices.Equal(asked, []string{"old", "new"}) || opens("five") != 5 || opens("zero") != 0 {
		t.Fatalf("after add: asked %v, five opens %d, zero opens %d", asked, opens("five"), opens("zero"))
	}
	if slot, err := change(ChangeKeyslot, nil, "five", "FIVE"); err != nil || slot != 5 {
		t.Fatalf("change: %d, %v", slot, err)
	}
	if opens("five") != -1 || opens("FIVE") != 5 {
		t.Fatal("the change did not replace keyslot 5's passphrase")
	}
	// Keyslot 5 removed with keyslot 0's passphrase (luksKillSlot).
	if slot, err := change(RemoveKeyslot, &five, "zero", ""); err != nil || slot != 5 {
		t.Fatalf("remove keyslot 5: %d, %v", slot, err)
	}
	if opens("FIVE") != -1 {
		t.Fatal("keyslot 5 still opens")
	}
	if slot, err := change(RemoveKeyslot, nil, "zero", ""); !errors.Is(err, luks.ErrLastKeyslot) || slot != 0 {
		t.Fatalf("removing the last keyslot: %d, %v", slot, err)
	}
	if opens("zero") != 0 {
		t.Fatal("the last keyslot was removed")
	}
	for _, b := range given {
		if len(b) > 0 && bytes.Count(b, []byte{0}) != len(b) {
			t.Errorf("a passphrase was not wiped: %q", b)
		}
	}
}
