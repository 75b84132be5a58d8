package luksimage

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/xtsctl/xtsctl/disk"
	"github.com/xtsctl/xtsctl/luks"
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

// openImage reads the LUKS header of the image at path as the format
// layer does, locked as access says until close.
func openImage(t *testing.T, path string, access disk.Access) (li *Image, close func()) {
	t.Helper()
	img, err := disk.OpenImage(path, disk.ImageOptions{Access: access})
	if err != nil {
		t.Fatal(err)
	}
	h, err := luks.ReadHeader(img.File, img.Size)
	if err != nil {
		img.Close()
		t.Fatal(err)
	}
	return &Image{Header: h, HeaderFile: img.File, HeaderSize: img.Size}, func() { img.Close() }
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
		li, close := openImage(t, img, disk.WriteHeader)
		defer close()
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
		li, close := openImage(t, img, disk.Inspect)
		defer close()
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
