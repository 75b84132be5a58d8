//go:build !race

package sector

const raceEnabled = false
