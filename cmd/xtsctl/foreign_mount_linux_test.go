//go:build linux

package main

// open --mount of images made by other tools (BitLocker, FileVault 2,
// VeraCrypt and TrueCrypt), whose filesystems (NTFS, HFS+, FAT) this
// kernel may have no driver for: then a FUSE program mounts them
// (internal/mount.MountFS). Every test runs the real command, checks the
// device it serves against the samples' notes (testdata/README.md of
// each format) or an independent implementation, reads the mounted
// files, closes, and finds nothing left: no mount, loop device, server
// or FUSE program (servingEnv).
//
// The samples come from cryptsetup's test suite, which kept of each
// image only the sectors its tests read: the headers and the
// filesystem's first sectors (46 of 204,800 in a BitLocker image, 8 of
// 584 in a VeraCrypt one). Their filesystems are incomplete, and no
// driver can list their files. So each is also completed, by writing a
// whole filesystem into a copy through an encrypting writer (dislocker
// for BitLocker, an independent implementation; xtsctl's own read-write
// open for VeraCrypt and TrueCrypt), and that copy is mounted and read.

import (
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/xtsctl/xtsctl/internal/mount"
)

// needTools skips t unless every tool is installed, naming the Debian
// package that has it (scripts/install-deps.sh installs them all).
func needTools(t *testing.T, tools map[string]string) {
	t.Helper()
	for tool, pkg := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			if _, err := os.Stat(filepath.Join("/sbin", tool)); err != nil {
				t.Skipf("%s missing: apt-get install %s (scripts/install-deps.sh)", tool, pkg)
			}
		}
	}
}

// extractSamples extracts a format's sample archive (sparse) and returns
// the directory it made.
func extractSamples(t *testing.T, archive, sub string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("tar", "xJSf", archive, "-C", dir).CombinedOutput(); err != nil {
		t.Fatalf("tar xJSf %s: %v\n%s", archive, err, out)
	}
	return filepath.Join(dir, sub)
}

// copySparse copies an image, keeping its holes.
func copySparse(t *testing.T, src, dst string) {
	t.Helper()
	if out, err := exec.Command("cp", "--sparse=always", src, dst).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v\n%s", err, out)
	}
	os.Chmod(dst, 0o600)
}

func sha256File(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// blkid returns what blkid (util-linux), probing the device itself, says
// of the filesystem on it: the value of tag (UUID, TYPE).
func blkid(t *testing.T, dev, tag string) string {
	t.Helper()
	out, err := exec.Command("blkid", "-p", "-o", "value", "-s", tag, dev).Output()
	if err != nil {
		t.Fatalf("blkid -p %s: %v", dev, err)
	}
	return strings.TrimSpace(string(out))
}

// syncDevice makes what a tool wrote to dev through the page cache
// durable while the server serves it: left dirty, the kernel would flush
// it when the server lets go of the device, into the server itself.
func syncDevice(t *testing.T, dev string) {
	t.Helper()
	f, err := os.OpenFile(dev, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

// readTree reads every regular file below dir, by path relative to it,
// and fails on anything else that cannot be read.
func readTree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(dir, p)
			files[rel] = b
		}
		return nil
	})
	if err != nil {
		t.Fatalf("read the files of %s: %v", dir, err)
	}
	return files
}

// sameFiles fails t unless got holds exactly the files of want. FAT
// short names read back in capitals: fold, where asked.
func sameFiles(t *testing.T, got, want map[string][]byte, fold bool) {
	t.Helper()
	key := func(s string) string {
		if fold {
			return strings.ToUpper(s)
		}
		return s
	}
	seen := map[string]bool{}
	for name, b := range got {
		w, ok := want[key(name)]
		if !ok {
			for n, wb := range want {
				if key(n) == key(name) {
					w, ok = wb, true
				}
			}
		}
		switch {
		case !ok:
			t.Errorf("unexpected file %s in the mount", name)
		case !bytes.Equal(b, w):
			t.Errorf("%s: %d bytes read differ from the %d written", name, len(b), len(w))
		}
		seen[key(name)] = true
	}
	for name := range want {
		if !seen[key(name)] {
			t.Errorf("%s is missing from the mount", name)
		}
	}
}

// randomFiles returns files of a few sizes under a few directories.
func randomFiles(sizes ...int) map[string][]byte {
	files := map[string][]byte{}
	for i, n := range sizes {
		b := make([]byte, n)
		rand.Read(b)
		files[filepath.Join(fmt.Sprintf("dir%d", i%2), fmt.Sprintf("f%d.bin", n))] = b
	}
	return files
}

// openMounted opens img read-only with --mount on a new directory and
// returns the device and the directory; it fails t unless xtsctl says it
// mounted the filesystem it found.
func openMounted(t *testing.T, dir, img, name string, flags ...string) (dev, mnt string) {
	t.Helper()
	mnt = filepath.Join(dir, "mnt-"+name)
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	r := mustRun(t, args("open", "--readonly", "--mount", mnt, flags, img, name)...)
	dev = strings.TrimSpace(r.stdout)
	m, err := mount.At(mnt)
	if err != nil || m == nil || m.Source != dev || (m.Flags.Mount|m.Flags.Super)&syscall.MS_RDONLY == 0 {
		t.Fatalf("after open --readonly --mount: %s has %+v (%v), want a read-only mount of %s\n%s", mnt, m, err, dev, r.stderr)
	}
	return dev, mnt
}

// mustClose closes name. A close refused because another program on the
// machine holds the device for a moment is tried again for a while: a
// program that opens every loop device (losetup, blkid, udev), or a mount
// namespace made by something that does not take the tests' lock
// (testutil.ServingTest), whose copy of every mount holds ours until it
// ends. close is right to refuse then; the holder goes by itself, and one
// of ours would not.
func mustClose(t *testing.T, name string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		r := xtsctlRun(t, "close", name)
		if r.code == 0 {
			return
		}
		held := r.code == exitDevice && (strings.Contains(r.stderr, "is mounted in another mount namespace") ||
			strings.Contains(r.stderr, "is open in process") || strings.Contains(r.stderr, "is in use"))
		if !held || time.Now().After(deadline) {
			t.Fatalf("xtsctl close %s: exit %d\n%s", name, r.code, r.stderr)
		}
		t.Logf("close %s refused for now; trying again:\n%s", name, r.stderr)
	}
}

// closeMounted closes name and checks that its mount is gone.
func closeMounted(t *testing.T, name, mnt string) {
	t.Helper()
	mustClose(t, name)
	if m, err := mount.At(mnt); m != nil || err != nil {
		t.Fatalf("after close: %s still has %+v (%v)", mnt, m, err)
	}
}

// driverProcesses lists the FUSE programs running with this test's run
// directory in their environment (they inherit the server's): none may
// be left after a close.
func driverProcesses(t *testing.T) []string {
	t.Helper()
	run := os.Getenv("XTSCTL_RUNDIR")
	var out []string
	procs, _ := filepath.Glob("/proc/[0-9]*/environ")
	for _, p := range procs {
		env, _ := os.ReadFile(p)
		if !bytes.Contains(env, []byte("XTSCTL_RUNDIR="+run+"\x00")) {
			continue
		}
		comm, _ := os.ReadFile(filepath.Join(filepath.Dir(p), "comm"))
		c := strings.TrimSpace(string(comm))
		if c != "xtsctl" && !strings.HasSuffix(os.Args[0], c) && running(atoi(strings.Split(p, "/")[2])) {
			out = append(out, p+" ("+c+")")
		}
	}
	return out
}

// checkNoDrivers fails t if a FUSE program of this test still runs.
func checkNoDrivers(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		left := driverProcesses(t)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			// Ended here, not left holding a loop device after the test.
			for _, p := range left {
				syscall.Kill(atoi(strings.Split(p, "/")[2]), syscall.SIGKILL)
			}
			t.Fatalf("FUSE programs still running after close: %v", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// fuseRun runs a FUSE program in the foreground (the last of args is its
// mountpoint) until its mount appears, and returns a function that
// unmounts it and waits for the program to end.
func fuseRun(t *testing.T, stdin string, name string, args ...string) (stop func()) {
	t.Helper()
	mnt := args[len(args)-1]
	cmd := exec.Command(name, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // no terminal: a prompt reads stdin
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	for deadline := time.Now().Add(time.Minute); ; {
		if m, _ := mount.At(mnt); m != nil {
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("%s exited before mounting: %v\n%s", name, err, &out)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("%s did not mount in a minute\n%s", name, &out)
		}
	}
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		if err := mount.Unmount(mnt); err != nil {
			t.Errorf("unmount %s: %v", mnt, err)
			// Detached, so that the program killed below leaves no
			// dead mount behind.
			if m, _ := mount.At(mnt); m != nil {
				mount.DetachID(mnt, m.ID)
			}
		}
		select {
		case <-exited:
		case <-time.After(time.Minute):
			cmd.Process.Kill()
			t.Errorf("%s did not end after its unmount", name)
		}
	}
	t.Cleanup(stop)
	return stop
}

// bitlkSample is one BitLocker sample image of bitlk/testdata/README.md.
type bitlkSample struct {
	file, password, recovery, bek, sha256, uuid string
}

var bitlkSamples = []bitlkSample{
	{"bitlk-aes-xts-128.img", "anaconda", "235818-357951-253979-013365-241120-245575-342914-591910", "",
		"674e3a976927fd62f3fc26df2c695cac75b8d364e3b45393717efa971f16db0f", "68844E71844E41B4"},
	{"bitlk-aes-cbc-128.img", "anaconda", "042647-302313-590458-071500-554323-116567-412181-516978", "",
		"04500a8120ba355ed206284e03e26e59b7e1f1832868e1d69bb47023ebd3460f", "F2D4F156D4F11E13"},
	{"bitlk-aes-xts-128-startup-key.img", "", "363770-230505-096371-652674-567006-579150-291038-408111", "4381F759-C4F8-4DE0-BB61-FC33A831BDA5.BEK",
		"bbb68369d8f7badb2c2330349d9d0cf12e68f54eece25e718d2bb13feba23f7a", "27F7B5DB3754A2A9"},
	{"bitlk-aes-cbc-elephant-128.img", "anaconda", "529573-278784-259347-197835-171457-264044-610280-313269", "",
		"b18e4f956295bc0f327e551322261fb9c74ac0d3ce58bf3b806e98474e1619ea", "3ECCF65ACCF60BC1"},
}

// unlockWays are the flags that unlock s, one set per protector: the
// user password, the recovery password (recognised by its shape) and the
// startup key.
func (s bitlkSample) unlockWays(t *testing.T, dir, samples string) map[string][]string {
	ways := map[string][]string{"recovery password": {"--passphrase-file", secretFile(t, dir, "recovery", []byte(s.recovery))}}
	if s.password != "" {
		ways["password"] = []string{"--passphrase-file", secretFile(t, dir, "password", []byte(s.password))}
	}
	if s.bek != "" {
		ways["startup key"] = []string{"--key-file", filepath.Join(samples, s.bek)}
	}
	return ways
}

// ntfsSectors is the size of the NTFS written into a BitLocker sample,
// in 512-byte sectors: 32 MiB, below every sample's metadata copies and
// moved boot sectors (from 33 MiB on), which read as zeros and keep what
// is written there.
const ntfsSectors = 65536

// completeBitLocker writes a whole NTFS holding files into the copy img of
// a BitLocker sample through dislocker-fuse, read-write: dislocker, not
// xtsctl, encrypts it. It returns the files, and the SHA-256 and NTFS
// serial of the volume as dislocker decrypts it afterwards, read-only.
func completeBitLocker(t *testing.T, dir, img string, s bitlkSample, samples string) (files map[string][]byte, sum, uuid string) {
	t.Helper()
	unlock, stdin := []string{"-u"}, s.password+"\n" // the prompt reads stdin: no secret in argv
	if s.password == "" {
		unlock, stdin = []string{"-f", filepath.Join(samples, s.bek)}, ""
	}
	dl := filepath.Join(dir, "dislocker")
	nt := filepath.Join(dir, "ntfs")
	os.Mkdir(dl, 0o755)
	os.Mkdir(nt, 0o755)
	stop := fuseRun(t, stdin, "dislocker-fuse", slices.Concat([]string{"-V", img}, unlock, []string{"--", "-f", dl})...)
	plain := filepath.Join(dl, "dislocker-file")
	if out, err := exec.Command("mkntfs", "-q", "-F", "-f", "-L", "COMPLETED", plain, fmt.Sprint(ntfsSectors)).CombinedOutput(); err != nil {
		t.Fatalf("mkntfs: %v\n%s", err, out)
	}
	stopNTFS := fuseRun(t, "", "ntfs-3g", "-o", "no_detach", plain, nt)
	files = randomFiles(0, 1, 4097, 1<<20+5, 3<<20)
	files["hello.txt"] = []byte("written through dislocker\n")
	for name, b := range files {
		os.MkdirAll(filepath.Dir(filepath.Join(nt, name)), 0o755)
		writeSynced(t, filepath.Join(nt, name), b)
	}
	stopNTFS()
	stop()
	stop = fuseRun(t, stdin, "dislocker-fuse", slices.Concat([]string{"-r", "-V", img}, unlock, []string{"--", "-f", dl})...)
	defer stop()
	return files, sha256File(t, plain), blkid(t, plain, "UUID")
}

// TestOpenMountBitLocker decrypts and opens every BitLocker sample with
// each of its protectors: decrypt's output and the device hash to the
// notes' SHA-256, and the device holds the NTFS serial they give; --mount reaches the NTFS driver (the kernel's or
// ntfs-3g), which finds the sample's NTFS incomplete or mounts what there
// is, and nothing is left either way. Then each sample is completed with a
// whole NTFS written through dislocker, and opened --readonly --mount with
// each protector: the device equals dislocker's, and the files read back.
func TestOpenMountBitLocker(t *testing.T) {
	skipUnlessServing(t)
	needTools(t, map[string]string{"blkid": "util-linux", "tar": "tar", "xz": "xz-utils", "dislocker-fuse": "dislocker",
		"mkntfs": "ntfs-3g", "ntfs-3g": "ntfs-3g"})
	for _, s := range bitlkSamples {
		t.Run(s.file, func(t *testing.T) {
			dir := servingEnv(t)
			samples := extractSamples(t, "../../bitlk/testdata/bitlk.tar.xz", "bitlk")
			sample := filepath.Join(samples, s.file)
			ways := s.unlockWays(t, dir, samples)
			for way, flags := range ways {
				out := filepath.Join(dir, "decrypted")
				mustRun(t, args("decrypt", flags, sample, out)...)
				if got := sha256File(t, out); got != s.sha256 {
					t.Errorf("%s: decrypt wrote %s, the notes say %s", way, got, s.sha256)
				}
				os.Remove(out)
				r := mustRun(t, args("open", "--readonly", flags, sample, "orig")...)
				dev := strings.TrimSpace(r.stdout)
				if got := sha256File(t, dev); got != s.sha256 {
					t.Errorf("%s: the device hashes to %s, the notes say %s", way, got, s.sha256)
				}
				if got := blkid(t, dev, "UUID"); got != s.uuid {
					t.Errorf("%s: NTFS serial %s, the notes say %s", way, got, s.uuid)
				}
				mustClose(t, "orig")
			}
			mnt := filepath.Join(dir, "mnt-orig")
			os.Mkdir(mnt, 0o755)
			r := xtsctlRun(t, args("open", "--readonly", "--mount", mnt, ways["recovery password"], sample, "orig")...)
			switch {
			case r.code == 0:
				t.Logf("the sample's incomplete NTFS mounted; its root lists %d entries", len(readDirNames(t, mnt)))
				closeMounted(t, "orig", mnt)
			case r.code != exitDevice || !strings.Contains(r.stderr, "(ntfs) on "+mnt):
				t.Fatalf("open --mount of the sample: exit %d, want 0 or %d from its NTFS driver\n%s", r.code, exitDevice, r.stderr)
			default:
				t.Logf("the NTFS driver refuses the sample's incomplete NTFS, as it should:\n%s", r.stderr)
			}
			checkNoDrivers(t)

			img := filepath.Join(dir, "completed.img")
			copySparse(t, sample, img)
			files, sum, uuid := completeBitLocker(t, dir, img, s, samples)
			for way, flags := range ways {
				dev, mnt := openMounted(t, dir, img, "done", flags...)
				if got := sha256File(t, dev); got != sum {
					t.Errorf("%s: the device hashes to %s, dislocker's to %s", way, got, sum)
				}
				if got := blkid(t, dev, "UUID"); got != uuid {
					t.Errorf("%s: NTFS serial %s, dislocker's volume has %s", way, got, uuid)
				}
				sameFiles(t, readTree(t, mnt), files, false)
				closeMounted(t, "done", mnt)
				checkNoDrivers(t)
			}
		})
	}
}

func readDirNames(t *testing.T, dir string) []string {
	t.Helper()
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	names, _ := f.Readdirnames(-1)
	return names
}

// fvault2Sample is fvault2/testdata's image, as its notes describe it.
const (
	fvault2Password = "heslo123"
	fvault2SHA256   = "2c662e36c0f7e2f5583e6a939bbcbdc660805692d0fccaa45ad4052beb3b8e18"
	fvault2UUID     = "de124d8a-2164-394e-924f-8e28db0a09cb"
)

// TestOpenFileVault2 decrypts and opens the FileVault 2 sample, detected
// by its header: decrypt's output and the device hash to the notes'
// SHA-256; the device holds the HFS+ UUID they give and is recognised as
// HFS+ (blkid agrees).
func TestOpenFileVault2(t *testing.T) {
	skipUnlessServing(t)
	needTools(t, map[string]string{"blkid": "util-linux", "tar": "tar", "xz": "xz-utils"})
	dir := servingEnv(t)
	img := filepath.Join(extractSamples(t, "../../fvault2/testdata/fvault2.tar.xz", "fvault2"), "fvault2-small.img")
	pw := secretFile(t, dir, "pw", []byte(fvault2Password))
	out := filepath.Join(dir, "decrypted")
	mustRun(t, "decrypt", "--passphrase-file", pw, img, out)
	if got := sha256File(t, out); got != fvault2SHA256 {
		t.Errorf("decrypt wrote %s, the notes say %s", got, fvault2SHA256)
	}
	dev := strings.TrimSpace(mustRun(t, "open", "--readonly", "--passphrase-file", pw, img, "fv").stdout)
	if got := sha256File(t, dev); got != fvault2SHA256 {
		t.Errorf("the device hashes to %s, the notes say %s", got, fvault2SHA256)
	}
	if got := blkid(t, dev, "UUID"); got != fvault2UUID {
		t.Errorf("HFS+ UUID %s, the notes say %s", got, fvault2UUID)
	}
	if got, err := mount.Detect(dev); err != nil || got != mount.FSHFSPlus || blkid(t, dev, "TYPE") != "hfsplus" {
		t.Errorf("Detect = %q, %v; blkid says %q; want hfsplus", got, err, blkid(t, dev, "TYPE"))
	}
	mustClose(t, "fv")
}

// TestOpenMountFileVault2 mounts the FileVault 2 sample's HFS+, through
// the kernel's hfsplus or hfsfuse. Where neither is there (Debian 12 has
// no hfsfuse), open --mount fails naming both, leaves nothing, and the
// test skips.
func TestOpenMountFileVault2(t *testing.T) {
	skipUnlessServing(t)
	needTools(t, map[string]string{"tar": "tar", "xz": "xz-utils"})
	dir := servingEnv(t)
	img := filepath.Join(extractSamples(t, "../../fvault2/testdata/fvault2.tar.xz", "fvault2"), "fvault2-small.img")
	pw := secretFile(t, dir, "pw", []byte(fvault2Password))
	mnt := filepath.Join(dir, "mnt")
	os.Mkdir(mnt, 0o755)
	r := xtsctlRun(t, "open", "--readonly", "--passphrase-file", pw, "--mount", mnt, img, "fv")
	kernel, _ := os.ReadFile("/proc/filesystems")
	if !strings.Contains(string(kernel), "\thfsplus\n") && !mount.HelperAvailable(mount.FSHFSPlus) {
		if r.code != exitDevice || !strings.Contains(r.stderr, "no hfsplus driver") || !strings.Contains(r.stderr, "hfsfuse") {
			t.Fatalf("open --mount without an HFS+ driver: exit %d, want %d naming hfsplus and hfsfuse\n%s", r.code, exitDevice, r.stderr)
		}
		if m, _ := mount.At(mnt); m != nil {
			t.Fatalf("%s has a mount: %+v", mnt, m)
		}
		t.Skipf("no HFS+ driver here (the kernel has no hfsplus, and hfsfuse, which no Debian 12 package has, is not installed): the sample cannot be mounted; open --mount said so:\n%s", r.stderr)
	}
	// The sample's HFS+ is as incomplete as the other samples'
	// filesystems: the driver may refuse it.
	if r.code != 0 {
		if r.code != exitDevice || !strings.Contains(r.stderr, "(hfsplus) on "+mnt) {
			t.Fatalf("open --mount: exit %d, want 0 or %d from the HFS+ driver\n%s", r.code, exitDevice, r.stderr)
		}
		t.Logf("the HFS+ driver refuses the sample's incomplete HFS+:\n%s", r.stderr)
		return
	}
	t.Logf("the sample's root lists %d entries", len(readDirNames(t, mnt)))
	closeMounted(t, "fv", mnt)
	checkNoDrivers(t)
}

// TestOpenReadWriteRefusedBitLockerFileVault2: xtsctl does not write
// BitLocker and FileVault 2 images: a read-write open, with --mount or
// without, is refused naming --readonly, and nothing is served.
func TestOpenReadWriteRefusedBitLockerFileVault2(t *testing.T) {
	skipUnlessServing(t)
	needTools(t, map[string]string{"tar": "tar", "xz": "xz-utils"})
	dir := servingEnv(t)
	bitlk := filepath.Join(extractSamples(t, "../../bitlk/testdata/bitlk.tar.xz", "bitlk"), "bitlk-aes-xts-128.img")
	fvault2 := filepath.Join(extractSamples(t, "../../fvault2/testdata/fvault2.tar.xz", "fvault2"), "fvault2-small.img")
	mnt := filepath.Join(dir, "mnt")
	os.Mkdir(mnt, 0o755)
	for _, c := range []struct{ img, pw string }{{bitlk, "anaconda"}, {fvault2, fvault2Password}} {
		pw := secretFile(t, dir, "pw", []byte(c.pw))
		for _, extra := range [][]string{nil, {"--mount", mnt}} {
			r := xtsctlRun(t, args("open", "--passphrase-file", pw, extra, c.img, "rw")...)
			if r.code != exitUsage || !strings.Contains(r.stderr, "--readonly") || !strings.Contains(r.stderr, "read-only") {
				t.Errorf("read-write open of %s %v: exit %d, want %d naming --readonly\n%s", filepath.Base(c.img), extra, r.code, exitUsage, r.stderr)
			}
			if len(listOpen(t)) != 0 {
				t.Fatalf("a refused open left %v open", listOpen(t))
			}
		}
	}
}

func listOpen(t *testing.T) []string {
	t.Helper()
	var names []string
	for line := range strings.SplitSeq(mustRun(t, "status").stdout, "\n") {
		if name, ok := strings.CutSuffix(line, ": open"); ok {
			names = append(names, name)
		}
	}
	return names
}

// tcryptSample is one VeraCrypt or TrueCrypt sample of
// tcrypt/testdata/README.md and how to open it.
type tcryptSample struct {
	name, file, password, uuid string
	flags                      []string
}

var tcryptSamples = []tcryptSample{
	{"veracrypt", "vc_1-sha512-xts-aes", "aaaaaaaaaaaa", "DEAD-BABE", []string{"--tcrypt-hash", "sha512"}},
	{"truecrypt", "tc_5-sha512-xts-aes", "aaaaaaaaaaaa", "DEAD-BABE", []string{"--tcrypt-hash", "sha512"}},
	{"outer", "tc_4-sha512-xts-aes-hidden", "aaaaaaaaaaaa", "DEAD-BABE", []string{"--tcrypt-hash", "sha512"}},
	{"hidden", "tc_4-sha512-xts-aes-hidden", "bbbbbbbbbbbb", "CAFE-BABE", []string{"--tcrypt-hash", "sha512", "--tcrypt-hidden"}},
	{"keyfiles", "tck_5-sha512-xts-aes", "aaaaaaaaaaaa", "DEAD-BABE", []string{"--tcrypt-hash", "sha512",
		"--key-file", "../../tcrypt/testdata/keyfile1", "--key-file", "../../tcrypt/testdata/keyfile2"}},
	{"system", "sys_vc_1_mbr_part-sha256-xts-aes.gz", "aaaaaaaaaaaa", "DEAD-BABE", []string{"--tcrypt-hash", "sha256", "--tcrypt-system"}},
}

// copyTcrypt copies a tcrypt sample (decompressing .gz) to dir.
func copyTcrypt(t *testing.T, dir, file string) string {
	t.Helper()
	src, err := os.Open(filepath.Join("../../tcrypt/testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var r io.Reader = src
	if name, ok := strings.CutSuffix(file, ".gz"); ok {
		if r, err = gzip.NewReader(src); err != nil {
			t.Fatal(err)
		}
		file = name
	}
	var b bytes.Buffer
	if _, err := io.Copy(&b, r); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, file)
	if err := os.WriteFile(p, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// completeFAT makes the FAT on dev whole again, keeping its boot sector
// (and so its serial): the sample kept only that, so its FATs and root
// directory decrypt to noise. Both FATs become empty (the media byte and
// the end-of-chain marker first) and the root directory too; then mtools
// (no mount) puts files in, as many as the FAT has room for (the 37-sector
// FATs of the small samples have one data cluster), and completeFAT
// returns them.
func completeFAT(t *testing.T, dev, name string) map[string][]byte {
	t.Helper()
	f, err := os.OpenFile(dev, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	boot := make([]byte, 512)
	if _, err := f.ReadAt(boot, 0); err != nil {
		t.Fatal(err)
	}
	bps := int64(binary.LittleEndian.Uint16(boot[11:]))
	perCluster := int64(boot[13])
	reserved := int64(binary.LittleEndian.Uint16(boot[14:]))
	fats := int64(boot[16])
	rootEntries := int64(binary.LittleEndian.Uint16(boot[17:]))
	total := int64(binary.LittleEndian.Uint16(boot[19:]))
	if total == 0 {
		total = int64(binary.LittleEndian.Uint32(boot[32:]))
	}
	perFAT := int64(binary.LittleEndian.Uint16(boot[22:]))
	if bps != 512 || perCluster == 0 || fats == 0 || perFAT == 0 || string(boot[0x36:0x3a]) != "FAT1" {
		t.Fatalf("%s: not the FAT12/16 boot sector the samples have: %x", dev, boot[:64])
	}
	rootSectors := (rootEntries*32 + bps - 1) / bps
	meta := reserved + fats*perFAT + rootSectors
	clusters := (total - meta) / perCluster
	if _, err := f.WriteAt(make([]byte, (meta-reserved)*bps), reserved*bps); err != nil {
		t.Fatal(err)
	}
	for i := range fats {
		if _, err := f.WriteAt([]byte{boot[21], 0xFF, 0xFF}, (reserved+i*perFAT)*bps); err != nil {
			t.Fatal(err)
		}
	}
	// Buffered writes to the device are made durable here, not left
	// for the server to flush when it goes: it would flush into itself.
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"HELLO.TXT": []byte("hello, " + name + "\n"), "EMPTY.TXT": nil}
	if clusters >= 64 {
		for k, b := range randomFiles(1, 511, 4097, 100000) {
			files[strings.ToUpper(k)] = b // 8.3 names: DIR0/F4097.BIN
		}
	}
	src := t.TempDir()
	for name, b := range files {
		p := filepath.Join(src, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, b, 0o600)
	}
	entries, _ := os.ReadDir(src)
	for _, e := range entries {
		cmd := exec.Command("mcopy", "-s", "-i", dev, filepath.Join(src, e.Name()), "::/")
		cmd.Env = append(os.Environ(), "MTOOLS_SKIP_CHECK=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			f.Sync()
			t.Fatalf("mcopy: %v\n%s", err, out)
		}
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	return files
}

// TestOpenMountTcrypt opens every VeraCrypt and TrueCrypt sample (--type
// tcrypt; the hidden volume with --tcrypt-hidden, the system drive with
// --tcrypt-system, keyfiles with --key-file repeated) read-only with
// --mount: the FAT's serial is the notes' UUID, and the device equals what
// decrypt writes. The samples' FATs hold nothing but their boot sectors;
// so each is then completed on a copy opened read-write (an empty FAT with
// the same boot sector, files put in by mtools), and that copy opened
// read-only with --mount: the files read back through the FAT driver (the
// kernel's vfat or fusefat), and the serial is unchanged.
func TestOpenMountTcrypt(t *testing.T) {
	skipUnlessServing(t)
	needTools(t, map[string]string{"blkid": "util-linux", "mcopy": "mtools"})
	kernel, _ := os.ReadFile("/proc/filesystems")
	if !strings.Contains(string(kernel), "\tvfat\n") {
		needTools(t, map[string]string{"fusefat": "fusefat"})
	}
	for _, s := range tcryptSamples {
		t.Run(s.name, func(t *testing.T) {
			dir := servingEnv(t)
			img := copyTcrypt(t, dir, s.file)
			flags := slices.Concat([]string{"--type", "tcrypt", "--passphrase-file", secretFile(t, dir, "pw", []byte(s.password))}, s.flags)

			out := filepath.Join(dir, "plain")
			mustRun(t, args("decrypt", flags, img, out)...)
			dev, mnt := openMounted(t, dir, img, "orig", flags...)
			if got := blkid(t, dev, "UUID"); got != s.uuid {
				t.Errorf("FAT serial %s, the notes say %s", got, s.uuid)
			}
			if got, want := sha256File(t, dev), sha256File(t, out); got != want {
				t.Errorf("the device hashes to %s, decrypt's output to %s", got, want)
			}
			readDirNames(t, mnt) // the listing of noise: it must read, whatever it holds
			closeMounted(t, "orig", mnt)
			checkNoDrivers(t)

			dev = strings.TrimSpace(mustRun(t, args("open", flags, img, "rw")...).stdout)
			files := completeFAT(t, dev, s.name)
			mustClose(t, "rw")

			dev, mnt = openMounted(t, dir, img, "done", flags...)
			if got := blkid(t, dev, "UUID"); got != s.uuid {
				t.Errorf("completed: FAT serial %s, want %s still", got, s.uuid)
			}
			sameFiles(t, readTree(t, mnt), files, true)
			closeMounted(t, "done", mnt)
			checkNoDrivers(t)
		})
	}
}

// TestOpenMountNTFSExFATReadWrite: NTFS and exFAT in a plain image, opened
// read-write with --mount (through ntfs-3g and exfat-fuse where the kernel
// has no driver): files written, closed (the program has ended), opened
// read-only with --mount, read back. FAT through fusefat is mounted
// read-only only: a read-write open with --mount is refused naming
// --readonly.
func TestOpenMountNTFSExFATReadWrite(t *testing.T) {
	skipUnlessServing(t)
	kernel, _ := os.ReadFile("/proc/filesystems")
	for _, c := range []struct {
		fs, mkfs, pkg string
	}{{"ntfs", "mkntfs", "ntfs-3g"}, {"exfat", "mkfs.exfat", "exfatprogs"}, {"vfat", "mkfs.vfat", "dosfstools"}} {
		t.Run(c.fs, func(t *testing.T) {
			needTools(t, map[string]string{c.mkfs: c.pkg})
			d, _ := mount.DriverFor(c.fs)
			if !strings.Contains(string(kernel), "\t"+d.Kernel+"\n") {
				needTools(t, map[string]string{d.Helper: d.Package})
			}
			dir := servingEnv(t)
			img, flags := plainImage(t, dir, 64<<20)
			dev := strings.TrimSpace(mustRun(t, args("open", flags, img, "fs")...).stdout)
			mkfs := exec.Command(c.mkfs, dev)
			if c.fs == "ntfs" {
				mkfs = exec.Command(c.mkfs, "-q", "-f", dev)
			}
			out, err := mkfs.CombinedOutput()
			syncDevice(t, dev)
			if err != nil {
				t.Fatalf("%s: %v\n%s", c.mkfs, err, out)
			}
			mustClose(t, "fs")
			mnt := filepath.Join(dir, "mnt")
			os.Mkdir(mnt, 0o755)
			if c.fs == "vfat" && !strings.Contains(string(kernel), "\tvfat\n") {
				mustFail(t, exitDevice, "--readonly", args("open", "--mount", mnt, flags, img, "fs")...)
				if m, _ := mount.At(mnt); m != nil {
					t.Fatalf("refused, but %s has %+v", mnt, m)
				}
				return
			}
			mustRun(t, args("open", "--mount", mnt, flags, img, "fs")...)
			files := makeFiles(t, mnt)
			closeMounted(t, "fs", mnt)
			checkNoDrivers(t)
			_, mnt = openMounted(t, dir, img, "fs", flags...)
			checkFiles(t, mnt, files)
			closeMounted(t, "fs", mnt)
			checkNoDrivers(t)
		})
	}
}

// TestKillServerWithFUSEDriver: the server of an NTFS mounted through
// ntfs-3g is killed; close cleans up after it: the mount, the loop
// device, and ntfs-3g itself, which ends once its mount is gone.
func TestKillServerWithFUSEDriver(t *testing.T) {
	skipUnlessServing(t)
	needTools(t, map[string]string{"mkntfs": "ntfs-3g", "ntfs-3g": "ntfs-3g"})
	dir := servingEnv(t)
	img, flags := plainImage(t, dir, 32<<20)
	dev := strings.TrimSpace(mustRun(t, args("open", flags, img, "k")...).stdout)
	out, err := exec.Command("mkntfs", "-q", "-f", dev).CombinedOutput()
	syncDevice(t, dev)
	if err != nil {
		t.Fatalf("mkntfs: %v\n%s", err, out)
	}
	mustClose(t, "k")
	_, mnt := openMounted(t, dir, img, "k", flags...)
	st := serverOf(t, "k")
	if st.FSHelper == "" && st.HelperPID == 0 {
		kernel, _ := os.ReadFile("/proc/filesystems")
		if strings.Contains(string(kernel), "\tntfs3\n") {
			t.Skip("the kernel mounted NTFS itself (ntfs3): no FUSE program to clean up after")
		}
		t.Fatalf("no FUSE program recorded: %+v", st)
	}
	if !running(st.HelperPID) {
		t.Fatalf("%s (pid %d) recorded, but not running", st.FSHelper, st.HelperPID)
	}
	syscall.Kill(st.PID, syscall.SIGKILL)
	for running(st.PID) {
		time.Sleep(10 * time.Millisecond)
	}
	r := xtsctlRun(t, "close", "k")
	if r.code != 0 && r.code != exitDevice {
		t.Fatalf("close after the server died: exit %d\n%s", r.code, r.stderr)
	}
	if m, _ := mount.At(mnt); m != nil {
		t.Fatalf("after close: %s still has %+v", mnt, m)
	}
	checkNoDrivers(t)
	if _, err := os.Stat(filepath.Join(os.Getenv("XTSCTL_RUNDIR"), ".mnt", "k")); err == nil {
		t.Error("the staging directory is left")
	}
}
