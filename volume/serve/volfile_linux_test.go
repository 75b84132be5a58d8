//go:build linux

package serve

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/xtsctl/xtsctl/volume"
)

// TestOpenVolumeSplitIO serves a volume file opened by OpenVolume (data
// sectors through O_DIRECT, the rest buffered) with aligned and unaligned
// requests, then checks it with the library's own buffered Open: the
// data reads back and every tag verifies.
func TestOpenVolumeSplitIO(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v.vol")
	mem := newTestVolume(t, 512) // 2 MiB of data
	if err := os.WriteFile(path, mem.b, 0o600); err != nil {
		t.Fatal(err)
	}
	probe := openTestVolume(t, mem, true)
	key := probe.MasterKey()
	probe.Close()

	v, err := OpenVolume(path, key, false)
	if err != nil {
		t.Fatal(err)
	}
	if v.img.direct == nil {
		t.Log("the temporary directory's filesystem has no O_DIRECT; only the buffered path runs")
	}
	if _, err := OpenVolume(path, key, false); !errors.Is(err, ErrImageBusy) {
		t.Errorf("a second read-write OpenVolume: %v, want ErrImageBusy", err)
	}
	d := NewDevice(NewVolumeStore(v, false), false, t.Logf)
	want := make([]byte, 512*4096)
	for off := 0; off < len(want); off += 1 << 20 {
		if err := d.ReadAt(want[off:off+1<<20], int64(off)); err != nil {
			t.Fatal(err)
		}
	}
	for _, w := range []struct{ off, n int }{{0, 1 << 20}, {4096 * 300, 4096}, {12345, 70000}, {2<<20 - 10, 10}} {
		p := make([]byte, w.n)
		rand.Read(p)
		if err := d.WriteAt(p, int64(w.off)); err != nil {
			t.Fatal(err)
		}
		copy(want[w.off:], p)
	}
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(want))
	for off := 0; off < len(got); off += 1 << 20 {
		if err := d.ReadAt(got[off:off+1<<20], int64(off)); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(got, want) {
		t.Fatal("reads through OpenVolume differ from the writes")
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}

	lib, err := volume.Open(path, testPass, true)
	if err != nil {
		t.Fatal(err)
	}
	defer lib.Close()
	if lib.State().Dirty {
		t.Error("the volume is dirty after Close")
	}
	res, err := lib.Verify(context.Background(), nil, nil)
	if err != nil || res.BadSectors != 0 {
		t.Fatalf("verify: %v, %d bad sectors", err, res.BadSectors)
	}
	if err := lib.ReadSectors(got, 0); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("the library reads other data than was served (err %v)", err)
	}
}
