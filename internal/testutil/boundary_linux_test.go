package testutil

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"unsafe"
)

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

// sink keeps the out-of-bounds loads below from being optimised away.
var sink byte

// TestGuardedBuffersFault proves the guards are there: touching one byte past
// either end kills a child process with a memory fault.
func TestGuardedBuffersFault(t *testing.T) {
	if which := os.Getenv("TESTUTIL_FAULT"); which != "" {
		end, start := GuardedBuffers(t, 100)
		if which == "end" {
			end = end[:cap(end)]
			sink = *(*byte)(unsafe.Add(unsafe.Pointer(&end[len(end)-1]), 1))
		} else {
			sink = *(*byte)(unsafe.Add(unsafe.Pointer(&start[0]), -1))
		}
		os.Exit(0) // not reached when the guard works
	}
	for _, which := range []string{"end", "start"} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestGuardedBuffersFault$")
		cmd.Env = append(os.Environ(), "TESTUTIL_FAULT="+which)
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "fault") {
			t.Errorf("%s: reading past the buffer did not fault (err %v):\n%s", which, err, out)
		}
	}
}
