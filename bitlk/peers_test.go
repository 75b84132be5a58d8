package bitlk

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/xtsctl/xtsctl/disk"
)

// The peers: dislocker-file (dislocker 0.7) decrypts a volume to a file;
// bdemount (libbde 20190102) serves it through FUSE. Both read the same
// images independently of us; both present the device as Windows sees it
// (the moved boot sectors at the start, the metadata areas as zeros), so
// their bytes must equal ours everywhere.

// dislocker decrypts image with dislocker-file and returns the output's
// path. The secrets of these test images are public, so argv is fine.
func dislocker(t *testing.T, image string, args ...string) (string, error) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "dislocker.out")
	cmd := exec.Command("dislocker-file", append(append([]string{"-V", image}, args...), "--", out)...)
	log, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("dislocker-file: %v: %s", err, lastLines(log, 3))
	}
	if _, err := os.Stat(out); err != nil {
		return "", fmt.Errorf("dislocker-file wrote nothing: %s", lastLines(log, 3))
	}
	return out, nil
}

func lastLines(b []byte, n int) string {
	l := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(l[max(0, len(l)-n):], " | ")
}

// bdemount serves image with bdemount and calls fn with the path of the
// device it exports; it unmounts afterwards.
func bdemount(t *testing.T, image string, args []string, fn func(dev string)) error {
	t.Helper()
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("no /dev/fuse: skipping the comparison with bdemount")
	}
	mnt := t.TempDir()
	var log bytes.Buffer
	cmd := exec.Command("bdemount", append(append([]string{}, args...), image, mnt)...)
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// bdemount goes into the background once the volume is open (its
	// first process exits 0): wait for the device, not for the process.
	dev := filepath.Join(mnt, "bde1")
	deadline := time.Now().Add(2 * time.Minute)
	exited := false
	for {
		if _, err := os.Stat(dev); err == nil {
			break
		}
		if !exited {
			select {
			case err := <-done:
				exited = true
				if err != nil {
					return fmt.Errorf("bdemount: %v: %s", err, lastLines(log.Bytes(), 3))
				}
			default:
			}
		}
		if time.Now().After(deadline) {
			if !exited {
				cmd.Process.Kill()
				<-done
			}
			syscall.Unmount(mnt, syscall.MNT_DETACH)
			return fmt.Errorf("bdemount did not serve the volume within 2 minutes: %s", lastLines(log.Bytes(), 3))
		}
		time.Sleep(100 * time.Millisecond)
	}
	defer func() {
		if err := syscall.Unmount(mnt, 0); err != nil {
			t.Logf("unmount %s: %v", mnt, err)
			syscall.Unmount(mnt, syscall.MNT_DETACH)
		}
		if !exited {
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				cmd.Process.Kill()
				<-done
			}
		}
	}()
	fn(dev)
	return nil
}

// compareDevice compares our device with a peer's output, byte for byte,
// and names the first difference and the part of our layout it is in.
func compareDevice(t *testing.T, peer string, u *disk.Unlocked, ours *disk.ReaderAt, peerFile string) {
	t.Helper()
	f, err := os.Open(peerFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != ours.Size() {
		t.Errorf("%s's device has %d bytes, ours %d", peer, fi.Size(), ours.Size())
	}
	a, b := make([]byte, 1<<20), make([]byte, 1<<20)
	for off := int64(0); off < min(fi.Size(), ours.Size()); off += int64(len(a)) {
		n := int(min(int64(len(a)), ours.Size()-off))
		if _, err := ours.ReadAt(a[:n], off); err != nil && !errors.Is(err, io.EOF) {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(io.NewSectionReader(f, off, int64(n)), b[:n]); err != nil {
			t.Fatal(err)
		}
		if i := firstDiff(a[:n], b[:n]); i >= 0 {
			at := off + int64(i)
			kind := "?"
			for _, e := range u.Layout.Extents {
				if at >= e.Offset && at < e.Offset+e.Length {
					kind = fmt.Sprintf("%s extent [%d, %d) from image byte %d", e.Kind, e.Offset, e.Offset+e.Length, e.Source)
				}
			}
			t.Fatalf("%s's device differs from ours first at byte %d, in our %s", peer, at, kind)
		}
	}
}

// TestPeersSamples: dislocker-file (with the password, or the startup
// key) and bdemount (with the recovery password) read every sample to
// the same bytes as we do, whose SHA-256 is cryptsetup's; blkid finds the
// NTFS serial in ours.
func TestPeersSamples(t *testing.T) {
	needTool(t, "dislocker-file", "dislocker")
	needTool(t, "bdemount", "libbde-utils")
	for _, s := range samples {
		t.Run(s.file, func(t *testing.T) {
			path := samplePath(t, s.file)
			u := mustUnlock(t, path, request(), &disk.Secret{Passphrase: []byte(s.recovery)})
			_, ours := serve(t, path, u)

			args := []string{"-u" + s.password}
			if s.password == "" {
				args = []string{"-f", filepath.Join(sampleDir(t), s.bek)}
			}
			out, err := dislocker(t, path, args...)
			if err != nil {
				t.Fatal(err)
			}
			compareDevice(t, "dislocker-file", u, ours, out)
			if got := fileSHA256(t, out); got != s.sha256 {
				t.Errorf("dislocker-file's device SHA-256 %s, want %s", got, s.sha256)
			}
			if uuid, err := exec.Command("blkid", "-p", "-o", "value", "-s", "UUID", out).Output(); err == nil && strings.TrimSpace(string(uuid)) != s.serial {
				t.Errorf("blkid finds UUID %q in the device, want %s", strings.TrimSpace(string(uuid)), s.serial)
			}

			err = bdemount(t, path, []string{"-r", s.recovery}, func(dev string) { compareDevice(t, "bdemount", u, ours, dev) })
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

func fileSHA256(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

// peerArgs picks a secret a peer takes for a crafted volume: a password
// in ASCII (dislocker 0.7 hashes other passwords wrongly, see
// TestPeerPasswordWidening), else the recovery password, the startup key
// or the clear key. flags are the peer's: password, recovery, startup key,
// clear key.
func peerArgs(t *testing.T, b *built, spec buildSpec, flags [4]string) []string {
	t.Helper()
	var out []string
	for _, p := range spec.protectors {
		var a []string
		switch p.protection {
		case protPassword:
			if !isASCII(p.secret) {
				continue
			}
			a = []string{flags[0] + p.secret}
		case protRecovery:
			a = []string{flags[1] + p.secret}
		case protStartupKey:
			bek := filepath.Join(t.TempDir(), "key.bek")
			if err := os.WriteFile(bek, b.bek, 0o600); err != nil {
				t.Fatal(err)
			}
			a = []string{flags[2], bek}
		case protClearKey:
			a = strings.Fields(flags[3])
		default:
			continue
		}
		if out == nil {
			out = a
		}
	}
	return out
}

func isASCII(s string) bool {
	for _, c := range []byte(s) {
		if c >= 0x80 {
			return false
		}
	}
	return true
}

// TestPeersBuilt: the crafted volumes (other methods, 4096-byte sectors,
// To Go, startup key, clear key, a TPM protector beside a recovery
// password, a non-ASCII password) read the same with dislocker-file and
// bdemount as with us, and as the plaintext they were made from. Where
// libbde 20190102 cannot open a volume, the test says why and skips it:
// AES-XTS-256 ("invalid tweak key value too small") and a clear key (the
// version-3 VMK entry Windows writes for it: "unsupported FVE metadata
// entry version").
func TestPeersBuilt(t *testing.T) {
	needTool(t, "dislocker-file", "dislocker")
	needTool(t, "bdemount", "libbde-utils")
	for i, c := range builtCases {
		t.Run(c.name, func(t *testing.T) {
			b, spec := builtCase(t, i)
			u := mustUnlock(t, b.path, request(), secretsOf(b, spec)[0].sec)
			_, ours := serve(t, b.path, u)
			plainFile := filepath.Join(t.TempDir(), "plain")
			if err := os.WriteFile(plainFile, b.plain, 0o600); err != nil {
				t.Fatal(err)
			}
			compareDevice(t, "the plaintext", u, ours, plainFile)

			if args := peerArgs(t, b, spec, [4]string{"-u", "-p", "-f", "-c"}); args == nil {
				t.Log("dislocker-file skipped: the volume's only secret is a non-ASCII password, which dislocker 0.7 hashes wrongly (TestPeerPasswordWidening)")
			} else {
				out, err := dislocker(t, b.path, args...)
				if err != nil {
					t.Fatal(err)
				}
				compareDevice(t, "dislocker-file", u, ours, out)
			}

			switch {
			case spec.method == 0x8005:
				t.Log("bdemount skipped: libbde 20190102 does not open AES-XTS-256 volumes (invalid tweak key value too small)")
				return
			case spec.protectors[0].protection == protClearKey:
				t.Log("bdemount skipped: libbde 20190102 refuses the version-3 VMK entry of a clear key (unsupported FVE metadata entry version)")
				return
			}
			bargs := peerArgs(t, b, spec, [4]string{"-p", "-r", "-s", ""})
			if !isASCII(spec.protectors[0].secret) {
				// libbde converts the password from UTF-8 to UTF-16 as
				// Windows does: give it the non-ASCII password itself.
				bargs = []string{"-p", spec.protectors[0].secret}
			}
			if err := bdemount(t, b.path, bargs, func(dev string) { compareDevice(t, "bdemount", u, ours, dev) }); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestPeerPasswordWidening pins down where dislocker 0.7 and we differ on
// a non-ASCII password: dislocker widens each UTF-8 byte to a 16-bit unit
// ("ä", c3 a4, becomes c3 00 a4 00; Windows hashes e4 00), so it opens a
// volume made with that hashing, which we (and Windows, and libbde)
// refuse; the volume made as Windows makes it (TestPeersBuilt,
// xts-128-unicode) opens with us and libbde, not with dislocker.
func TestPeerPasswordWidening(t *testing.T) {
	needTool(t, "dislocker-file", "dislocker")
	var widened []byte
	for _, c := range []byte(nonASCII) {
		widened = append(widened, c, 0)
	}
	spec := buildSpec{method: 0x8004, seed: 99, serial: 0xf1,
		protectors: []protSpec{{protection: protPassword, secret: nonASCII, utf16: widened}}}
	b := buildImage(t, t.TempDir(), spec)
	out, err := dislocker(t, b.path, "-u"+nonASCII)
	if err != nil {
		t.Fatalf("dislocker-file does not open a volume whose password was hashed byte by byte: %v", err)
	}
	plainFile := filepath.Join(t.TempDir(), "plain")
	if err := os.WriteFile(plainFile, b.plain, 0o600); err != nil {
		t.Fatal(err)
	}
	if fileSHA256(t, out) != fileSHA256(t, plainFile) {
		t.Fatal("dislocker-file opened the volume but read it wrong")
	}
	_, err = unlock(t, b.path, request(), &disk.Secret{Passphrase: []byte(nonASCII)})
	if !errors.Is(err, disk.ErrWrongSecret) || disk.KindOf(err) != disk.KindKey {
		t.Fatalf("we opened a volume hashed byte by byte (%v): Windows hashes UTF-16 code units", err)
	}
}
