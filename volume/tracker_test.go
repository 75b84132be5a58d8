package volume

import (
	"fmt"
	"maps"
	mrand "math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"
)

// crashModel is a regionLog and a device that model what a crash would
// leave: which regions are durably marked, and which regions hold writes
// that are not yet durable. It fails the test the moment the protocol is
// broken, i.e. when a crash at that point could leave a written sector in
// an unmarked region (its tag would not be re-tagged, and a write that
// was torn would read as corrupt), or when a mark or clear touches a
// region it should not.
type crashModel struct {
	t          testing.TB
	perRegion  uint64
	mu         sync.Mutex
	durable    map[int64]bool // marked on disk
	clearing   map[int64]bool // cleared in memory, on disk at the next Sync
	inflight   map[int64]int  // writes in progress
	unsynced   map[int64]int  // writes completed but not yet synced
	marks      int
	syncs      int
	failMarkAt int    // the n-th markRegions call fails (0: never)
	duringSync func() // runs in the middle of every Sync
}

func newCrashModel(t testing.TB, perRegion uint64) *crashModel {
	return &crashModel{t: t, perRegion: perRegion, durable: map[int64]bool{}, clearing: map[int64]bool{},
		inflight: map[int64]int{}, unsynced: map[int64]int{}}
}

func (m *crashModel) RegionOf(n uint64) int64 { return int64(n / m.perRegion) }

func (m *crashModel) markRegions(regions ...int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.marks++
	if m.marks == m.failMarkAt {
		return fmt.Errorf("injected failure")
	}
	for _, r := range regions {
		m.durable[r] = true
		delete(m.clearing, r)
	}
	return nil
}

func (m *crashModel) clearRegions(regions ...int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range regions {
		if m.inflight[r] > 0 || m.unsynced[r] > 0 {
			m.t.Errorf("region %d cleared with %d writes in progress and %d unsynced", r, m.inflight[r], m.unsynced[r])
		}
		m.clearing[r] = true
	}
	return nil
}

func (m *crashModel) regions(buf []byte, first uint64) []int64 {
	var rs []int64
	for r := m.RegionOf(first); r <= m.RegionOf(first+uint64(len(buf)/512)-1); r++ {
		rs = append(rs, r)
	}
	return rs
}

func (m *crashModel) WriteSectors(buf []byte, first uint64) error {
	rs := m.regions(buf, first)
	m.mu.Lock()
	for _, r := range rs {
		if !m.durable[r] {
			m.t.Errorf("write to region %d before it was durably marked", r)
		}
		m.inflight[r]++
	}
	m.mu.Unlock()
	runtime.Gosched() // let Syncs run while the write is in progress
	m.mu.Lock()
	for _, r := range rs {
		m.inflight[r]--
		m.unsynced[r]++
	}
	m.mu.Unlock()
	return nil
}

// Sync writes the cleared bits, then makes the writes that completed
// before it started durable, as Volume.Sync does (bitmap blocks, then the
// device). Writes that complete while it runs stay unsynced.
func (m *crashModel) Sync() error {
	m.mu.Lock()
	m.syncs++
	for r := range m.clearing {
		if m.inflight[r] > 0 || m.unsynced[r] > 0 {
			m.t.Errorf("region %d's clear reached the disk while it had writes in progress or unsynced", r)
		}
		delete(m.durable, r)
		delete(m.clearing, r)
	}
	covered := maps.Clone(m.unsynced)
	hook := m.duringSync
	m.mu.Unlock()
	runtime.Gosched() // let writes start while the Sync is under way
	if hook != nil {
		hook()
	}
	m.mu.Lock()
	for r, n := range covered {
		m.unsynced[r] -= n
	}
	m.mu.Unlock()
	return nil
}

// tracked runs the model's writes and syncs through a tracker, as
// Volume does its own.
type tracked struct {
	*tracker
	m *crashModel
}

func newTracked(m *crashModel) *tracked { return &tracked{tracker: newTracker(m), m: m} }

func (s *tracked) WriteSectors(buf []byte, first uint64) error {
	return s.write(first, first+uint64(len(buf)/512)-1, func() error { return s.m.WriteSectors(buf, first) })
}

func (s *tracked) Sync() error { return s.sync(s.m.Sync) }

func (m *crashModel) durableRegions() []int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []int64
	for r := range m.durable {
		out = append(out, r)
	}
	slices.Sort(out)
	return out
}

func TestDirtyRegionsSequence(t *testing.T) {
	m := newCrashModel(t, 8)
	s := newTracked(m)
	buf := make([]byte, 3*512)
	// Sectors 7..9 span regions 0 and 1.
	if err := s.WriteSectors(buf, 7); err != nil {
		t.Fatal(err)
	}
	if got := m.durableRegions(); !slices.Equal(got, []int64{0, 1}) {
		t.Fatalf("after a write to sectors 7-9: durable marks %v, want [0 1]", got)
	}
	// A second write to a marked region does not mark again.
	marks := m.marks
	if err := s.WriteSectors(buf[:512], 8); err != nil {
		t.Fatal(err)
	}
	if m.marks != marks {
		t.Error("a write to a marked region marked it again")
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	if len(s.marked()) != 0 {
		t.Errorf("after Sync, still marked: %v", s.marked())
	}
	// The clear is on disk only after the next Sync, and not before.
	if got := m.durableRegions(); !slices.Equal(got, []int64{0, 1}) {
		t.Errorf("cleared regions reached the disk before the next Sync: %v", got)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := m.durableRegions(); len(got) != 0 {
		t.Errorf("after two Syncs, durable marks %v, want none", got)
	}
}

// TestDirtyRegionsWriteDuringSync: a write that lands while a Sync runs
// keeps its region marked.
func TestDirtyRegionsWriteDuringSync(t *testing.T) {
	m := newCrashModel(t, 8)
	s := newTracked(m)
	buf := make([]byte, 512)
	if err := s.WriteSectors(buf, 0); err != nil {
		t.Fatal(err)
	}
	m.duringSync = func() {
		m.duringSync = nil
		if err := s.WriteSectors(buf, 3); err != nil {
			t.Error(err)
		}
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := s.marked(); !slices.Equal(got, []int64{0}) {
		t.Fatalf("after a Sync that a write to region 0 raced, marked %v, want [0]", got)
	}
	s.Sync()
	s.Sync()
	if got := m.durableRegions(); len(got) != 0 {
		t.Errorf("durable marks %v after quiescent Syncs", got)
	}
}

func TestDirtyRegionsMarkFailure(t *testing.T) {
	m := newCrashModel(t, 8)
	m.failMarkAt = 1
	s := newTracked(m)
	if err := s.WriteSectors(make([]byte, 512), 0); err == nil {
		t.Fatal("a write whose region could not be marked succeeded")
	}
	if err := s.WriteSectors(make([]byte, 512), 0); err != nil {
		t.Fatalf("the next write did not retry the mark: %v", err)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
}

// TestDirtyRegionsConcurrent runs writers and syncers at once; crashModel
// fails the test at any point where a crash could lose track of a write.
func TestDirtyRegionsConcurrent(t *testing.T) {
	m := newCrashModel(t, 4)
	s := newTracked(m)
	var wg sync.WaitGroup
	rounds := 2000
	if raceEnabled {
		rounds = 300
	}
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := mrand.New(mrand.NewPCG(uint64(w), 2))
			buf := make([]byte, 16*512)
			for range rounds {
				n := 1 + r.IntN(16)
				if err := s.WriteSectors(buf[:n*512], uint64(r.IntN(64))); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	stop := make(chan struct{})
	syncDone := make(chan struct{})
	go func() {
		defer close(syncDone)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := s.Sync(); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	wg.Wait()
	close(stop)
	<-syncDone
	// Quiescent: two Syncs leave nothing marked.
	s.Sync()
	s.Sync()
	if got := m.durableRegions(); len(got) != 0 {
		t.Errorf("after the writers stopped and two Syncs, durable marks %v", got)
	}
	if m.syncs < 10 {
		t.Logf("only %d syncs ran during the writes", m.syncs)
	}
}

// marked (for the tests) returns the regions currently marked dirty, in order.
func (t *tracker) marked() []int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []int64
	for r := range t.regions {
		out = append(out, r)
	}
	slices.Sort(out)
	return out
}
