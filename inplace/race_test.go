//go:build race

package inplace

// raceEnabled: the crash replays are skipped under the race detector,
// which the round-trip tests run the same concurrent code under.
const raceEnabled = true
