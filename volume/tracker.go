package volume

import (
	"fmt"
	"sort"
	"sync"
)

// The writer protocol of docs/FORMAT.md ("Protocol for writers"), step by
// step for concurrent writes: a region is marked dirty (durably) before
// its first write, and cleared once a sync has made every write to it
// durable. After a crash, every sector written since its region's last
// clear lies in a marked region, so recovery checks every sector a crash
// may have torn, and no sector that a sync covered is touched. Volume
// runs every WriteSectors and Sync through its tracker.

// A regionLog records marks durably: the Volume itself, or a test model.
type regionLog interface {
	RegionOf(n uint64) int64
	// markRegions records the regions as dirty, durably, before it
	// returns.
	markRegions(regions ...int64) error
	// clearRegions records the regions as clean; the record reaches the
	// disk with the next sync (a region left marked by a crash only
	// costs a check).
	clearRegions(regions ...int64) error
}

// tracker follows which regions are marked and which writes are in
// progress on each.
type tracker struct {
	log regionLog

	mu      sync.Mutex
	regions map[int64]*regionState // regions marked or being marked
}

func newTracker(log regionLog) *tracker {
	return &tracker{log: log, regions: map[int64]*regionState{}}
}

// regionState follows one region that is marked dirty, or being marked.
type regionState struct {
	marking  chan struct{} // closed when the mark is durable (or failed)
	markErr  error
	inflight int    // writes in progress
	started  uint64 // writes ever started, to see writes that raced a Sync
}

// write marks the regions of sectors first..last (waiting for the mark
// to be durable), then runs do, the write itself.
func (t *tracker) write(first, last uint64, do func() error) error {
	lo, hi := t.log.RegionOf(first), t.log.RegionOf(last)
	if err := t.begin(lo, hi); err != nil {
		return err
	}
	err := do()
	t.mu.Lock()
	for r := lo; r <= hi; r++ {
		t.regions[r].inflight--
	}
	t.mu.Unlock()
	return err
}

// begin registers a write on regions lo..hi and returns once all of them
// are durably marked.
func (t *tracker) begin(lo, hi int64) error {
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
		err = t.log.markRegions(mine...)
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

// sync runs do, which makes the writes durable, then clears the regions
// whose every write it covered: those with no write in progress when it
// started and none started since.
func (t *tracker) sync(do func() error) error {
	t.mu.Lock()
	candidates := map[int64]uint64{}
	for r, rs := range t.regions {
		if rs.inflight == 0 && isClosed(rs.marking) && rs.markErr == nil {
			candidates[r] = rs.started
		}
	}
	t.mu.Unlock()

	if err := do(); err != nil {
		return err
	}

	// The lock is held across clearRegions: a write that arrives now
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
	return t.log.clearRegions(clean...)
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
