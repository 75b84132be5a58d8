package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/xtsctl/xtsctl/volume"
)

// TestVolumeInterrupt: Ctrl-C during a volume encrypt leaves no output and
// no temporary file, with exit code 130, as in plain mode.
func TestVolumeInterrupt(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.img")
	if err := os.Truncate(createEmpty(t, in), 1<<30); err != nil {
		t.Fatal(err)
	}
	pass := filepath.Join(dir, "pass")
	os.WriteFile(pass, []byte("interrupted"), 0o600)
	var stderr strings.Builder
	cmd := exec.Command("xtsctl", "encrypt", "--passphrase-file", pass, in, filepath.Join(dir, "out.vol"))
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for !writingOutput(cmd.Process.Pid, dir, 1) {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("xtsctl was never seen writing its output")
		}
		time.Sleep(time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitInterrupted {
		t.Fatalf("exit: %v; stderr: %s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "out.vol was not written") {
		t.Errorf("stderr %q", stderr.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "out.vol")); !errors.Is(err, os.ErrNotExist) || hasTemp(t, dir) {
		t.Error("output or temporary file left behind")
	}
}

// TestVerifyUncleanVolume: a copy of a volume taken while it was being
// written (as a crash would leave it) is reported as not closed cleanly,
// with its dirty regions, and its digest as stale; info says so too.
func TestVerifyUncleanVolume(t *testing.T) {
	dir := t.TempDir()
	pass := filepath.Join(dir, "pass")
	os.WriteFile(pass, []byte("unclean"), 0o600)
	vol := filepath.Join(dir, "v.vol")
	if code, _, stderr := runOut(t, "format", "--passphrase-file", pass, "--size", "1M", vol); code != 0 {
		t.Fatal(stderr)
	}
	v, err := volume.Open(vol, []byte("unclean"), false)
	if err != nil {
		t.Fatal(err)
	}
	// WriteSectors marks region 0 dirty; Sync clears it, but the clear
	// reaches the disk only with the next Sync, which the crash prevents.
	if err := v.WriteSectors(make([]byte, 4096), 3); err != nil {
		t.Fatal(err)
	}
	if err := v.Sync(); err != nil {
		t.Fatal(err)
	}
	crashed := filepath.Join(dir, "crashed.vol")
	copyFile(t, vol, crashed)
	v.Close()

	code, stdout, stderr := runOut(t, "verify", "--passphrase-file", pass, crashed)
	if code != 0 {
		t.Fatalf("verify exited %d: %s", code, stderr)
	}
	for _, want := range []string{"state: not closed cleanly (1 dirty region)", "digest: not checked (the volume was written since it was recorded)", "data: 256 sectors, 0 bad"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("verify output lacks %q:\n%s", want, stdout)
		}
	}
	if !strings.Contains(stderr, "warning: "+crashed+": the volume was not closed cleanly") {
		t.Errorf("no warning: %s", stderr)
	}
	_, stdout, _ = runOut(t, "info", crashed)
	if !strings.Contains(stdout, "not closed cleanly") || !strings.Contains(stdout, "recorded, but the volume was written since") {
		t.Errorf("info:\n%s", stdout)
	}
	// The original, closed cleanly, is clean again; its digest stays stale.
	_, stdout, _ = runOut(t, "verify", "--passphrase-file", pass, vol)
	if !strings.Contains(stdout, "state: closed cleanly") || !strings.Contains(stdout, "digest: not checked") {
		t.Errorf("after a clean close:\n%s", stdout)
	}
}
