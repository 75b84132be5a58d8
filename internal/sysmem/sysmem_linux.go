// Package sysmem reports the memory the machine can spare, for the
// Argon2id limits of volume and luks: a key slot asking for more than that
// is refused before it runs.
package sysmem

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// AvailableKiB reads MemAvailable from /proc/meminfo; 0 if unknown.
func AvailableKiB() uint64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	return parseAvailable(bufio.NewScanner(f))
}

func parseAvailable(sc *bufio.Scanner) uint64 {
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemAvailable:")
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return 0
		}
		return n
	}
	return 0
}
