// Package bytesize writes sizes for people, in binary units (KiB = 1024
// bytes), the one way xtsctl's messages, tables and errors show them, and
// reads the sizes people give (1G, 512M, 4096).
package bytesize

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Human rounds n to one decimal of the largest binary unit it reaches:
// "512 B", "1.5 KiB", "16.0 MiB".
func Human(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// Exact writes n in the largest binary unit that divides it: "4 GiB",
// "64 MiB", "3 KiB", "1000 bytes".
func Exact(n int64) string {
	for _, u := range []struct {
		shift uint
		name  string
	}{{60, "EiB"}, {50, "PiB"}, {40, "TiB"}, {30, "GiB"}, {20, "MiB"}, {10, "KiB"}} {
		if n >= 1<<u.shift && n%(1<<u.shift) == 0 {
			return fmt.Sprintf("%d %s", n>>u.shift, u.name)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}

// Parse reads a size as truncate(1) does: a number of bytes, or a number
// with a unit K, M, G, T (powers of 1024, also written KiB...) or KB, MB,
// GB, TB (powers of 1000).
func Parse(s string) (int64, error) {
	num := strings.TrimRightFunc(s, func(r rune) bool { return r < '0' || r > '9' })
	unit := s[len(num):]
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("invalid size %q (want e.g. 1G, 512M, 4096)", s)
	}
	mult := map[string]int64{"": 1, "B": 1,
		"K": 1 << 10, "KiB": 1 << 10, "KB": 1e3,
		"M": 1 << 20, "MiB": 1 << 20, "MB": 1e6,
		"G": 1 << 30, "GiB": 1 << 30, "GB": 1e9,
		"T": 1 << 40, "TiB": 1 << 40, "TB": 1e12,
	}[unit]
	if mult == 0 {
		return 0, fmt.Errorf("invalid size %q: unknown unit %q (want K, M, G or T)", s, unit)
	}
	if n > math.MaxInt64/mult {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return n * mult, nil
}

// ParseKiB reads a memory size in KiB: a plain number counts KiB (as
// cryptsetup's --pbkdf-memory), a number with a unit is read by Parse and
// must be a whole number of KiB below 4 TiB.
func ParseKiB(s string) (uint32, error) {
	if n, err := strconv.ParseUint(s, 10, 32); err == nil {
		return uint32(n), nil
	}
	b, err := Parse(s)
	if err != nil {
		return 0, err
	}
	if b%1024 != 0 || b/1024 > math.MaxUint32 {
		return 0, fmt.Errorf("%s is not a whole number of KiB below 4 TiB", s)
	}
	return uint32(b / 1024), nil
}
