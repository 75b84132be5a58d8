package main

import (
	"bufio"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// checkDataPhase checks a finished pass over the data: it starts at its
// start (0 for a new run), its last line's rate is its bytes over its own
// seconds (nothing of the key derivation before it), and a new run never
// says resumed.
func checkDataPhase(t *testing.T, run []progressLine, resumed bool) {
	t.Helper()
	first, last := run[0], run[len(run)-1]
	if first.Resumed != resumed || last.Resumed != resumed || first.Elapsed != 0 || first.Rate != nil {
		t.Fatalf("first line %+v of a run with resumed=%v", first, resumed)
	}
	if !last.Finished || last.Done != last.Total {
		t.Fatalf("last line %+v", last)
	}
	if last.Elapsed > 0 {
		want := float64(last.Done-first.Done) / last.Elapsed
		if last.Rate == nil || *last.Rate < want*0.999 || *last.Rate > want*1.001 {
			t.Fatalf("last line %+v: want the phase's average %.0f B/s", last, want)
		}
	}
}

// TestProgressJSONPhases runs the commands with a key derivation before
// the data with --progress-json and reads their lines: the phases in
// order, each ended once; the key derivation without bytes or rate; the
// data's rate of the data only; no "resumed" on a new in-place run, whose
// first report of the data comes after some of its own work, and
// "resumed" on a resumed one.
func TestProgressJSONPhases(t *testing.T) {
	dir := fastTempDir(t)
	pw := filepath.Join(dir, "pw")
	os.WriteFile(pw, []byte("progress phases\n"), 0o600)
	lines := func(r result) []progressLine { return parseProgress(t, r.stderr) }
	kdfDone := func(run []progressLine) {
		t.Helper()
		for _, l := range run {
			if l.Rate != nil || l.ETA != nil || l.Done != 0 || l.Resumed {
				t.Fatalf("key derivation line %+v", l)
			}
		}
		if !run[len(run)-1].Finished {
			t.Fatalf("key derivation not finished: %+v", run)
		}
	}

	t.Run("format", func(t *testing.T) {
		r := mustRun(t, "format", "--progress-json", "--passphrase-file", pw, "--size", "8M", filepath.Join(dir, "new.vol"))
		names, runs := phaseRuns(t, lines(r))
		if !slices.Equal(names, []string{phaseKDF, phaseData}) {
			t.Fatalf("phases %v:\n%s", names, r.stderr)
		}
		kdfDone(runs[0])
		checkDataPhase(t, runs[1], false)
	})

	img := filepath.Join(dir, "disk.img")
	if err := os.WriteFile(img, make([]byte, 16<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Run("encrypt", func(t *testing.T) {
		r := mustRun(t, "encrypt", "--progress-json", "--passphrase-file", pw, img, filepath.Join(dir, "disk.vol"))
		names, runs := phaseRuns(t, lines(r))
		if !slices.Equal(names, []string{phaseKDF, phaseData}) {
			t.Fatalf("phases %v:\n%s", names, r.stderr)
		}
		kdfDone(runs[0])
		checkDataPhase(t, runs[1], false)
	})

	t.Run("decrypt", func(t *testing.T) {
		// The unlock comes before the data's phase starts: its clock
		// counts the data alone.
		r := mustRun(t, "decrypt", "--progress-json", "--passphrase-file", pw, filepath.Join(dir, "disk.vol"), filepath.Join(dir, "disk.out"))
		names, runs := phaseRuns(t, lines(r))
		if !slices.Equal(names, []string{phaseData}) {
			t.Fatalf("phases %v:\n%s", names, r.stderr)
		}
		checkDataPhase(t, runs[0], false)
	})

	t.Run("in-place", func(t *testing.T) {
		r := mustRun(t, "encrypt", "--in-place", "--progress-json", "--passphrase-file", pw, img)
		if strings.Contains(r.stderr, "resumed at") || strings.Contains(r.stderr, `"resumed":true`) {
			t.Errorf("a new run says resumed:\n%s", r.stderr)
		}
		names, runs := phaseRuns(t, lines(r))
		if !slices.Equal(names, []string{phaseHash, phaseKDF, phaseData}) {
			t.Fatalf("phases %v:\n%s", names, r.stderr)
		}
		checkDataPhase(t, runs[0], false)
		kdfDone(runs[1])
		checkDataPhase(t, runs[2], false)
	})

	t.Run("resumed", func(t *testing.T) {
		killed, code, stderr := runKilledAt(t, "record:3", "decrypt", "--in-place", "--passphrase-file", pw, img)
		if !killed {
			t.Fatalf("the decryption was not killed at its third record (exit %d):\n%s", code, stderr)
		}
		r := mustRun(t, "decrypt", "--in-place", "--progress-json", "--passphrase-file", pw, img)
		names, runs := phaseRuns(t, lines(r))
		if !slices.Equal(names, []string{phaseKDF, phaseData}) {
			t.Fatalf("phases %v:\n%s", names, r.stderr)
		}
		kdfDone(runs[0])
		checkDataPhase(t, runs[1], true)
		if runs[1][0].Done == 0 {
			t.Fatalf("a resumed run starts from nothing: %+v", runs[1][0])
		}
	})
}

// TestProgressJSONInterrupted: a job stopped by SIGINT in the middle of
// its data ends that phase with interrupted, not finished, and exits 130.
func TestProgressJSONInterrupted(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.img")
	if err := os.Truncate(createEmpty(t, in), 1<<30); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(dir, "k")
	os.WriteFile(key, []byte("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ!?"), 0o600)
	cmd := exec.Command("xtsctl", "encrypt", "--progress-json", "--type", "plain", "--key-file", key, in, filepath.Join(dir, "out.img"))
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	sc := bufio.NewScanner(pipe)
	signalled := false
	for sc.Scan() {
		out.WriteString(sc.Text() + "\n")
		if !signalled && strings.HasPrefix(sc.Text(), "{") {
			// The data phase has started: stop it.
			cmd.Process.Signal(syscall.SIGINT)
			signalled = true
		}
	}
	io.Copy(io.Discard, pipe)
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitInterrupted {
		t.Fatalf("exit %v, want %d:\n%s", err, exitInterrupted, out.String())
	}
	names, runs := phaseRuns(t, parseProgress(t, out.String()))
	if !slices.Equal(names, []string{phaseData}) {
		t.Fatalf("phases %v:\n%s", names, out.String())
	}
	last := runs[0][len(runs[0])-1]
	if !last.Interrupted || last.Finished || last.Done == last.Total {
		t.Fatalf("the interrupted phase ends with %+v", last)
	}
}
