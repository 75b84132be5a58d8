// Package words writes counts and lists for messages, one way for every
// package: "1 pass", "3 passes", "0, 2, 5".
package words

import (
	"fmt"
	"strings"
)

// Plural formats a count with a noun: "1 bad sector", "2 bad sectors",
// "3 passes".
func Plural(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	if strings.HasSuffix(noun, "s") {
		return fmt.Sprintf("%d %ses", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// List joins numbers with commas: "0, 2, 5", or "none".
func List[T int | int64 | uint64](xs []T) string {
	if len(xs) == 0 {
		return "none"
	}
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ", ")
}
