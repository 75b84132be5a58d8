//go:build !race

package inplace

const raceEnabled = false
