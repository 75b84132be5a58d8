package fusefile

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"testing"
)

// memStore is a Store over plaintext in memory that can mark sectors bad,
// as a tagged volume reports sectors whose tags fail. It checks that every
// call is whole-sector and in range.
type memStore struct {
	t    testing.TB
	ss   int
	data []byte
	mu   sync.Mutex
	bad  map[uint64]bool
	// calls counts WriteSectors calls, to see read-modify-write happen.
	writes, syncs int
}

func newMemStore(t testing.TB, ss, sectors int) *memStore {
	data := make([]byte, ss*sectors)
	rand.Read(data)
	return &memStore{t: t, ss: ss, data: data, bad: map[uint64]bool{}}
}

func (m *memStore) SectorSize() int { return m.ss }
func (m *memStore) Sectors() uint64 { return uint64(len(m.data) / m.ss) }

func (m *memStore) span(buf []byte, first uint64) []byte {
	if len(buf)%m.ss != 0 || len(buf) == 0 {
		m.t.Errorf("store called with %d bytes, not whole sectors", len(buf))
	}
	start := int(first) * m.ss
	if start+len(buf) > len(m.data) {
		m.t.Errorf("store called beyond the end: sector %d, %d bytes", first, len(buf))
	}
	return m.data[start : start+len(buf)]
}

func (m *memStore) ReadSectors(buf []byte, first uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var bad []uint64
	for i := range uint64(len(buf) / m.ss) {
		if m.bad[first+i] {
			bad = append(bad, first+i)
		}
	}
	if bad != nil {
		return fmt.Errorf("read: %w", badSectors(bad))
	}
	copy(buf, m.span(buf, first))
	return nil
}

func (m *memStore) WriteSectors(buf []byte, first uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	copy(m.span(buf, first), buf)
	m.writes++
	return nil
}

func (m *memStore) Sync() error {
	m.mu.Lock()
	m.syncs++
	m.mu.Unlock()
	return nil
}
func (m *memStore) Close() error { return nil }

// TestDeviceByteRanges writes and reads every alignment around sector
// boundaries and checks the store against a reference copy.
func TestDeviceByteRanges(t *testing.T) {
	for _, ss := range []int{512, 4096} {
		t.Run(fmt.Sprint(ss), func(t *testing.T) {
			store := newMemStore(t, ss, 16)
			want := bytes.Clone(store.data)
			d := NewDisk(store, false, t.Logf)
			offsets := []int{0, 1, ss - 1, ss, ss + 1, 2*ss - 1, 3*ss + 7}
			lengths := []int{1, 2, ss - 1, ss, ss + 1, 2 * ss, 3*ss - 5, 5 * ss}
			for _, off := range offsets {
				for _, n := range lengths {
					p := make([]byte, n)
					rand.Read(p)
					if err := d.WriteAt(p, int64(off)); err != nil {
						t.Fatalf("WriteAt(%d bytes at %d): %v", n, off, err)
					}
					copy(want[off:], p)
					if !bytes.Equal(store.data, want) {
						t.Fatalf("after WriteAt(%d bytes at %d) the store differs from the reference", n, off)
					}
					got := make([]byte, n)
					if err := d.ReadAt(got, int64(off)); err != nil {
						t.Fatalf("ReadAt(%d at %d): %v", n, off, err)
					}
					if !bytes.Equal(got, p) {
						t.Fatalf("ReadAt(%d at %d) returned other bytes than written", n, off)
					}
				}
			}
			// The last byte, and the whole device at once.
			if err := d.WriteAt([]byte{0xAB}, d.Size()-1); err != nil {
				t.Fatal(err)
			}
			want[len(want)-1] = 0xAB
			all := make([]byte, d.Size())
			if err := d.ReadAt(all, 0); err != nil || !bytes.Equal(all, want) {
				t.Fatalf("whole-device read: err %v, equal %v", err, bytes.Equal(all, want))
			}
		})
	}
}

func TestDeviceOutOfRange(t *testing.T) {
	store := newMemStore(t, 512, 4)
	d := NewDisk(store, false, t.Logf)
	for _, c := range []struct {
		off int64
		n   int
	}{{2048, 1}, {2047, 2}, {-1, 1}, {4096, 0}} {
		if err := d.ReadAt(make([]byte, c.n), c.off); !errors.Is(err, ErrOutOfRange) {
			t.Errorf("ReadAt(%d at %d) = %v, want ErrOutOfRange", c.n, c.off, err)
		}
		if err := d.WriteAt(make([]byte, c.n), c.off); !errors.Is(err, ErrOutOfRange) {
			t.Errorf("WriteAt(%d at %d) = %v, want ErrOutOfRange", c.n, c.off, err)
		}
	}
}

func TestDeviceReadOnly(t *testing.T) {
	store := newMemStore(t, 512, 4)
	before := bytes.Clone(store.data)
	d := NewDisk(store, true, t.Logf)
	if err := d.WriteAt([]byte{1}, 0); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("WriteAt on a read-only device = %v, want ErrReadOnly", err)
	}
	if !bytes.Equal(store.data, before) {
		t.Fatal("read-only device changed the store")
	}
}

// TestDeviceIntegrityErrors: a request touching a bad sector fails whole,
// returns no plaintext, and is counted and logged once per sector; a
// partial write into a bad sector is refused rather than re-tagging
// unverified bytes.
func TestDeviceIntegrityErrors(t *testing.T) {
	store := newMemStore(t, 512, 64)
	store.bad[10] = true
	var logged []string
	d := NewDisk(store, false, func(f string, args ...any) { logged = append(logged, fmt.Sprintf(f, args...)) })

	p := bytes.Repeat([]byte{0xEE}, 4096)
	var bs IntegrityFailure
	if err := d.ReadAt(p, 8*512); !errors.As(err, &bs) {
		t.Fatalf("reading sectors 8-15 = %v, want an IntegrityError", err)
	}
	if !bytes.Equal(p, make([]byte, len(p))) {
		t.Error("a failed read left bytes in the caller's buffer")
	}
	if err := d.ReadAt(p[:1], 10*512+100); err == nil {
		t.Error("a one-byte read inside the bad sector succeeded")
	}
	if err := d.ReadAt(p, 0); err != nil {
		t.Errorf("reading sectors 0-7 next to the bad one: %v", err)
	}
	if err := d.ReadAt(p[:512], 11*512); err != nil {
		t.Errorf("reading sector 11: %v", err)
	}
	writes := store.writes
	if err := d.WriteAt([]byte{1, 2, 3}, 10*512+5); err == nil {
		t.Error("a partial write into the bad sector succeeded")
	}
	if store.writes != writes {
		t.Error("a partial write into the bad sector reached the store")
	}
	// A whole-sector write replaces the bad sector: that is how a
	// filesystem repairs it.
	if err := d.WriteAt(make([]byte, 512), 10*512); err != nil {
		t.Errorf("overwriting the bad sector whole: %v", err)
	}

	st := d.Counters.Snapshot()
	if st.IntegrityErrors != 3 {
		t.Errorf("IntegrityErrors = %d, want 3 (two reads, one refused patch)", st.IntegrityErrors)
	}
	if len(st.BadSectors) != 1 || st.BadSectors[0] != 10 {
		t.Errorf("BadSectors = %v, want [10]", st.BadSectors)
	}
	if len(logged) != 1 || !bytes.Contains([]byte(logged[0]), []byte("sector 10 ")) {
		t.Errorf("log = %q, want one line naming sector 10", logged)
	}
}

// TestDeviceConcurrent runs writers on adjacent byte ranges that share
// sectors, so every write is a read-modify-write racing its neighbours'.
// Each writer must always read back its own latest bytes: a lost update
// (a neighbour writing back a stale copy of our bytes) fails the test.
func TestDeviceConcurrent(t *testing.T) {
	const ss, span = 512, 300 // ranges straddle sector boundaries
	const writers = 16
	store := newMemStore(t, ss, writers*span/ss+1)
	d := NewDisk(store, false, t.Logf)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			off := int64(w * span)
			got := make([]byte, span)
			rounds := 500
			if raceEnabled {
				rounds = 50
			}
			for i := range rounds {
				p := bytes.Repeat([]byte{byte(i)}, span)
				if err := d.WriteAt(p, off); err != nil {
					t.Error(err)
					return
				}
				if err := d.ReadAt(got, off); err != nil {
					t.Error(err)
					return
				}
				if !bytes.Equal(got, p) {
					t.Errorf("writer %d, round %d: read back other bytes than it wrote (lost update)", w, i)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// badSectors is an IntegrityFailure, as a store with tags returns one.
type badSectors []uint64

func (b badSectors) Error() string {
	return fmt.Sprintf("integrity check failed for sectors %v", []uint64(b))
}
func (b badSectors) SectorNumbers() []uint64 { return b }
