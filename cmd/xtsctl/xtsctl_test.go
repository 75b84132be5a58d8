package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/xtsctl/xtsctl/disk"
	"github.com/xtsctl/xtsctl/internal/devmapper"
	"github.com/xtsctl/xtsctl/internal/testhooks"
)

// testKDF are the Argon2id costs of key slots made in tests without
// explicit --kdf-* flags: tiny, so that a test does not spend a second and
// a gigabyte per passphrase. Explicit flags are honoured (and tested).
var testKDF = disk.Argon2{Time: 1, MemoryKiB: 64, Threads: 1}

// TestMain lets the test binary run as the xtsctl command, so scripts (and
// tests that start xtsctl as a process) exercise the real main path.
func TestMain(m *testing.M) {
	testOnlyKDF["volume"] = testKDF
	testscript.Main(m, map[string]func(){
		"xtsctl": func() {
			// The tests that run xtsctl as a process test the fuse
			// backend: --backend auto must pick it on hosts with
			// device-mapper too. The dm backend is tested in
			// process (backend_dm_linux_test.go) and in a VM.
			testhooks.DMUnavailable = fmt.Errorf("%w: hidden from tests that run xtsctl as a process", devmapper.ErrUnavailable)
			// No controlling terminal, as in CI, also when the tests
			// run from one: a passphrase prompt on /dev/tty must not wait.
			syscall.Setsid()
			if os.Getenv(laterFormatEnv) != "" {
				disk.Register(laterFormat{})
			}
			// A test can stop an in-place run at a named moment with
			// SIGKILL, as a crash there would (killinplace_test.go):
			// "STEP", or "STEP:N" for its N-th time. Or pause it there
			// until the file it makes is removed.
			if at, pauseAt := os.Getenv(killAtEnv), os.Getenv(pauseAtEnv); at != "" || pauseAt != "" {
				at, nth, _ := strings.Cut(at, ":")
				times, _ := strconv.Atoi(nth)
				testhooks.InPlaceStep = func(step string) {
					if step == at {
						if times--; times <= 0 {
							syscall.Kill(os.Getpid(), syscall.SIGKILL)
						}
					}
					if step == pauseAt {
						pauseAt = "" // once
						pauseHere(os.Getenv(pauseFileEnv))
					}
				}
			}
			// The real calibration, for tests that compare it
			// (kdfcal_test.go).
			if os.Getenv(realKDFEnv) == "1" {
				clear(testOnlyKDF)
			}
			os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
		},
	})
}

// TestScripts runs testdata/script/*.txtar: CLI behaviour, messages and exit codes.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		RequireExplicitExec: true,
		Cmds:                scriptCmds,
		Setup:               scriptSetup,
		Condition:           scriptCondition,
	})
}

// scriptSetup and scriptCondition, where the system has them
// (scriptcmds_linux_test.go): a run directory per script, [serving].
var (
	scriptSetup     func(*testscript.Env) error
	scriptCondition func(string) (bool, error)
)

// pauseHere makes the file path and waits until it is removed (a minute
// at most), so that a test can act while an in-place run stands still at
// a known moment.
func pauseHere(path string) {
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		return
	}
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(path); err != nil {
			return
		}
	}
}
