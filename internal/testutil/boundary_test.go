package testutil

import "testing"

func TestGuardedBuffers(t *testing.T) {
	for _, n := range []int{1, 16, 4095, 4096, 4097, 12345} {
		end, start := GuardedBuffers(t, n)
		if len(end) != n || cap(end) != n || len(start) != n || cap(start) != n {
			t.Fatalf("n=%d: lengths %d/%d, caps %d/%d", n, len(end), len(start), cap(end), cap(start))
		}
		// Every byte inside is usable.
		for i := range end {
			end[i] = byte(i)
			start[i] = byte(i)
		}
	}
}
