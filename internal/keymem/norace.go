//go:build !race

package keymem

const raceEnabled = false
