//go:build race

package volume

// raceEnabled: the race detector slows the memory scan of
// TestNoKeysInMemoryAfterClose a hundredfold (it is skipped there), and
// the tracker's concurrency test (it runs fewer rounds).
const raceEnabled = true
