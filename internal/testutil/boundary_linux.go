// Package testutil holds helpers shared by the tests of several packages.
package testutil

import (
	"testing"

	"golang.org/x/sys/unix"
)

// GuardedBuffers returns two n-byte slices in fresh memory: end finishes
// exactly where a PROT_NONE page begins, and start begins exactly where a
// PROT_NONE page ends. Code that reads or writes one byte past either end of
// them crashes the test instead of silently touching its neighbour's memory.
// The mappings are released when the test ends.
func GuardedBuffers(t testing.TB, n int) (end, start []byte) {
	t.Helper()
	page := unix.Getpagesize()
	dataPages := (n + page - 1) / page
	if dataPages == 0 {
		dataPages = 1
	}
	// Layout: [guard][data pages][guard], used twice: once with the slice
	// pushed to the upper guard, once starting at the lower guard.
	mapOne := func() []byte {
		m, err := unix.Mmap(-1, 0, (dataPages+2)*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
		if err != nil {
			t.Fatalf("mmap: %v", err)
		}
		if err := unix.Mprotect(m[:page], unix.PROT_NONE); err != nil {
			t.Fatalf("mprotect: %v", err)
		}
		if err := unix.Mprotect(m[(dataPages+1)*page:], unix.PROT_NONE); err != nil {
			t.Fatalf("mprotect: %v", err)
		}
		t.Cleanup(func() { _ = unix.Munmap(m) })
		return m
	}
	a := mapOne()
	hi := (dataPages + 1) * page
	end = a[hi-n : hi : hi]
	b := mapOne()
	start = b[page : page+n : page+n]
	return end, start
}
