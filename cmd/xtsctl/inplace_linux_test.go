package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/xtsctl/xtsctl/inplace"
	"github.com/xtsctl/xtsctl/internal/loopdev"
	"github.com/xtsctl/xtsctl/volume"
	"golang.org/x/sys/unix"
)

// The refusals of encrypt and decrypt --in-place: each is a clear error
// with its exit code, and nothing of the target (or journal) changes.

// unchanged fails the test if the file at path no longer holds want.
func unchanged(t *testing.T, path string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s changed", path)
	}
}

// expectFail runs xtsctl and checks the exit code and that stderr says msg.
func expectFail(t *testing.T, code int, msg string, args ...string) {
	t.Helper()
	c, _, stderr := runOut(t, args...)
	if c != code || !strings.Contains(stderr, msg) {
		t.Fatalf("xtsctl %s: exit %d, stderr %q; want exit %d and %q", strings.Join(args, " "), c, stderr, code, msg)
	}
}

func attachLoop(t *testing.T, file string, readOnly bool) string {
	t.Helper()
	d, err := loopdev.Attach(file, loopdev.Options{ReadOnly: readOnly})
	if err != nil {
		t.Skipf("no loop device: %v", err)
	}
	t.Cleanup(func() { d.Detach() })
	return d.Path
}

func TestInPlaceRefusals(t *testing.T) {
	skipUnlessRoot(t)
	dir := fastTempDir(t)
	key := writeTestKey(t, dir)
	pass := filepath.Join(dir, "pass")
	os.WriteFile(pass, []byte("refusals"), 0o600)
	data := make([]byte, 16<<20)
	for i := range data {
		data[i] = byte(i * 13 >> 10)
	}
	volEnc := []string{"encrypt", "--in-place", "--passphrase-file", pass}
	plainEnc := []string{"encrypt", "--in-place", "--type", "plain", "--key-file", key}
	img := filepath.Join(dir, "disk.img")
	reset := func() {
		t.Helper()
		if err := os.WriteFile(img, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("read-only file", func(t *testing.T) {
		ro := mountTmpfs(t, "size=64m")
		f := filepath.Join(ro, "disk.img")
		os.WriteFile(f, data, 0o644)
		if err := unix.Mount("", ro, "", unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
			t.Fatal(err)
		}
		expectFail(t, exitOutput, "is read-only: nothing was changed", append(volEnc, f)...)
		expectFail(t, exitOutput, "is read-only: nothing was changed", append(plainEnc, f)...)
		unchanged(t, f, data)
	})
	t.Run("read-only device", func(t *testing.T) {
		reset()
		dev := attachLoop(t, img, true)
		expectFail(t, exitOutput, "is read-only: nothing was changed", append(volEnc, "--reduce-device-size", "4M", dev)...)
		expectFail(t, exitOutput, "is read-only: nothing was changed", append(plainEnc, "--journal", filepath.Join(dir, "j"), dev)...)
		unchanged(t, img, data)
	})
	t.Run("device too small for the metadata", func(t *testing.T) {
		reset()
		dev := attachLoop(t, img, false)
		l, _ := volume.NewLayout(16<<20-64<<10, 4096, 32)
		need := l.Size - l.DataLength
		expectFail(t, exitInput, "an xtsctl volume needs", append(volEnc, dev)...)
		expectFail(t, exitInput, fmt.Sprintf("needs %d bytes after the data (1.2 MiB), and has 65536", need), append(volEnc, "--reduce-device-size", "64K", dev)...)
		expectFail(t, exitInput, fmt.Sprintf("give --reduce-device-size %d", need), append(volEnc, "--reduce-device-size", "64K", dev)...)
		expectFail(t, exitInput, "the offset needs 1048576 bytes", append(plainEnc, "--offset", "2048", "--journal", filepath.Join(dir, "j"), dev)...)
		expectFail(t, exitUsage, "needs --journal FILE", append(plainEnc, dev)...)
		unchanged(t, img, data)
		if _, err := os.Stat(filepath.Join(dir, "j")); err == nil {
			t.Fatal("a refused run left a journal")
		}
	})
	t.Run("image on a full filesystem", func(t *testing.T) {
		// 16 MiB of data on a 17 MiB filesystem: no room for the volume's
		// 1.2 MiB of metadata, nor for a plain run's 32 MiB journal.
		full := mountTmpfs(t, "size=17m")
		f := filepath.Join(full, "disk.img")
		if err := os.WriteFile(f, data, 0o644); err != nil {
			t.Fatal(err)
		}
		expectFail(t, exitOutput, "no space left on device", append(volEnc, f)...)
		expectFail(t, exitOutput, "no space left on device", append(plainEnc, f)...)
		unchanged(t, f, data)
		if des, _ := os.ReadDir(full); len(des) != 1 {
			t.Fatalf("a refused run left files: %v", des)
		}
	})
	t.Run("mounted device", func(t *testing.T) {
		if _, err := exec.LookPath("mkfs.ext4"); err != nil {
			t.Skip("no mkfs.ext4")
		}
		fs := filepath.Join(dir, "fs.img")
		os.WriteFile(fs, data, 0o644)
		if out, err := exec.Command("mkfs.ext4", "-q", "-F", fs).CombinedOutput(); err != nil {
			t.Fatalf("mkfs.ext4: %v %s", err, out)
		}
		before, _ := os.ReadFile(fs)
		dev := attachLoop(t, fs, false)
		mnt := filepath.Join(dir, "mnt")
		os.Mkdir(mnt, 0o755)
		if err := unix.Mount(dev, mnt, "ext4", unix.MS_RDONLY, ""); err != nil {
			t.Fatalf("mount: %v", err)
		}
		defer unix.Unmount(mnt, 0)
		expectFail(t, exitDevice, "mounted at "+mnt, append(volEnc, "--reduce-device-size", "4M", dev)...)
		expectFail(t, exitDevice, "mounted at "+mnt, append(plainEnc, "--journal", filepath.Join(dir, "j"), dev)...)
		// And the image under it, which the loop device holds.
		expectFail(t, exitDevice, "attached to "+dev, append(volEnc, fs)...)
		unix.Unmount(mnt, 0)
		unchanged(t, fs, before)
	})
	t.Run("image on a loop device", func(t *testing.T) {
		reset()
		dev := attachLoop(t, img, false)
		expectFail(t, exitDevice, "attached to "+dev, append(volEnc, img)...)
		expectFail(t, exitDevice, "attached to "+dev, append(plainEnc, img)...)
		unchanged(t, img, data)
	})
	t.Run("image on a loop device by another name", func(t *testing.T) {
		// Attached by one name, which is then removed: sysfs shows
		// "NAME (deleted)", and only the device and inode tell.
		reset()
		other := filepath.Join(dir, "attached.img")
		if err := os.Link(img, other); err != nil {
			t.Fatal(err)
		}
		dev := attachLoop(t, other, false)
		os.Remove(other)
		expectFail(t, exitDevice, "attached to "+dev, append(volEnc, img)...)
		expectFail(t, exitDevice, "attached to "+dev, append(plainEnc, img)...)
		unchanged(t, img, data)
	})
	t.Run("open in xtsctl", func(t *testing.T) {
		reset()
		// What open holds while it serves an image (read-only here: a
		// shared lock, which the exclusive lock of a run conflicts with).
		f, err := volume.LockImage(img, true, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		expectFail(t, exitDevice, "open in xtsctl", append(volEnc, img)...)
		expectFail(t, exitDevice, "open in xtsctl", append(plainEnc, img)...)
		unchanged(t, img, data)
	})
}

// interruptRun starts xtsctl with args and kills it as soon as progress
// says more than one zone of the data is converted (so that the record in
// force vouches for data written over the original); it retries if the
// run finishes first.
func interruptRun(t *testing.T, reset func(), progress func() int64, args ...string) {
	t.Helper()
	for range 20 {
		reset()
		cmd := exec.Command("xtsctl", args...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		for {
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("xtsctl %s: %v", strings.Join(args, " "), err)
				}
			case <-time.After(time.Millisecond):
				if progress() > 16<<20 {
					cmd.Process.Signal(syscall.SIGKILL)
					<-done
					if progress() > 0 {
						return
					}
					// On a loaded machine the run can finish (and
					// remove its anchor or journal) between the look
					// and the kill: nothing was interrupted, again.
					break
				}
				continue
			}
			break // finished before it could be killed: again
		}
	}
	t.Fatal("every run finished before it could be interrupted")
}

// TestInPlaceResumeRefusals: an interrupted run is resumed only by the same
// command with the same key or passphrase, on the target it left: another
// key, other options, the other direction, a changed target are refused
// with nothing changed; then the right command finishes it.
func TestInPlaceResumeRefusals(t *testing.T) {
	if puregoBuild {
		t.Skip("pure-Go AES: the runs are too slow to interrupt reliably")
	}
	dir := fastTempDir(t)
	key := writeTestKey(t, dir)
	otherKey := filepath.Join(dir, "other.key")
	os.WriteFile(otherKey, []byte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789!?"), 0o600)
	pass, otherPass := filepath.Join(dir, "pass"), filepath.Join(dir, "other.pass")
	os.WriteFile(pass, []byte("the right one"), 0o600)
	os.WriteFile(otherPass, []byte("another one"), 0o600)
	data := make([]byte, 128<<20)
	for i := range data {
		data[i] = byte(i * 11 >> 9)
	}
	img := filepath.Join(dir, "disk.img")
	journal := inplace.DefaultJournal(img)
	reset := func() {
		os.Remove(journal)
		if err := os.WriteFile(img, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	probeVolume := func() int64 {
		f, err := os.Open(img)
		if err != nil {
			return 0
		}
		defer f.Close()
		size, _ := f.Seek(0, 2)
		st, _ := inplace.Probe(f, size)
		if st == nil || !st.Started {
			return 0
		}
		return st.Done
	}
	probePlain := func() int64 {
		f, err := os.Open(journal)
		if err != nil {
			return 0
		}
		defer f.Close()
		st, err := inplace.ProbeJournal(f)
		if err != nil {
			return 0
		}
		return st.Done
	}
	snapshot := func() (target, j []byte) {
		target, _ = os.ReadFile(img)
		j, _ = os.ReadFile(journal)
		return
	}
	check := func(t *testing.T, target, j []byte) {
		t.Helper()
		unchanged(t, img, target)
		if j != nil {
			unchanged(t, journal, j)
		}
	}

	t.Run("volume", func(t *testing.T) {
		enc := []string{"encrypt", "--in-place", "-q"}
		interruptRun(t, reset, probeVolume, append(enc, "--passphrase-file", pass, img)...)
		target, _ := snapshot()
		expectFail(t, exitKey, "wrong passphrase", append(enc, "--passphrase-file", otherPass, img)...)
		expectFail(t, exitUsage, "only xtsctl encrypt --in-place can finish it", "decrypt", "--in-place", "--passphrase-file", pass, img)
		expectFail(t, exitInput, "in-place encryption of this image was interrupted", "verify", "--passphrase-file", pass, img)
		check(t, target, nil)
		// The image was restored from a backup (the run's header and
		// journal at its end are still there): refused, nothing written.
		changed := bytes.Clone(target)
		copy(changed, data)
		os.WriteFile(img, changed, 0o644)
		expectFail(t, exitInput, "not what the interrupted in-place run left", append(enc, "--passphrase-file", pass, img)...)
		unchanged(t, img, changed)
		os.WriteFile(img, target, 0o644)
		c, stdout, stderr := runOut(t, "info", img)
		if c != 0 || !strings.Contains(stdout, "in-place run:") || !strings.Contains(stdout, "resume with:     xtsctl encrypt --in-place "+img) {
			t.Fatalf("info: %d %s %s", c, stdout, stderr)
		}
		c, _, stderr = runOut(t, append(enc[:2], "--passphrase-file", pass, img)...)
		if c != 0 || !strings.Contains(stderr, "resuming the interrupted in-place encryption") {
			t.Fatalf("resume: exit %d: %s", c, stderr)
		}
		mustVerify(t, img, pass)
	})
	t.Run("plain", func(t *testing.T) {
		enc := []string{"encrypt", "--in-place", "-q", "--type", "plain"}
		interruptRun(t, reset, probePlain, append(enc, "--key-file", key, img)...)
		target, j := snapshot()
		expectFail(t, exitKey, "different key", append(enc, "--key-file", otherKey, img)...)
		expectFail(t, exitUsage, "used --sector-size 512", append(enc, "--key-file", key, "--sector-size", "4096", img)...)
		expectFail(t, exitUsage, "only xtsctl encrypt --in-place can finish it", "decrypt", "--in-place", "--type", "plain", "--key-file", key, img)
		check(t, target, j)
		changed := bytes.Clone(data) // restored from a backup; the journal stayed
		os.WriteFile(img, changed, 0o644)
		expectFail(t, exitInput, "not what the interrupted in-place run left", append(enc, "--key-file", key, img)...)
		unchanged(t, img, changed)
		unchanged(t, journal, j)
		os.WriteFile(img, target, 0o644)
		c, _, stderr := runOut(t, append(enc[:2], "--type", "plain", "--key-file", key, img)...)
		if c != 0 || !strings.Contains(stderr, "resuming the interrupted in-place encryption") {
			t.Fatalf("resume: exit %d: %s", c, stderr)
		}
		straight := filepath.Join(dir, "straight.enc")
		os.WriteFile(filepath.Join(dir, "orig"), data, 0o644)
		if c, _, stderr := runOut(t, "encrypt", "-q", "--type", "plain", "--key-file", key, filepath.Join(dir, "orig"), straight); c != 0 {
			t.Fatal(stderr)
		}
		if !sameContent(t, img, straight) {
			t.Fatal("the resumed run differs from encrypt --type plain")
		}
	})
}

func mustVerify(t *testing.T, img, pass string) {
	t.Helper()
	if c, stdout, stderr := runOut(t, "verify", "--passphrase-file", pass, img); c != 0 {
		t.Fatalf("verify: %d %s %s", c, stdout, stderr)
	}
}

// TestInPlaceBlockDevice: a loop device is encrypted in place into a
// volume in the room it leaves at its end, verifies, and decrypts in place
// back; a plain run on it keeps its journal where --journal says.
func TestInPlaceBlockDevice(t *testing.T) {
	skipUnlessRoot(t)
	dir := fastTempDir(t)
	key := writeTestKey(t, dir)
	pass := filepath.Join(dir, "pass")
	os.WriteFile(pass, []byte("device"), 0o600)
	const dataLen, room = 24 << 20, 4 << 20
	data := make([]byte, dataLen+room)
	for i := range data[:dataLen] {
		data[i] = byte(i * 5 >> 11)
	}
	img := filepath.Join(dir, "backing.img")
	os.WriteFile(img, data, 0o644)
	dev := attachLoop(t, img, false)

	mustRun := func(args ...string) string {
		t.Helper()
		c, stdout, stderr := runOut(t, args...)
		if c != 0 {
			t.Fatalf("xtsctl %s: %d %s", strings.Join(args, " "), c, stderr)
		}
		return stdout
	}
	mustRun("encrypt", "-q", "--in-place", "--passphrase-file", pass, "--reduce-device-size", "4M", dev)
	mustVerify(t, dev, pass)
	mustRun("decrypt", "-q", "--in-place", "--passphrase-file", pass, dev)
	got, _ := os.ReadFile(img)
	if !bytes.Equal(got[:dataLen], data[:dataLen]) || !bytes.Equal(got[dataLen:], make([]byte, room)) {
		t.Fatal("the device does not hold the original data, then zeros")
	}

	j := filepath.Join(dir, "dev.journal")
	straight := filepath.Join(dir, "straight.enc")
	os.WriteFile(filepath.Join(dir, "orig"), got, 0o644)
	mustRun("encrypt", "-q", "--type", "plain", "--key-file", key, "--offset", "2048", filepath.Join(dir, "orig"), straight)
	mustRun("encrypt", "-q", "--in-place", "--type", "plain", "--key-file", key, "--offset", "2048", "--reduce-device-size", "1M", "--journal", j, dev)
	want, _ := os.ReadFile(straight)
	got, _ = os.ReadFile(img)
	if !bytes.Equal(got, want[:len(got)]) {
		t.Fatal("a plain in-place run on a device differs from encrypt --type plain")
	}
	// The journal stays, and says the run finished: the same command
	// again converts nothing.
	mustRun("encrypt", "-q", "--in-place", "--type", "plain", "--key-file", key, "--offset", "2048", "--reduce-device-size", "1M", "--journal", j, dev)
	if again, _ := os.ReadFile(img); !bytes.Equal(again, got) {
		t.Fatal("running the finished plain run again changed the device")
	}
}

// TestPlainImageInterrupted: a plain image with the journal of an
// interrupted in-place run beside it (part of it converted) is not opened
// or decrypted as a whole: the refusal names the journal and the command
// that finishes the run; once it finished, both work.
func TestPlainImageInterrupted(t *testing.T) {
	if puregoBuild {
		t.Skip("pure-Go AES: the build with assembly runs this test")
	}
	t.Setenv("XTSCTL_RUNDIR", t.TempDir())
	dir := fastTempDir(t)
	key := writeTestKey(t, dir)
	data := make([]byte, 40<<20)
	for i := range data {
		data[i] = byte(i * 3 >> 10)
	}
	img := filepath.Join(dir, "disk.img")
	os.WriteFile(img, data, 0o644)
	enc := []string{"encrypt", "--in-place", "-q", "--type", "plain", "--key-file", key, img}
	if killed, code, stderr := runKilledAt(t, "record", enc...); !killed {
		t.Fatalf("not interrupted: exit %d: %s", code, stderr)
	}
	half, _ := os.ReadFile(img)
	out := filepath.Join(dir, "out")
	resume := "xtsctl encrypt --in-place --type plain --key-file KEYFILE " + img
	for _, args := range [][]string{
		{"decrypt", "--type", "plain", "--key-file", key, img, out},
		{"open", "--type", "plain", "--key-file", key, img, "xtsctl-test-interrupted"},
	} {
		c, _, stderr := runOut(t, args...)
		if c != exitInput || !strings.Contains(stderr, "an in-place encryption of it was interrupted") ||
			!strings.Contains(stderr, inplace.DefaultJournal(img)) || !strings.Contains(stderr, "finish it first: "+resume) {
			t.Fatalf("xtsctl %s: exit %d: %s", args[0], c, stderr)
		}
	}
	unchanged(t, img, half)
	if _, err := os.Stat(out); err == nil {
		t.Fatal("a refused decrypt wrote its output")
	}
	// A journal that is not one: refused all the same.
	j := inplace.DefaultJournal(img)
	jb, _ := os.ReadFile(j)
	os.WriteFile(j, []byte("not a journal"), 0o600)
	expectFail(t, exitInput, "cannot be read", "decrypt", "--type", "plain", "--key-file", key, img, out)
	os.WriteFile(j, jb, 0o600)
	// Finished: its journal says so, and the image decrypts.
	if c, _, stderr := runOut(t, enc...); c != 0 {
		t.Fatalf("resume: %d %s", c, stderr)
	}
	if c, _, stderr := runOut(t, "decrypt", "-q", "--type", "plain", "--key-file", key, img, out); c != 0 {
		t.Fatalf("decrypt after the run finished: %d %s", c, stderr)
	}
	unchanged(t, out, data)
}

// TestInPlaceRollback: an in-place run killed, resumed and killed again
// further on; then its records (a volume's run area, a plain run's
// journal) are put back as they were after the first kill. Resuming would
// convert again what the second run converted: it is refused, nothing
// written. With the newest records put back it finishes, to the straight
// result; with the newest record zeroed (the one before it in force) it
// finishes too, or is refused.
func TestInPlaceRollback(t *testing.T) {
	if puregoBuild {
		t.Skip("pure-Go AES: the build with assembly runs this test")
	}
	dir := fastTempDir(t)
	key := writeTestKey(t, dir)
	pass := filepath.Join(dir, "pass")
	os.WriteFile(pass, []byte("rollback"), 0o600)
	data := make([]byte, 48<<20)
	for i := range data {
		data[i] = byte(i*7>>10) ^ byte(i>>19)
	}
	orig := filepath.Join(dir, "orig.img")
	os.WriteFile(orig, data, 0o644)
	vol, plainEnc := filepath.Join(dir, "orig.vol"), filepath.Join(dir, "orig.enc")
	for _, args := range [][]string{
		{"encrypt", "-q", "--passphrase-file", pass, orig, vol},
		{"encrypt", "-q", "--type", "plain", "--key-file", key, "--offset", "2048", orig, plainEnc},
	} {
		if c, _, stderr := runOut(t, args...); c != 0 {
			t.Fatal(stderr)
		}
	}
	img := filepath.Join(dir, "target")
	journal := inplace.DefaultJournal(img)
	// records reads (or writes back) what holds the run's records.
	volumeRecords := func(b []byte) []byte {
		f, err := os.OpenFile(img, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		size, _ := f.Seek(0, 2)
		off := size - 16<<10
		if b != nil {
			f.WriteAt(b, off)
			return nil
		}
		b = make([]byte, 8<<10) // the two record slots
		f.ReadAt(b, off)
		return b
	}
	plainJournal := func(b []byte) []byte {
		if b != nil {
			os.WriteFile(journal, b, 0o600)
			return nil
		}
		b, _ = os.ReadFile(journal)
		return b
	}
	for _, c := range []struct {
		name     string
		from     string
		args     []string
		records  func([]byte) []byte
		finished func(t *testing.T) bool
	}{
		{"volume encrypt", orig, []string{"encrypt", "--in-place", "-q", "--passphrase-file", pass}, volumeRecords, func(t *testing.T) bool {
			c, stdout, _ := runOut(t, "verify", "--passphrase-file", pass, img)
			return c == 0 && strings.Contains(stdout, "digest: ok")
		}},
		{"volume decrypt", vol, []string{"decrypt", "--in-place", "-q", "--passphrase-file", pass}, volumeRecords, func(t *testing.T) bool {
			return sameContent(t, img, orig)
		}},
		{"plain encrypt", orig, []string{"encrypt", "--in-place", "-q", "--type", "plain", "--key-file", key, "--offset", "2048"}, plainJournal, func(t *testing.T) bool {
			return sameContent(t, img, plainEnc)
		}},
		{"plain decrypt", plainEnc, []string{"decrypt", "--in-place", "-q", "--type", "plain", "--key-file", key, "--offset", "2048"}, plainJournal, func(t *testing.T) bool {
			return sameContent(t, img, orig)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := append(c.args, img)
			copyFile(t, c.from, img)
			os.Remove(journal)
			if killed, code, stderr := runKilledAt(t, "record:4", args...); !killed {
				t.Fatalf("not interrupted: exit %d: %s", code, stderr)
			}
			early := c.records(nil)
			if killed, code, stderr := runKilledAt(t, "record:8", args...); !killed {
				t.Fatalf("the resumed run was not interrupted: exit %d: %s", code, stderr)
			}
			late := c.records(nil)

			c.records(early)
			target, _ := os.ReadFile(img) // a volume's records are in it
			expectFail(t, exitInput, "records are older than its data", args...)
			unchanged(t, img, target)

			// The newest record zeroed: the one before it in force.
			zeroed := bytes.Clone(late)
			base := 0
			if strings.HasPrefix(c.name, "plain") {
				base = 4096 // the journal's records follow its anchor
			}
			slot := 0
			if bytes.Compare(zeroed[base+24:base+32], zeroed[base+4096+24:base+4096+32]) < 0 {
				slot = 1 // the higher sequence number (both are below 2^62)
			}
			clear(zeroed[base+slot*4096 : base+(slot+1)*4096])
			c.records(zeroed)
			target, _ = os.ReadFile(img)
			if code, _, stderr := runOut(t, args...); code != 0 {
				if code != exitInput {
					t.Fatalf("the newest record zeroed: exit %d: %s", code, stderr)
				}
				unchanged(t, img, target)
				c.records(late)
				if code, _, stderr := runOut(t, args...); code != 0 {
					t.Fatalf("the newest records put back: exit %d: %s", code, stderr)
				}
			}
			if !c.finished(t) {
				t.Fatal("the resumed run's result differs from the straight one")
			}
		})
	}
}
