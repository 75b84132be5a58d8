//go:build race

package sector

// raceEnabled: under the race detector sync.Pool drops items at random,
// so a path that takes scratch from a pool (the portable XTS code)
// allocates now and then.
const raceEnabled = true
