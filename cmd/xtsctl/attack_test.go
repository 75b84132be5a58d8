package main

import (
	"bufio"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/xtsctl/xtsctl/volume"
	"golang.org/x/sys/unix"
)

// The attacks of issue 13 as a user meets them: the attacker can write the
// image but does not know the passphrase.

// TestExpensiveKDFRefused: a key slot rewritten to ask for 4 GiB × 1000
// passes × 255 threads is not run by any command that unlocks: each says
// which slot and what it asks for, at once, with exit 4.
func TestExpensiveKDFRefused(t *testing.T) {
	dir := t.TempDir()
	vol, pass := filepath.Join(dir, "disk.vol"), filepath.Join(dir, "pass")
	os.WriteFile(pass, []byte("attack test\n"), 0o600)
	if code, _, stderr := runOut(t, "format", "-q", "--passphrase-file", pass, "--kdf-iterations", "1", "--kdf-memory", "64", "--size", "1M", vol); code != 0 {
		t.Fatal(stderr)
	}
	inflateSlot0(t, vol, volume.KDFParams{Time: volume.MaxKDFTime, MemoryKiB: volume.MaxKDFMemoryKiB, Threads: 255})

	for _, args := range [][]string{
		{"verify", "--passphrase-file", pass, vol},
		{"decrypt", "--passphrase-file", pass, vol, filepath.Join(dir, "out")},
		{"info", "--dm-table", "--show-key", "--key-output", filepath.Join(dir, "key"), "--passphrase-file", pass, vol},
		{"passphrase", "add", "--passphrase-file", pass, "--new-passphrase-file", pass, vol},
	} {
		start := time.Now()
		code, _, stderr := runOut(t, args...)
		if code != exitKey || !strings.Contains(stderr, "key slot 0 asks for Argon2id with 4 GiB × 1000 passes × 255 threads") ||
			!strings.Contains(stderr, "--allow-expensive-kdf") {
			t.Errorf("%s: exit %d, %q", args[0], code, stderr)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("%s took %v: the KDF ran", args[0], d)
		}
	}
}

// inflateSlot0 rewrites key slot 0's Argon2id costs in both header copies,
// checksums recomputed, as someone who can write the image would.
func inflateSlot0(t *testing.T, vol string, p volume.KDFParams) {
	t.Helper()
	f, err := os.OpenFile(vol, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	hs, err := volume.ReadHeaders(f, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	h := *hs.Header
	h.Slots[0].KDF = p
	b, err := h.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt(b, 0)
	f.WriteAt(b, h.SecondaryOffset)
}

// TestUnlockInterrupted: SIGTERM or SIGINT in the middle of a key slot's
// long Argon2id (within the limits: 32 MiB × 600 passes, which runs for
// tens of seconds) stops xtsctl there, with exit 130, instead of running
// the KDF to its end and then failing with a wrong passphrase.
func TestUnlockInterrupted(t *testing.T) {
	dir := t.TempDir()
	vol, pass := filepath.Join(dir, "disk.vol"), filepath.Join(dir, "pass")
	os.WriteFile(pass, []byte("attack test\n"), 0o600)
	if code, _, stderr := runOut(t, "format", "-q", "--passphrase-file", pass, "--kdf-iterations", "1", "--kdf-memory", "64", "--size", "1M", vol); code != 0 {
		t.Fatal(stderr)
	}
	inflateSlot0(t, vol, volume.KDFParams{Time: 600, MemoryKiB: 32 << 10, Threads: 1})
	for _, c := range []struct {
		sig  syscall.Signal
		args []string
	}{
		{syscall.SIGTERM, []string{"verify", "--passphrase-file", pass, vol}},
		{syscall.SIGINT, []string{"verify", "--passphrase-file", pass, vol}},
		{syscall.SIGTERM, []string{"passphrase", "add", "--passphrase-file", pass, "--new-passphrase-file", pass, "--kdf-memory", "64", "--kdf-iterations", "1", vol}},
	} {
		sig := c.sig
		cmd := exec.Command("xtsctl", c.args...)
		errPipe, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Signal once xtsctl says it is running the slot's KDF.
		var stderr strings.Builder
		sc := bufio.NewScanner(errPipe)
		for sc.Scan() {
			stderr.WriteString(sc.Text() + "\n")
			if strings.Contains(sc.Text(), "key slot 0: Argon2id with") && strings.Contains(sc.Text(), "this takes a while") {
				cmd.Process.Signal(sig)
				break
			}
		}
		rest, _ := io.ReadAll(errPipe)
		stderr.Write(rest)
		err = cmd.Wait()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitInterrupted || !strings.Contains(stderr.String(), "disk.vol: interrupted by "+unix.SignalName(sig)) {
			t.Errorf("%s: %v during the KDF: %v; stderr %q", c.args[0], sig, err, stderr.String())
		}
	}
}
