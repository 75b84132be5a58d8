//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/xtsctl/xtsctl/blockdev"
	"github.com/xtsctl/xtsctl/internal/mount"
	"golang.org/x/sys/unix"
)

// Scripts that open images get their own run directory, the condition
// [serving] (root, FUSE, loop devices), and commands that make what a
// mistake needs: a passphrase source that must never be reached, a
// read-only filesystem.
func init() {
	scriptSetup = func(env *testscript.Env) error {
		// Short: a control socket's path must fit in 108 bytes.
		run, err := os.MkdirTemp("/tmp", "xs")
		if err != nil {
			return err
		}
		env.Setenv("XTSCTL_RUNDIR", run)
		env.Defer(func() {
			// Whatever a failed script left open is closed: its
			// server killed, then close cleans up after it.
			des, _ := os.ReadDir(run)
			for _, de := range des {
				if !de.IsDir() || strings.HasPrefix(de.Name(), ".") {
					continue
				}
				var st struct {
					PID int `json:"pid"`
				}
				if b, err := os.ReadFile(filepath.Join(run, de.Name(), "state.json")); err == nil && json.Unmarshal(b, &st) == nil && st.PID > 0 {
					syscall.Kill(st.PID, syscall.SIGKILL)
				}
				c := exec.Command("xtsctl", "close", de.Name())
				c.Env = append(os.Environ(), "XTSCTL_RUNDIR="+run)
				c.Run()
			}
			os.RemoveAll(run)
			// What a failed script mounted itself in its work directory
			// (or a close that failed left) goes too, deepest first, so
			// that no loop device stays held after the test.
			if ms, err := mount.List(); err == nil {
				for i := len(ms) - 1; i >= 0; i-- {
					if strings.HasPrefix(ms[i].Point, env.WorkDir+"/") {
						unix.Unmount(ms[i].Point, unix.MNT_DETACH)
					}
				}
			}
		})
		return nil
	}
	scriptCondition = func(cond string) (bool, error) {
		switch cond {
		case "serving":
			return os.Geteuid() == 0 && blockdev.Available() == nil, nil
		}
		return false, fmt.Errorf("unknown condition %q", cond)
	}

	// untouchable NAME: a FIFO to give as a passphrase or key file that
	// must never be read. Once something opens it, NAME.reached appears
	// and the reader gets end of input (an empty passphrase): a check
	// that should have come first fails loudly instead of hanging.
	scriptCmds["untouchable"] = func(ts *testscript.TestScript, neg bool, args []string) {
		if neg || len(args) != 1 {
			ts.Fatalf("usage: untouchable NAME")
		}
		path := ts.MkAbs(args[0])
		ts.Check(unix.Mkfifo(path, 0o600))
		go func() {
			f, err := os.OpenFile(path, os.O_WRONLY, 0) // blocks until a reader comes
			if err != nil {
				return
			}
			os.WriteFile(path+".reached", nil, 0o600)
			f.Close()
		}()
		ts.Defer(func() {
			// Lets the writer above end if nothing ever read.
			if f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK, 0); err == nil {
				f.Close()
			}
		})
	}

	// linkto PATH REGEXP: PATH is a symlink whose target matches REGEXP
	// (negated: it is not).
	scriptCmds["linkto"] = func(ts *testscript.TestScript, neg bool, args []string) {
		if len(args) != 2 {
			ts.Fatalf("usage: linkto PATH REGEXP")
		}
		target, err := os.Readlink(ts.MkAbs(args[0]))
		ok := err == nil && regexp.MustCompile(args[1]).MatchString(target)
		switch {
		case ok && neg:
			ts.Fatalf("%s links to %s", args[0], target)
		case !ok && !neg:
			ts.Fatalf("%s is not a link to %s (%q, %v)", args[0], args[1], target, err)
		}
	}

	// killserver NAME: SIGKILL the server of NAME, as a crash would, and
	// wait until it is gone.
	scriptCmds["killserver"] = func(ts *testscript.TestScript, neg bool, args []string) {
		if neg || len(args) != 1 {
			ts.Fatalf("usage: killserver NAME")
		}
		b, err := os.ReadFile(filepath.Join(ts.Getenv("XTSCTL_RUNDIR"), args[0], "state.json"))
		ts.Check(err)
		var st struct {
			PID int `json:"pid"`
		}
		ts.Check(json.Unmarshal(b, &st))
		if st.PID <= 0 {
			ts.Fatalf("%s has no server", args[0])
		}
		ts.Check(syscall.Kill(st.PID, syscall.SIGKILL))
		for deadline := time.Now().Add(time.Minute); syscall.Kill(st.PID, 0) == nil; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				ts.Fatalf("server %d of %s did not die", st.PID, args[0])
			}
		}
	}

	// readonlyfs DIR: a tmpfs on DIR (made), holding copies of FILE...,
	// remounted read-only; unmounted at the end of the script.
	scriptCmds["readonlyfs"] = func(ts *testscript.TestScript, neg bool, args []string) {
		if neg || len(args) < 1 {
			ts.Fatalf("usage: readonlyfs DIR [FILE...]")
		}
		dir := ts.MkAbs(args[0])
		ts.Check(os.MkdirAll(dir, 0o755))
		ts.Check(unix.Mount("tmpfs", dir, "tmpfs", 0, "size=64m"))
		ts.Defer(func() { unix.Unmount(dir, unix.MNT_DETACH) })
		for _, f := range args[1:] {
			b, err := os.ReadFile(ts.MkAbs(f))
			ts.Check(err)
			ts.Check(os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o600))
		}
		ts.Check(unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_RDONLY, ""))
	}
}
