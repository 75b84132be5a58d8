package serve

import (
	"fmt"
	"sort"
	"sync"
)

// A RegionLog is a volume's durable record of dirty regions (dm-integrity's
// bitmap mode): after a crash, only the sectors of the regions it lists can
// hold data whose tags were not written with it, and only those are
// re-tagged.
type RegionLog interface {
	// RegionOf returns the region holding sector n.
	RegionOf(n uint64) int64
	// MarkRegionsDirty records the regions as dirty, durably, before it
	// returns.
	MarkRegionsDirty(regions ...int64) error
	// ClearRegions records the regions as clean; the record reaches the
	// disk with the store's next Sync (a region left marked by a crash
	// only costs a re-tag).
	ClearRegions(regions ...int64) error
}

// TrackDirtyRegions wraps store so that its writes follow the dirty-region
// protocol: a region is marked dirty (durably) before its first write, and
// cleared once a Sync has made every write to it durable. After a crash,
// every sector written since its region's last clear lies in a marked
// region, so re-tagging the marked regions makes every tag match its data
// again, while no sector that a Sync covered is touched.
func TrackDirtyRegions(store Store, log RegionLog) Store {
	return &trackedStore{Store: store, log: log, regions: map[int64]*regionState{}}
}

type trackedStore struct {
	Store
	log RegionLog

	mu      sync.Mutex
	regions map[int64]*regionState // regions marked or being marked
}

// regionState follows one region that is marked dirty, or being marked.
type regionState struct {
	marking  chan struct{} // closed when the mark is durable (or failed)
	markErr  error
	inflight int    // writes in progress
	started  uint64 // writes ever started, to see writes that raced a Sync
}

func (t *trackedStore) regionSpan(buf []byte, first uint64) (lo, hi int64) {
	last := first + uint64(len(buf)/t.SectorSize()) - 1
	return t.log.RegionOf(first), t.log.RegionOf(last)
}

// WriteSectors marks the regions the write touches (waiting for the mark to
// be durable), then writes.
func (t *trackedStore) WriteSectors(buf []byte, first uint64) error {
	lo, hi := t.regionSpan(buf, first)
	if err := t.begin(lo, hi); err != nil {
		return err
	}
	err := t.Store.WriteSectors(buf, first)
	t.mu.Lock()
	for r := lo; r <= hi; r++ {
		t.regions[r].inflight--
	}
	t.mu.Unlock()
	return err
}

// begin registers a write on regions lo..hi and returns once all of them
// are durably marked.
func (t *trackedStore) begin(lo, hi int64) error {
	t.mu.Lock()
	var mine []int64 // regions this write marks
	var waits []*regionState
	for r := lo; r <= hi; r++ {
		rs := t.regions[r]
		if rs == nil {
			rs = &regionState{marking: make(chan struct{})}
			t.regions[r] = rs
			mine = append(mine, r)
		} else {
			waits = append(waits, rs)
		}
		rs.inflight++
		rs.started++
	}
	t.mu.Unlock()

	var err error
	if len(mine) > 0 {
		err = t.log.MarkRegionsDirty(mine...)
		t.mu.Lock()
		for _, r := range mine {
			rs := t.regions[r]
			rs.markErr = err
			close(rs.marking)
			if err != nil {
				// Forget it, so that the next write tries again.
				delete(t.regions, r)
			}
		}
		t.mu.Unlock()
	}
	for _, rs := range waits {
		<-rs.marking
		if rs.markErr != nil && err == nil {
			err = rs.markErr
		}
	}
	if err != nil {
		t.mu.Lock()
		for r := lo; r <= hi; r++ {
			if rs := t.regions[r]; rs != nil {
				rs.inflight--
			}
		}
		t.mu.Unlock()
		return fmt.Errorf("mark regions %d-%d dirty: %w", lo, hi, err)
	}
	return nil
}

// Sync makes the writes durable, then clears the regions whose every write
// the sync covered: those with no write in progress when it started and
// none started since.
func (t *trackedStore) Sync() error {
	t.mu.Lock()
	candidates := map[int64]uint64{}
	for r, rs := range t.regions {
		if rs.inflight == 0 && isClosed(rs.marking) && rs.markErr == nil {
			candidates[r] = rs.started
		}
	}
	t.mu.Unlock()

	if err := t.Store.Sync(); err != nil {
		return err
	}

	// The lock is held across ClearRegions: a write that arrives now
	// must find its region unmarked only once the clear is recorded, so
	// that its own mark comes after the clear and wins.
	t.mu.Lock()
	defer t.mu.Unlock()
	var clean []int64
	for r, started := range candidates {
		if rs := t.regions[r]; rs != nil && rs.inflight == 0 && rs.started == started {
			clean = append(clean, r)
			delete(t.regions, r)
		}
	}
	if len(clean) == 0 {
		return nil
	}
	sort.Slice(clean, func(i, j int) bool { return clean[i] < clean[j] })
	return t.log.ClearRegions(clean...)
}

// Marked returns the regions currently marked dirty, in order (for tests
// and status).
func (t *trackedStore) Marked() []int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []int64
	for r := range t.regions {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
