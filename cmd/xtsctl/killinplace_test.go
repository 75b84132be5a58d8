package main

import (
	"bytes"
	"encoding/hex"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/xtsctl/xtsctl/blake2b"
	"github.com/xtsctl/xtsctl/inplace"
)

// fastTempDir is a temporary directory in the page cache (/dev/shm) when
// there is one: the kill tests copy and convert hundreds of MiB per round.
func fastTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/dev/shm", "xtsctl-test-")
	if err != nil {
		return t.TempDir()
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
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
					// A plain target has no marker of its own: with no
					// journal it must be untouched or finished (and then
					// must not be converted again).
					if op.plain {
						if _, err := os.Stat(journal); errors.Is(err, os.ErrNotExist) && try > 0 && !sameContent(t, target, op.from) {
							if !op.finished(t) {
								t.Fatalf("round %d: no journal, and the target is neither untouched nor finished", rounds)
							}
							break
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
				if _, err := os.Stat(journal); err == nil {
					t.Fatalf("round %d: the journal is left behind", rounds)
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
