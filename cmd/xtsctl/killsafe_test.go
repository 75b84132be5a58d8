package main

import (
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/xtsctl/xtsctl/volume"
)

// TestHeaderCommandsSurviveKill: xtsctl passphrase change and header
// restore killed with SIGKILL at random moments leave a volume that opens
// with the old passphrase or the new one. (volume's
// TestHeaderUpdatesAreCrashSafe replays every write and torn-write pattern
// of the same code; this checks the commands end to end.)
func TestHeaderCommandsSurviveKill(t *testing.T) {
	dir := t.TempDir()
	p1, p2 := filepath.Join(dir, "p1"), filepath.Join(dir, "p2")
	os.WriteFile(p1, []byte("old passphrase"), 0o600)
	os.WriteFile(p2, []byte("new passphrase"), 0o600)
	base := filepath.Join(dir, "base.vol")
	if code, _, stderr := runOut(t, "format", "--passphrase-file", p1, "--size", "64K", base); code != 0 {
		t.Fatal(stderr)
	}
	// A backup taken with p2 as the only passphrase, for restore.
	withP2 := filepath.Join(dir, "p2.vol")
	copyFile(t, base, withP2)
	runOut(t, "passphrase", "change", "--passphrase-file", p1, "--new-passphrase-file", p2, withP2)
	backup := filepath.Join(dir, "p2.hdr")
	if code, _, stderr := runOut(t, "header", "backup", withP2, backup); code != 0 {
		t.Fatal(stderr)
	}

	r := rand.New(rand.NewPCG(3, 4))
	for _, op := range [][]string{
		{"passphrase", "change", "--passphrase-file", p1, "--new-passphrase-file", p2},
		{"header", "restore", "--batch-mode"},
	} {
		// Time one uninterrupted run, then kill runs at random moments
		// before that much time has passed.
		var full time.Duration
		killed := 0
		for i := range 16 {
			vol := filepath.Join(dir, "v.vol")
			copyFile(t, base, vol)
			args := append(append([]string(nil), op...), vol)
			if op[0] == "header" {
				args = append(args, backup)
			}
			cmd := exec.Command("xtsctl", args...)
			start := time.Now()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			if i > 0 {
				time.Sleep(time.Duration(r.Int64N(int64(full))))
				cmd.Process.Signal(syscall.SIGKILL)
			}
			err := cmd.Wait()
			if i == 0 {
				if err != nil {
					t.Fatalf("%v: %v", op, err)
				}
				full = time.Since(start)
			}
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				killed++
			}
			opensWith(t, vol, "old passphrase", "new passphrase")
		}
		t.Logf("%v: one run took %v; %d of 15 runs were killed before finishing", op, full, killed)
	}
}

// opensWith fails unless the volume opens with one of the passphrases.
func opensWith(t *testing.T, vol string, passphrases ...string) {
	t.Helper()
	for _, p := range passphrases {
		v, err := volume.Open(vol, []byte(p), true)
		if err == nil {
			v.Close()
			return
		}
	}
	t.Fatalf("%s opens with none of %q", vol, passphrases)
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
