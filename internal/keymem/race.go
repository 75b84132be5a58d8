//go:build race

package keymem

const raceEnabled = true
