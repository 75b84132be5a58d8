package main

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/xtsctl/xtsctl/blake2b"
	"github.com/xtsctl/xtsctl/inplace"
)

// fastTempDir is a temporary directory in the page cache (/dev/shm) when
// there is one: the kill tests copy and convert hundreds of MiB per round.
// Its name carries the test process's PID, and the directories of test
// processes that no longer run are removed first: a test binary killed
// by its timeout or by hand runs no cleanup, and each directory holds
// about a gigabyte of memory.
func fastTempDir(t *testing.T) string {
	t.Helper()
	removeDeadTestDirs("/dev/shm")
	dir, err := os.MkdirTemp("/dev/shm", fmt.Sprintf("%s%d-", shmTestPrefix, os.Getpid()))
	if err != nil {
		return t.TempDir()
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

const shmTestPrefix = "xtsctl-test-"

// removeDeadTestDirs removes the fastTempDir directories in parent whose
// process is gone (no such PID). A PID reused since only keeps one.
func removeDeadTestDirs(parent string) {
	entries, _ := os.ReadDir(parent)
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), shmTestPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		pidText, _, ok := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if !ok || err != nil || pid <= 0 {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			os.RemoveAll(filepath.Join(parent, e.Name()))
		}
	}
}

// TestInPlaceKillResume kills in-place encryptions and decryptions (plain
// and volume) of a 256 MiB image with SIGKILL at random moments, at least
// 32 times each: each killed run is resumed by running the same command
// again (some of those are killed too), until one finishes. The result is
// always the straight one: the bytes of encrypt --type plain IN OUT, or of
// the original; a volume that verifies (every tag, and the end-to-end
// digest, which is the original's b2sum).
func TestInPlaceKillResume(t *testing.T) {
	if testing.Short() {
		t.Skip("starts hundreds of processes")
	}
	if puregoBuild {
		t.Skip("pure-Go AES makes each run seconds long; the build with assembly runs this test")
	}
	dir := fastTempDir(t)
	key := writeTestKey(t, dir)
	pass := filepath.Join(dir, "pass")
	os.WriteFile(pass, []byte("in-place kill test"), 0o600)

	const size = 256 << 20
	orig := filepath.Join(dir, "orig.img")
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i*7>>9) ^ byte(i>>20)
	}
	os.WriteFile(orig, data, 0o644)
	origSum := blake2b.Sum512(data)
	data = nil
	plainEnc := filepath.Join(dir, "orig.enc")
	vol := filepath.Join(dir, "orig.vol")
	for _, args := range [][]string{
		{"encrypt", "-q", "--type", "plain", "--key-file", key, orig, plainEnc},
		{"encrypt", "-q", "--passphrase-file", pass, orig, vol},
	} {
		if code, _, stderr := runOut(t, args...); code != 0 {
			t.Fatal(stderr)
		}
	}
	target := filepath.Join(dir, "target")
	journal := inplace.DefaultJournal(target)

	r := rand.New(rand.NewPCG(17, 18))
	for _, op := range []struct {
		name     string
		plain    bool
		args     []string
		from     string
		finished func(t *testing.T) bool // the target holds the result: check it
	}{
		{"plain encrypt", true, []string{"encrypt", "--in-place", "--type", "plain", "--key-file", key}, orig,
			func(t *testing.T) bool { return sameContent(t, target, plainEnc) }},
		{"plain decrypt", true, []string{"decrypt", "--in-place", "--type", "plain", "--key-file", key}, plainEnc,
			func(t *testing.T) bool { return sameContent(t, target, orig) }},
		{"volume encrypt", false, []string{"encrypt", "--in-place", "--passphrase-file", pass}, orig,
			func(t *testing.T) bool {
				code, stdout, stderr := runOut(t, "verify", "--passphrase-file", pass, target)
				if code != 0 {
					return false
				}
				if !strings.Contains(stdout, "digest: ok ("+hex.EncodeToString(origSum[:])+")") {
					t.Fatalf("the volume's digest is not the original's b2sum: %s %s", stdout, stderr)
				}
				return true
			}},
		{"volume decrypt", false, []string{"decrypt", "--in-place", "--passphrase-file", pass}, vol,
			func(t *testing.T) bool { return sameContent(t, target, orig) }},
	} {
		t.Run(op.name, func(t *testing.T) {
			// One straight run times the window the kills fall in.
			copyFile(t, op.from, target)
			start := time.Now()
			if code, _, stderr := runOut(t, append(op.args, "-q", target)...); code != 0 {
				t.Fatal(stderr)
			}
			window := time.Since(start) + 50*time.Millisecond
			if !op.finished(t) {
				t.Fatal("the uninterrupted run's result is wrong")
			}
			kills, rounds, resumed := 0, 0, 0
			for kills < 32 {
				rounds++
				copyFile(t, op.from, target)
				os.Remove(journal)
				for try := 0; ; try++ {
					// A plain target has no marker of its own: its journal
					// stays, and says when the run finished. With none the
					// target must be untouched.
					if op.plain {
						if _, err := os.Stat(journal); errors.Is(err, os.ErrNotExist) && try > 0 && !sameContent(t, target, op.from) {
							t.Fatalf("round %d: no journal, and the target is not untouched", rounds)
						}
					}
					cmd := exec.Command("xtsctl", append(op.args, "-q", target)...)
					var stderr bytes.Buffer
					cmd.Stderr, cmd.Stdout = &stderr, io.Discard
					if err := cmd.Start(); err != nil {
						t.Fatal(err)
					}
					last := try == 4
					var timer *time.Timer
					if !last {
						timer = time.AfterFunc(time.Duration(r.Int64N(int64(window))), func() { cmd.Process.Signal(syscall.SIGKILL) })
					}
					err := cmd.Wait()
					if timer != nil {
						timer.Stop()
					}
					var ee *exec.ExitError
					if errors.As(err, &ee) && ee.ProcessState.Sys().(syscall.WaitStatus).Signaled() {
						kills++
						if try > 0 {
							resumed++
						}
						continue
					}
					if err != nil {
						// Killed after it finished but before it exited:
						// the next run finds a finished target.
						msg := stderr.String()
						if !strings.Contains(msg, "already an xtsctl volume") && !strings.Contains(msg, "not an xtsctl volume") {
							t.Fatalf("round %d, run %d: %v: %s", rounds, try, err, msg)
						}
					}
					break
				}
				if !op.finished(t) {
					t.Fatalf("round %d: after %d kills, the result differs from the straight run", rounds, kills)
				}
				if op.plain {
					f, err := os.Open(journal)
					if err != nil {
						t.Fatalf("round %d: no journal says the run finished: %v", rounds, err)
					}
					st, err := inplace.ProbeJournal(f)
					f.Close()
					if err != nil || !st.Finished {
						t.Fatalf("round %d: the journal does not say the run finished: %+v %v", rounds, st, err)
					}
					if rounds == 1 {
						// The same command again, after it finished:
						// nothing is converted.
						if code, _, stderr := runOut(t, append(op.args, "-q", target)...); code != 0 || !op.finished(t) {
							t.Fatalf("round %d: running the finished command again: exit %d: %s", rounds, code, stderr)
						}
					}
				} else if _, err := os.Stat(journal); err == nil {
					t.Fatalf("round %d: a volume run left a journal file", rounds)
				}
			}
			t.Logf("a straight run took %v; %d kills in %d rounds (%d of them of a resumed run), each resumed to the straight result", window, kills, rounds, resumed)
		})
	}
}

// sameContent reports whether two files hold the same bytes.
func sameContent(t *testing.T, a, b string) bool {
	t.Helper()
	x, err := os.ReadFile(a)
	if err != nil {
		t.Fatal(err)
	}
	y, err := os.ReadFile(b)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Equal(x, y)
}

// killAtEnv names the moment of an in-place run at which xtsctl, started
// by a test, kills itself (testhooks.InPlaceStep).
const killAtEnv = "XTSCTL_TEST_KILL_AT"

// runKilledAt runs xtsctl with args, killed with SIGKILL at the moment
// step of its in-place run; it reports whether the run was killed there
// (false: it exited, with its code, without reaching step).
func runKilledAt(t *testing.T, step string, args ...string) (killed bool, code int, stderr string) {
	t.Helper()
	cmd := exec.Command("xtsctl", args...)
	cmd.Env = append(os.Environ(), killAtEnv+"="+step)
	var errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return false, 0, errb.String()
	case errors.As(err, &ee) && ee.ProcessState.Sys().(syscall.WaitStatus).Signaled():
		return true, -1, errb.String()
	case errors.As(err, &ee):
		return false, ee.ExitCode(), errb.String()
	}
	t.Fatal(err)
	return
}

// TestInPlaceKillAtFinish kills plain in-place runs at each moment around
// their end (after the last zone, after the finish steps, after the
// journal says so, and just before the process exits) and runs the same
// command again, as the documentation says to: the target is then the
// straight result, converted once. Running the command again after a run
// that finished converts nothing either, and the other direction then
// gives the original back.
func TestInPlaceKillAtFinish(t *testing.T) {
	if puregoBuild {
		t.Skip("pure-Go AES: the build with assembly runs this test")
	}
	dir := fastTempDir(t)
	key := writeTestKey(t, dir)
	const size = 24 << 20
	orig := filepath.Join(dir, "orig.img")
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i*5>>9) ^ byte(i>>18)
	}
	os.WriteFile(orig, data, 0o644)
	target := filepath.Join(dir, "target")
	journal := inplace.DefaultJournal(target)
	for i, c := range []struct {
		name   string
		params []string
	}{
		{"journal mode", nil},
		{"shift mode", []string{"--offset", "2048"}},
	} {
		enc := filepath.Join(dir, fmt.Sprintf("orig%d.enc", i))
		if code, _, stderr := runOut(t, append(append([]string{"encrypt", "-q", "--type", "plain", "--key-file", key}, c.params...), orig, enc)...); code != 0 {
			t.Fatal(stderr)
		}
		for _, dir := range []struct {
			verb       string
			from, want string
		}{
			{"encrypt", orig, enc},
			{"decrypt", enc, orig},
		} {
			args := append(append([]string{dir.verb, "--in-place", "-q", "--type", "plain", "--key-file", key}, c.params...), target)
			for _, step := range []string{"converted", "finished", "recorded", "end"} {
				t.Run(c.name+"/"+dir.verb+"/"+step, func(t *testing.T) {
					copyFile(t, dir.from, target)
					os.Remove(journal)
					killed, code, stderr := runKilledAt(t, step, args...)
					if !killed {
						t.Fatalf("the run did not reach %q: exit %d: %s", step, code, stderr)
					}
					for again := range 2 {
						if code, _, stderr := runOut(t, args...); code != 0 {
							t.Fatalf("run %d after the kill: exit %d: %s", again+1, code, stderr)
						}
						if !sameContent(t, target, dir.want) {
							t.Fatalf("run %d after a kill at %q: the target is not the straight result (converted twice?)", again+1, step)
						}
					}
					f, err := os.Open(journal)
					if err != nil {
						t.Fatalf("the finished run left no journal: %v", err)
					}
					st, err := inplace.ProbeJournal(f)
					f.Close()
					if err != nil || !st.Finished {
						t.Fatalf("the journal does not say the run finished: %+v %v", st, err)
					}
					// The other direction starts anew and undoes it.
					other := map[string]string{"encrypt": "decrypt", "decrypt": "encrypt"}[dir.verb]
					if code, _, stderr := runOut(t, append(append([]string{other, "--in-place", "-q", "--type", "plain", "--key-file", key}, c.params...), target)...); code != 0 {
						t.Fatalf("%s after: exit %d: %s", other, code, stderr)
					}
					if !sameContent(t, target, dir.from) {
						t.Fatalf("%s after the run does not give back what it started from", other)
					}
				})
			}
		}
	}
}

// pauseAtEnv and pauseFileEnv make xtsctl, started by a test, stand still
// at a moment of its in-place run until a file it makes is removed.
const (
	pauseAtEnv   = "XTSCTL_TEST_PAUSE_AT"
	pauseFileEnv = "XTSCTL_TEST_PAUSE_FILE"
)

// startPausedAt starts xtsctl with args and returns once its in-place run
// stands still at step; release lets it go on and returns its exit code
// and stderr.
func startPausedAt(t *testing.T, step string, args ...string) (release func() (int, string)) {
	t.Helper()
	flag := filepath.Join(t.TempDir(), "paused")
	cmd := exec.Command("xtsctl", args...)
	cmd.Env = append(os.Environ(), pauseAtEnv+"="+step, pauseFileEnv+"="+flag)
	var errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		if _, err := os.Stat(flag); err == nil {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("xtsctl exited (%v) before it reached %q: %s", err, step, errb.String())
		case <-time.After(5 * time.Millisecond):
		}
	}
	return func() (int, string) {
		os.Remove(flag)
		err := <-done
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), errb.String()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0, errb.String()
	}
}

// TestInPlaceSharedJournal: two plain runs naming one --journal never both
// run. One that holds it refuses the other; and of two that both found no
// journal, the second to make one is refused instead of putting its
// journal over the first's (which would leave the first's target half
// converted with no journal, to be converted twice).
func TestInPlaceSharedJournal(t *testing.T) {
	if puregoBuild {
		t.Skip("pure-Go AES: the build with assembly runs this test")
	}
	dir := fastTempDir(t)
	key := writeTestKey(t, dir)
	journal := filepath.Join(dir, "shared.journal")
	imgs := map[string][]byte{}
	for i, name := range []string{"one.img", "two.img"} {
		b := make([]byte, 40<<20)
		for j := range b {
			b[j] = byte(j*(i+3)>>10) ^ byte(i)
		}
		path := filepath.Join(dir, name)
		os.WriteFile(path, b, 0o644)
		imgs[path] = b
	}
	one, two := filepath.Join(dir, "one.img"), filepath.Join(dir, "two.img")
	enc := func(img string) []string {
		return []string{"encrypt", "--in-place", "-q", "--type", "plain", "--key-file", key, "--journal", journal, img}
	}
	straight := func(img string) string {
		t.Helper()
		orig, out := filepath.Join(dir, "orig"), img+".straight"
		os.WriteFile(orig, imgs[img], 0o644)
		if c, _, stderr := runOut(t, "encrypt", "-q", "--type", "plain", "--key-file", key, orig, out); c != 0 {
			t.Fatal(stderr)
		}
		return out
	}

	// The first found no journal and stands still; the second makes one
	// and is killed half-way.
	release := startPausedAt(t, "no journal", enc(one)...)
	if killed, code, stderr := runKilledAt(t, "record", enc(two)...); !killed {
		t.Fatalf("the second run was not interrupted: exit %d: %s", code, stderr)
	}
	code, stderr := release()
	if code != exitDevice || !strings.Contains(stderr, "appeared while this run was starting") {
		t.Fatalf("the first run: exit %d: %s", code, stderr)
	}
	unchanged(t, one, imgs[one])

	// The second's run holds the journal: a run of the first is refused.
	release = startPausedAt(t, "record", enc(two)...)
	expectFail(t, exitDevice, "is in use by another xtsctl", enc(one)...)
	unchanged(t, one, imgs[one])
	if code, stderr := release(); code != 0 {
		t.Fatalf("the second run, resumed: exit %d: %s", code, stderr)
	}
	if !sameContent(t, two, straight(two)) {
		t.Fatal("the second run's result differs from encrypt --type plain")
	}
	// Its journal now records its finished run (of two.img): the first,
	// another target, is not mistaken for it.
	expectFail(t, exitInput, "is not what that run left", enc(one)...)
	unchanged(t, one, imgs[one])
}

// TestRemoveDeadTestDirs: the directories of test processes that are gone
// are removed; a running process's, other names and files are kept.
func TestRemoveDeadTestDirs(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skip("no true(1):", err)
	}
	dead := cmd.Process.Pid // reaped: no such process now, unless reused at once
	parent := t.TempDir()
	names := map[string]bool{ // name: kept
		fmt.Sprintf("%s%d-123", shmTestPrefix, dead):        false,
		fmt.Sprintf("%s%d-456", shmTestPrefix, os.Getpid()): true,
		shmTestPrefix + "789":                               true, // no PID in the name
		fmt.Sprintf("other-%d-1", dead):                     true,
		fmt.Sprintf("%s%s-1", shmTestPrefix, "notapid"):     true,
	}
	for name := range names {
		if err := os.Mkdir(filepath.Join(parent, name), 0o700); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(parent, name, "data"), []byte("x"), 0o600)
	}
	removeDeadTestDirs(parent)
	for name, kept := range names {
		_, err := os.Stat(filepath.Join(parent, name))
		if got := err == nil; got != kept {
			t.Errorf("%s: kept %v, want %v", name, got, kept)
		}
	}
}
