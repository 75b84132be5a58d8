//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/xtsctl/xtsctl/blockdev"
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
			// Whatever a failed script left open is closed.
			if list, _ := blockdev.List(blockdev.Options{}); len(list) > 0 {
				for _, e := range list {
					if e.PID > 0 {
						syscall.Kill(e.PID, syscall.SIGKILL)
					}
					c := exec.Command("xtsctl", "close", e.Name)
					c.Env = append(os.Environ(), "XTSCTL_RUNDIR="+run)
					c.Run()
				}
			}
			os.RemoveAll(run)
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
