//go:build !linux

package bench

import (
	"runtime"
	"time"
)

type pinned struct {
	cpu  int
	undo func()
}

// pin holds the goroutine on its OS thread; binding the thread to a CPU is
// implemented for Linux only.
func pin() *pinned {
	runtime.LockOSThread()
	return &pinned{cpu: -1, undo: runtime.UnlockOSThread}
}

func singleCoreClock() clock { return &wallClock{start: time.Now()} }

// lockMemory is implemented for Linux only.
func lockMemory() (locked bool, undo func()) { return false, func() {} }
