package sector

import (
	"testing"

	"golang.org/x/sys/unix"
)

// contextSwitches is the process's voluntary and involuntary context
// switches so far.
func contextSwitches(tb testing.TB) int64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return ru.Nvcsw + ru.Nivcsw
}
