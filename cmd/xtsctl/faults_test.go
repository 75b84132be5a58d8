package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// These tests inject real faults: a full disk, a read-only output
// directory, and an input that shrinks while it is read. Mounting needs root.

func skipUnlessRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs")
	}
}

// mountTmpfs mounts a tmpfs of the given size and options on a new
// directory, unmounted at the end of the test.
func mountTmpfs(t *testing.T, opts string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("xtsctl-test", dir, "tmpfs", 0, opts); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	return dir
}

func writeTestKey(t *testing.T, dir string) string {
	t.Helper()
	key := filepath.Join(dir, "key")
	if err := os.WriteFile(key, []byte("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ!?"), 0o600); err != nil {
		t.Fatal(err)
	}
	return key
}

func TestDiskFull(t *testing.T) {
	skipUnlessRoot(t)
	full := mountTmpfs(t, "size=1m")
	dir := t.TempDir()
	key := writeTestKey(t, dir)
	in := filepath.Join(dir, "in.img")
	if err := os.WriteFile(in, make([]byte, 8<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(full, "out.enc")
	code, stderr := runCLI(t, "encrypt", "--type", "plain", "--key-file", key, in, out)
	if code != exitOutput {
		t.Errorf("exit code %d, want %d (output)", code, exitOutput)
	}
	if !strings.Contains(stderr, "no space left on device") || !strings.Contains(stderr, "was not written") {
		t.Errorf("stderr does not name the problem: %q", stderr)
	}
	if des, _ := os.ReadDir(full); len(des) != 0 {
		t.Errorf("left files on the full disk: %v", des)
	}
}

func TestReadOnlyOutputDirectory(t *testing.T) {
	skipUnlessRoot(t)
	ro := mountTmpfs(t, "size=1m")
	if err := unix.Mount("", ro, "", unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
		t.Fatalf("remount read-only: %v", err)
	}
	dir := t.TempDir()
	key := writeTestKey(t, dir)
	in := filepath.Join(dir, "in.img")
	os.WriteFile(in, make([]byte, 4096), 0o644)
	code, stderr := runCLI(t, "encrypt", "--type", "plain", "--key-file", key, in, filepath.Join(ro, "out.enc"))
	if code != exitOutput || !strings.Contains(stderr, "read-only file system") {
		t.Errorf("exit %d, stderr %q; want exit %d naming the read-only file system", code, stderr, exitOutput)
	}
}

// TestInputShrinks truncates the input while xtsctl reads it: it must stop
// with an error that says so, and leave no output.
func TestInputShrinks(t *testing.T) {
	dir := t.TempDir()
	key := writeTestKey(t, dir)
	in := filepath.Join(dir, "in.img")
	if err := os.Truncate(createEmpty(t, in), 1<<30); err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd := exec.Command("xtsctl", "encrypt", "--type", "plain", "--key-file", key, in, filepath.Join(dir, "out.enc"))
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); !writingOutput(cmd.Process.Pid, dir, 1); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("xtsctl was never seen writing its output")
		}
	}
	if err := os.Truncate(in, 1<<20); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitInput {
		t.Fatalf("exit %v, want code %d; stderr: %s", err, exitInput, stderr.String())
	}
	if !strings.Contains(stderr.String(), "did it shrink while being read?") {
		t.Errorf("stderr does not say the input shrank: %q", stderr.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "out.enc")); !errors.Is(err, os.ErrNotExist) || hasTemp(t, dir) {
		t.Error("output or temporary file left behind")
	}
}
