//go:build race

package blockdev

// raceEnabled shrinks the device tests: the race detector slows the
// pure-Go fallback paths tens of times.
const raceEnabled = true
