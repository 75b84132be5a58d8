//go:build !race

package fusefile

const raceEnabled = false
