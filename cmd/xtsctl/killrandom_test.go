package main

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestKillAtRandomPoints kills encrypt and decrypt (plain and volume) with
// SIGKILL at random moments, many times. Whatever the moment: the input is
// unchanged, and a file named OUT either does not exist or is complete and
// correct (the run finished before the kill). A killed run may leave only
// its hidden temporary file.
func TestKillAtRandomPoints(t *testing.T) {
	if testing.Short() {
		t.Skip("starts dozens of processes")
	}
	dir := t.TempDir()
	key := writeTestKey(t, dir)
	pass := filepath.Join(dir, "pass")
	os.WriteFile(pass, []byte("kill test passphrase"), 0o600)

	plain := filepath.Join(dir, "plain.img")
	data := make([]byte, 48<<20)
	for i := range data {
		data[i] = byte(i * 7 >> 9)
	}
	os.WriteFile(plain, data, 0o644)
	// Complete outputs to compare with, made without interruption.
	plainEnc := filepath.Join(dir, "plain.enc")
	vol := filepath.Join(dir, "plain.vol")
	// Kill within about the time a whole run of that kind takes, so that
	// some runs are killed midway and some finish, whatever the machine's
	// speed: a plain run takes a fraction of a volume's (no key
	// derivation, no tags), so each kind has its own window.
	// The faster of two runs times it (the first one also reads the input
	// from disk); half as long again lets some of them finish.
	var windows [2]time.Duration
	for i, args := range [][]string{
		{"encrypt", "-q", "--type", "plain", "--key-file", key, plain, plainEnc},
		{"encrypt", "-q", "--passphrase-file", pass, plain, vol},
	} {
		for range 2 {
			os.Remove(args[len(args)-1])
			start := time.Now()
			if code, _, stderr := runOut(t, args...); code != 0 {
				t.Fatal(stderr)
			}
			if d := time.Since(start); windows[i] == 0 || d < windows[i] {
				windows[i] = d
			}
		}
		windows[i] = windows[i]*3/2 + 10*time.Millisecond
	}
	sums := map[string][32]byte{}
	for _, f := range []string{plain, plainEnc, vol} {
		b, _ := os.ReadFile(f)
		sums[f] = sha256.Sum256(b)
	}

	r := rand.New(rand.NewPCG(11, 12))
	for _, op := range []struct {
		name   string
		args   []string
		in     string
		window time.Duration
		check  func(t *testing.T, out string) // out exists: it must be complete
	}{
		{"plain encrypt", []string{"encrypt", "-q", "--type", "plain", "--key-file", key}, plain, windows[0],
			func(t *testing.T, out string) { sameFile(t, out, plainEnc) }},
		{"plain decrypt", []string{"decrypt", "-q", "--type", "plain", "--key-file", key}, plainEnc, windows[0],
			func(t *testing.T, out string) { sameFile(t, out, plain) }},
		{"volume encrypt", []string{"encrypt", "-q", "--passphrase-file", pass}, plain, windows[1],
			func(t *testing.T, out string) {
				back := out + ".back"
				if code, _, stderr := runOut(t, "decrypt", "-q", "--passphrase-file", pass, out, back); code != 0 {
					t.Fatalf("a volume left by a killed encrypt does not decrypt: %s", stderr)
				}
				sameFile(t, back, plain)
				os.Remove(back)
			}},
		{"volume decrypt", []string{"decrypt", "-q", "--passphrase-file", pass}, vol, windows[1],
			func(t *testing.T, out string) { sameFile(t, out, plain) }},
	} {
		t.Run(op.name, func(t *testing.T) {
			var killed, finished int
			for i := range 10 {
				out := filepath.Join(dir, "out")
				cmd := exec.Command("xtsctl", append(op.args, op.in, out)...)
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				time.Sleep(time.Duration(r.Int64N(int64(op.window))))
				cmd.Process.Signal(syscall.SIGKILL)
				err := cmd.Wait()
				var ee *exec.ExitError
				if errors.As(err, &ee) && ee.ProcessState.Sys().(syscall.WaitStatus).Signaled() {
					killed++
				} else if err == nil {
					finished++
				} else {
					t.Fatalf("run %d: %v", i, err)
				}
				b, _ := os.ReadFile(op.in)
				if sha256.Sum256(b) != sums[op.in] {
					t.Fatalf("run %d: the input changed", i)
				}
				if _, err := os.Stat(out); err == nil {
					op.check(t, out)
					os.Remove(out)
				}
				removeTemps(t, dir)
			}
			t.Logf("%d killed, %d finished before the kill", killed, finished)
			if killed == 0 {
				t.Error("no run was killed before it finished: the test exercised nothing")
			}
		})
	}
}

func sameFile(t *testing.T, got, want string) {
	t.Helper()
	a, _ := os.ReadFile(got)
	b, _ := os.ReadFile(want)
	if !bytes.Equal(a, b) {
		t.Fatalf("%s is not complete: %d bytes, differs from %s (%d bytes)", filepath.Base(got), len(a), filepath.Base(want), len(b))
	}
}

func removeTemps(t *testing.T, dir string) {
	des, _ := os.ReadDir(dir)
	for _, de := range des {
		if n := de.Name(); len(n) > 0 && n[0] == '.' {
			os.Remove(filepath.Join(dir, n))
		}
	}
}
