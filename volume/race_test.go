//go:build race

package volume

// raceEnabled: the race detector slows the memory scan of
// TestNoKeysInMemoryAfterClose a hundredfold; it is skipped there.
const raceEnabled = true
