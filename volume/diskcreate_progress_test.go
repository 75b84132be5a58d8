package volume

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/xtsctl/xtsctl/disk"
)

// TestCreateTotalAfterKDF: a new volume's Total comes after its key slot's
// Argon2id, so that the data's progress clock (rate, time left) does not
// count the seconds of the derivation (a 3-second format showed
// "345 kB/s [3s:12m48s]"). The derivation is seen by its memory: by the
// time Total is told, this process has allocated the slot's Argon2id
// memory; the data (1 MiB) is far smaller. Then Progress starts from 0.
func TestCreateTotalAfterKDF(t *testing.T) {
	const kdfMiB = 32
	// The costs asked for, not the package's tiny test costs.
	defer func(h func(KDFParams) KDFParams) { kdfTestHook = h }(kdfTestHook)
	kdfTestHook = nil
	o := &disk.CreateOptions{
		Name: "new.vol", TypeName: "volume", DataSize: 1 << 20, Digest: true,
		KDF: disk.NewKDF{Time: time.Second, Fixed: &disk.Argon2{Time: 1, MemoryKiB: kdfMiB << 10, Threads: 1}},
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	before := ms.TotalAlloc
	var atTotal uint64
	var progress []int64
	o.Total = func(n int64) {
		if n != o.DataSize || atTotal != 0 || len(progress) != 0 {
			t.Errorf("Total(%d) after %d progress reports", n, len(progress))
		}
		runtime.ReadMemStats(&ms)
		atTotal = ms.TotalAlloc - before
	}
	o.Progress = func(n int64) { progress = append(progress, n) }
	c := Format.(disk.Creator)
	plan, err := c.PlanCreate(o)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "new.vol"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := c.Create(context.Background(), plan, nil, &disk.CreateOutput{Name: f.Name(), W: f, File: f}, &disk.Secret{Passphrase: []byte("progress")}); err != nil {
		t.Fatal(err)
	}
	if atTotal < kdfMiB<<20 {
		t.Errorf("Total was told after %d KiB allocated: before the %d MiB key derivation", atTotal>>10, kdfMiB)
	}
	if len(progress) < 2 || progress[0] != 0 || progress[len(progress)-1] != o.DataSize {
		t.Errorf("progress %v: want 0 first and %d last", progress, o.DataSize)
	}
}
