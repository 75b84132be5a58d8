package luks

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// availableMemoryKiB reads MemAvailable from /proc/meminfo; 0 if unknown.
func availableMemoryKiB() uint64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
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
