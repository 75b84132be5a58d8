// Package bytesize writes sizes for people, in binary units (KiB = 1024
// bytes), the one way xtsctl's messages, tables and errors show them.
package bytesize

import "fmt"

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
