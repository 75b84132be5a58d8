package bench

import (
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// pinned holds the calling goroutine on its OS thread and, where the
// kernel permits, that thread on one CPU, for single-core figures. undo
// restores the thread's CPU set and releases it.
type pinned struct {
	cpu  int // the CPU the thread is bound to, -1 if sched_setaffinity failed
	old  unix.CPUSet
	undo func()
}

func pin() *pinned {
	runtime.LockOSThread()
	p := &pinned{cpu: -1}
	p.undo = runtime.UnlockOSThread
	if err := unix.SchedGetaffinity(0, &p.old); err != nil {
		return p
	}
	// The last allowed CPU: on small machines CPU 0 takes most interrupts.
	target := -1
	for i := range len(p.old) * 64 {
		if p.old.IsSet(i) {
			target = i
		}
	}
	var set unix.CPUSet
	set.Set(target)
	if target < 0 || unix.SchedSetaffinity(0, &set) != nil {
		return p
	}
	p.cpu = target
	p.undo = func() {
		_ = unix.SchedSetaffinity(0, &p.old)
		runtime.UnlockOSThread()
	}
	return p
}

// threadClock is the calling thread's CPU time. It is valid only while the
// goroutine stays locked to that thread.
type threadClock struct{}

func (threadClock) now() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		panic("bench: CLOCK_THREAD_CPUTIME_ID: " + err.Error())
	}
	return time.Duration(ts.Nano())
}

func (threadClock) name() string { return "thread-cpu" }

// singleCoreClock is the clock for pinned, single-core figures.
func singleCoreClock() clock {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return &wallClock{start: time.Now()}
	}
	return threadClock{}
}

// lockMemory locks the process's current and future memory, so the kernel
// does not page out a buffer between two runs (some VMs run proactive
// reclaim, such as DAMON's pageout scheme, that takes pages idle for less
// than a second). It needs CAP_IPC_LOCK or a large enough RLIMIT_MEMLOCK;
// without them the run goes on unlocked.
func lockMemory() (locked bool, undo func()) {
	if unix.Mlockall(unix.MCL_CURRENT|unix.MCL_FUTURE) != nil {
		return false, func() {}
	}
	return true, func() { _ = unix.Munlockall() }
}
