package sysmem

import (
	"bufio"
	"strings"
	"testing"
)

func TestParseAvailable(t *testing.T) {
	for in, want := range map[string]uint64{
		"MemTotal:       24000000 kB\nMemFree:  100 kB\nMemAvailable:   20123456 kB\n": 20123456,
		"MemTotal: 1 kB\n":                  0,
		"MemAvailable:   lots kB\n":         0,
		"MemAvailable:12 kB\nMemAvailable:": 12,
	} {
		if got := parseAvailable(bufio.NewScanner(strings.NewReader(in))); got != want {
			t.Errorf("%q: %d, want %d", in, got, want)
		}
	}
}

// TestAvailableKiB: this Linux machine reports some memory, less than
// a petabyte.
func TestAvailableKiB(t *testing.T) {
	if n := AvailableKiB(); n == 0 || n > 1<<40 {
		t.Errorf("AvailableKiB() = %d", n)
	}
}
