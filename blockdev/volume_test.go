package blockdev

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"io"
	mrand "math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/xtsctl/xtsctl/blockdev/fusefile"
	"github.com/xtsctl/xtsctl/volume"
)

// memDevice is a volume.Device in memory. Snapshot copies it at one
// instant between WriteAt calls: the state a killed server leaves (every
// completed write is in the page cache, a WriteSectors may be cut between
// its data and its tags).
type memDevice struct {
	mu sync.Mutex
	b  []byte
}

func (d *memDevice) ReadAt(p []byte, off int64) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if off >= int64(len(d.b)) {
		return 0, io.EOF
	}
	n := copy(p, d.b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (d *memDevice) WriteAt(p []byte, off int64) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if end := off + int64(len(p)); end > int64(len(d.b)) {
		d.b = append(d.b, make([]byte, end-int64(len(d.b)))...)
	}
	return copy(d.b[off:], p), nil
}

func (d *memDevice) Sync() error { return nil }

func (d *memDevice) snapshot() *memDevice {
	d.mu.Lock()
	defer d.mu.Unlock()
	return &memDevice{b: bytes.Clone(d.b)}
}

var testPass = []byte("correct horse battery staple")

func unlockTest(hs *volume.Headers) ([]byte, int, error) { return hs.Unlock(testPass) }

// newTestVolume creates a tagged volume of sectors 4096-byte sectors with
// small dirty regions (so that a test touches many) in memory.
func newTestVolume(t testing.TB, sectors int) *memDevice {
	t.Helper()
	dev := &memDevice{}
	size := int64(sectors) * 4096
	_, _, err := volume.Create(context.Background(), dev, bytes.NewReader(make([]byte, size)), size, volume.CreateOptions{
		SectorSize: 4096, TagSize: 16, RegionSize: 64 << 10,
		KDF:        volume.KDFParams{Time: 1, MemoryKiB: 64, Threads: 1},
		Passphrase: testPass,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return dev
}

func openTestVolume(t testing.TB, dev *memDevice, readOnly bool) *volume.Volume {
	t.Helper()
	v, err := volume.OpenDevice(dev, int64(len(dev.b)), readOnly, unlockTest)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestVolumeStoreIntegrity: a flipped ciphertext byte makes reads of its
// sector fail with the sector named, the neighbours read fine, and a
// whole-sector write repairs it.
func TestVolumeStoreIntegrity(t *testing.T) {
	dev := newTestVolume(t, 64)
	v := openTestVolume(t, dev, false)
	d := fusefile.NewDisk(v, false, t.Logf)
	data := make([]byte, 64*4096)
	rand.Read(data)
	if err := d.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	off := v.Layout().SectorOffset(37) + 100
	dev.mu.Lock()
	dev.b[off] ^= 1
	dev.mu.Unlock()

	got := make([]byte, 4096)
	var ie *volume.IntegrityError
	if err := d.ReadAt(got, 37*4096); !errors.As(err, &ie) || !slices.Equal(ie.SectorNumbers(), []uint64{37}) {
		t.Fatalf("reading the flipped sector: %v, want an IntegrityError for sector 37", err)
	}
	for _, n := range []int64{36, 38} {
		if err := d.ReadAt(got, n*4096); err != nil || !bytes.Equal(got, data[n*4096:(n+1)*4096]) {
			t.Errorf("sector %d next to the bad one: err %v", n, err)
		}
	}
	if st := d.Counters.Snapshot(); !slices.Equal(st.BadSectors, []uint64{37}) {
		t.Errorf("bad sectors counted %v, want [37]", st.BadSectors)
	}
	if err := d.WriteAt(data[37*4096:38*4096], 37*4096); err != nil {
		t.Fatal(err)
	}
	if err := d.ReadAt(got, 37*4096); err != nil || !bytes.Equal(got, data[37*4096:38*4096]) {
		t.Errorf("after rewriting the bad sector: err %v", err)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestVolumeCrashRecovery kills a served volume at a random instant while
// writers write and sync, then opens what the kill left: it is dirty,
// Recover re-tags only marked regions, every tag verifies afterwards, and
// every sector whose write was synced before the kill holds it.
func TestVolumeCrashRecovery(t *testing.T) {
	rounds := 8
	if raceEnabled {
		rounds = 2
	}
	for round := range rounds {
		crashRecoverOnce(t, uint64(round))
	}
}

func crashRecoverOnce(t *testing.T, seed uint64) {
	const sectors, writers = 256, 4 // 16 regions of 16 sectors
	dev := newTestVolume(t, sectors)
	v := openTestVolume(t, dev, false)
	d := fusefile.NewDisk(v, false, t.Logf)

	var (
		crashMu   sync.RWMutex
		durableMu sync.Mutex
		crashed   atomic.Bool
		durable   = map[uint64][]byte{} // sector -> content synced before the crash
		wg        sync.WaitGroup
	)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := mrand.New(mrand.NewPCG(seed, uint64(w)))
			// Each writer owns the sectors ≡ w (mod writers) and writes
			// each once, so a synced sector never changes afterwards.
			var pending []uint64
			pendingData := map[uint64][]byte{}
			for n := uint64(w); n < sectors && !crashed.Load(); n += writers {
				buf := make([]byte, 4096)
				rand.Read(buf)
				binary.LittleEndian.PutUint64(buf, n)
				if err := d.WriteAt(buf, int64(n)*4096); err != nil {
					t.Error(err)
					return
				}
				pending = append(pending, n)
				pendingData[n] = buf
				if r.IntN(4) == 0 {
					if err := d.Sync(); err != nil {
						t.Error(err)
						return
					}
					crashMu.RLock()
					if !crashed.Load() {
						durableMu.Lock() // writers share the read lock, not the map
						for _, p := range pending {
							durable[p] = pendingData[p]
						}
						durableMu.Unlock()
					}
					crashMu.RUnlock()
					pending = pending[:0]
				}
			}
		}()
	}
	// Kill at a random point: after some writes, before the end.
	r := mrand.New(mrand.NewPCG(seed, 99))
	for d.Counters.Snapshot().Writes < uint64(20+r.IntN(150)) {
		if d.Counters.Snapshot().Writes >= sectors {
			break
		}
	}
	crashMu.Lock()
	image := dev.snapshot()
	crashed.Store(true)
	crashMu.Unlock()
	wg.Wait()
	v.Close()

	after := openTestVolume(t, image, false)
	if !after.State().Dirty {
		t.Fatalf("seed %d: a volume killed while written opened clean", seed)
	}
	marked, err := after.DirtyRegions()
	if err != nil {
		t.Fatal(err)
	}
	// A crash of the server leaves mismatched at most the sectors being
	// written at that instant: one per writer here. Recovery names them
	// and, asked to, accepts what they hold.
	rec, err := after.Recover(context.Background(), false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Regions != int64(len(marked)) || rec.Regions == 0 || rec.Regions > 16 || rec.AllRegions {
		t.Errorf("seed %d: Recover checked %d regions (all: %v); %d were marked", seed, rec.Regions, rec.AllRegions, len(marked))
	}
	if rec.Mismatched > writers {
		t.Errorf("seed %d: %d sectors mismatched after a crash with %d writers: %v", seed, rec.Mismatched, writers, rec.BadSectors)
	}
	for _, b := range rec.BadSectors {
		if _, ok := durable[b.Sector]; ok {
			t.Errorf("seed %d: sector %d was synced before the kill but its tag does not match", seed, b.Sector)
		}
	}
	n := rec.Regions
	if rec.Mismatched > 0 {
		after.Close()
		after = openTestVolume(t, image, false)
		rep, err := after.Recover(context.Background(), true, nil)
		if err != nil || rep.Mismatched != rec.Mismatched || !rep.Repaired {
			t.Fatalf("seed %d: Recover with repair = %+v, %v; first found %+v", seed, rep, err, rec)
		}
	}
	res, err := after.Verify(context.Background(), nil, func(b volume.BadSector) {
		t.Errorf("seed %d: sector %d fails its tag after recovery", seed, b.Sector)
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = res
	got := make([]byte, 4096)
	for s, want := range durable {
		if err := after.ReadSectors(got, s); err != nil || !bytes.Equal(got, want) {
			t.Errorf("seed %d: sector %d was synced before the kill but reads back changed (err %v)", seed, s, err)
		}
	}
	t.Logf("seed %d: %d writes, %d synced sectors, %d of 16 regions checked, %d sectors torn", seed, d.Counters.Snapshot().Writes, len(durable), n, rec.Mismatched)
	if err := after.Close(); err != nil {
		t.Fatal(err)
	}
	clean := openTestVolume(t, image, true)
	if clean.State().Dirty {
		t.Errorf("seed %d: still dirty after Recover and Close", seed)
	}
	clean.Close()
}
