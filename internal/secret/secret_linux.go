// Package secret keeps key material out of swap, core dumps and other
// processes' reach, the way cryptsetup does: the whole process memory is
// locked (mlockall), the process is made non-dumpable, and core files are
// disabled. Call Protect before any key is read.
//
// Locking all memory rather than single buffers covers what single buffers
// cannot: Go copies values across stacks and into registers' spill slots,
// and the key schedules live inside ordinary Go structs.
package secret

import (
	"errors"
	"fmt"
	"sync"

	"golang.org/x/sys/unix"
)

var (
	once       sync.Once
	protectErr error
)

// Protect locks current and future memory, disables core dumps
// (RLIMIT_CORE 0) and marks the process non-dumpable (no core, no ptrace or
// /proc/PID/mem access by other unprivileged processes). It runs once per
// process; later calls return the first result. Only the memory lock can
// fail for lack of privilege (RLIMIT_MEMLOCK without CAP_IPC_LOCK): the
// returned error says so, and the other protections still apply.
func Protect() error {
	once.Do(func() {
		if err := unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{Cur: 0, Max: 0}); err != nil {
			protectErr = fmt.Errorf("cannot disable core dumps: %w", err)
			return
		}
		if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
			protectErr = fmt.Errorf("cannot make the process non-dumpable: %w", err)
			return
		}
		// MCL_ONFAULT locks pages as they are touched instead of
		// populating every mapping at once: the Go runtime reserves
		// large heap arenas, and populating them would add over
		// 100 MiB of resident memory to every run. Kernels before 4.4
		// lack it (EINVAL); they lock everything up front.
		err := unix.Mlockall(unix.MCL_CURRENT | unix.MCL_FUTURE | unix.MCL_ONFAULT)
		if errors.Is(err, unix.EINVAL) {
			err = unix.Mlockall(unix.MCL_CURRENT | unix.MCL_FUTURE)
		}
		if err != nil {
			protectErr = fmt.Errorf("cannot lock memory (%w): keys may be written to swap", err)
		}
	})
	return protectErr
}

// Wipe overwrites b with zeros. Use it on every buffer that held a key or
// passphrase once it is no longer needed.
func Wipe(b []byte) {
	clear(b)
}
