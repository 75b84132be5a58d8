//go:build linux

package tcrypt

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xtsctl/xtsctl/disk"
	"github.com/xtsctl/xtsctl/internal/loopdev"
)

// tcplay drives Debian's tcplay (a TrueCrypt implementation) through a
// pseudo-terminal, since it reads passphrases from its terminal only, and
// returns what it printed. reply answers each prompt it shows; a
// passphrase is typed only once tcplay has turned the echo off, as it
// flushes what was typed before.
func tcplay(t *testing.T, reply func(prompt string) string, args ...string) string {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	defer master.Close()
	mfd := int(master.Fd())
	if err := unix.IoctlSetPointerInt(mfd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetUint32(mfd, unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	slave, err := os.OpenFile("/dev/pts/"+strconv.Itoa(int(n)), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("tcplay", args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		slave.Close()
		t.Fatal(err)
	}
	slave.Close()
	chunks := make(chan []byte)
	go func() {
		defer close(chunks)
		for {
			b := make([]byte, 4096)
			n, err := master.Read(b)
			if n > 0 {
				chunks <- b[:n]
			}
			if err != nil {
				return // EIO once tcplay has exited
			}
		}
	}()
	var out, pending bytes.Buffer
	deadline := time.After(5 * time.Minute) // a hung tcplay fails, rather than hangs, the test
	for done := false; !done; {
		select {
		case b, ok := <-chunks:
			if !ok {
				done = true
				break
			}
			out.Write(b)
			pending.Write(b)
			prompt := strings.TrimSpace(pending.String())
			if i := strings.LastIndexByte(prompt, '\n'); i >= 0 {
				prompt = strings.TrimSpace(prompt[i+1:])
			}
			lower := strings.ToLower(prompt)
			if !strings.HasSuffix(prompt, "(y/n)") && !(strings.HasSuffix(prompt, ":") && (strings.Contains(lower, "passphrase") || strings.Contains(lower, "size"))) {
				continue // not (yet) a prompt: "Summary of actions:"
			}
			answer := reply(prompt)
			if strings.Contains(strings.ToLower(prompt), "passphrase") {
				for {
					tio, err := unix.IoctlGetTermios(mfd, unix.TCGETS)
					if err != nil || tio.Lflag&unix.ECHO == 0 {
						break
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
			io.WriteString(master, answer+"\n")
			pending.Reset()
		case <-deadline:
			cmd.Process.Kill()
			t.Fatalf("tcplay %v hangs; it printed:\n%s", args, out.String())
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("tcplay %v: %v; it printed:\n%s", args, err, out.String())
	}
	return out.String()
}

func needTcplay(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("tcplay needs a loop device: run as root")
	}
	if _, err := exec.LookPath("tcplay"); err != nil {
		t.Skip("tcplay is not installed (Debian package tcplay)")
	}
}

// tcplayInfo parses what tcplay -i prints.
func tcplayInfo(out string) map[string]string {
	m := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok {
			m[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return m
}

func sectorsOf(t *testing.T, s string) int64 {
	t.Helper()
	m := regexp.MustCompile(`^(\d+) sectors$`).FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("tcplay printed %q, not a number of sectors", s)
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	return n
}

// TestTcplayVolumes makes TrueCrypt volumes with tcplay (several hashes,
// keyfiles, a hidden volume, cascades) on a loop device, then opens the
// image file with this package: the volumes open with what made them, the
// data area and unit numbering are what tcplay -i reports, plaintext
// written through the device reads back, and cascades are named and
// refused.
func TestTcplayVolumes(t *testing.T) {
	needTcplay(t)
	dir := t.TempDir()
	kf1, kf2 := filepath.Join(dir, "kf1"), filepath.Join(dir, "kf2")
	os.WriteFile(kf1, bytes.Repeat([]byte("first keyfile "), 30), 0o600)
	os.WriteFile(kf2, []byte("second"), 0o600)
	for _, c := range []struct {
		name, prf, cipher string
		keyfiles          []string
		hidden            bool
		refused           string // a cascade's name in the error
	}{
		{name: "sha512", prf: "SHA512", cipher: "AES-256-XTS"},
		{name: "ripemd160-keyfiles", prf: "RIPEMD160", cipher: "AES-256-XTS", keyfiles: []string{kf1, kf2}},
		{name: "whirlpool-hidden", prf: "whirlpool", cipher: "AES-256-XTS", hidden: true},
		{name: "twofish", prf: "SHA512", cipher: "TWOFISH-256-XTS", refused: "Twofish in XTS mode"},
		{name: "serpent-twofish-aes", prf: "SHA512", cipher: "SERPENT-256-XTS,TWOFISH-256-XTS,AES-256-XTS", refused: "AES-Twofish-Serpent"},
		{name: "aes-serpent", prf: "RIPEMD160", cipher: "AES-256-XTS,SERPENT-256-XTS", refused: "Serpent-AES"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "tc.img")
			if err := os.WriteFile(path, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(path, 3<<20); err != nil {
				t.Fatal(err)
			}
			dev, err := loopdev.Attach(path, loopdev.Options{})
			if err != nil {
				t.Skipf("no loop device: %v", err)
			}
			const outer, hidden = "outer passphrase", "hidden passphrase"
			last := ""
			reply := func(p string) string {
				switch {
				case strings.Contains(p, "hidden volume") && strings.Contains(p, "assphrase"):
					last = hidden
				case strings.HasPrefix(p, "Passphrase"):
					last = outer
				case strings.HasPrefix(p, "Repeat"):
				case strings.Contains(p, "(y/n)"):
					return "y"
				case strings.Contains(strings.ToLower(p), "size"):
					return "1M"
				default:
					t.Errorf("unexpected tcplay prompt %q", p)
					return ""
				}
				return last
			}
			args := []string{"-c", "-d", dev.Path, "-a", c.prf, "-b", c.cipher, "-w"}
			for _, k := range c.keyfiles {
				args = append(args, "-k", k)
			}
			if c.hidden {
				args = append(args, "-g", "-x", "SHA512")
			}
			tcplay(t, reply, args...)
			info := []string{"-i", "-d", dev.Path}
			for _, k := range c.keyfiles {
				info = append(info, "-k", k)
			}
			outerInfo := tcplayInfo(tcplay(t, func(string) string { return outer }, info...))
			var hiddenInfo map[string]string
			if c.hidden {
				hiddenInfo = tcplayInfo(tcplay(t, func(string) string { return hidden }, info...))
			}
			dev.Close()
			if err := dev.Detach(); err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Logf("detach: %v", err)
			}

			sec := &disk.Secret{Passphrase: []byte(outer)}
			for _, k := range c.keyfiles {
				b, _ := os.ReadFile(k)
				sec.KeyFiles = append(sec.KeyFiles, b)
			}
			_, u, err := unlockImage(t, openImage(t, path, true), nil, sec)
			if c.refused != "" {
				if err == nil || !errors.Is(err, disk.ErrUnsupported) || !strings.Contains(err.Error(), c.refused) {
					t.Fatalf("tcplay's %s volume: %v, want it refused as %s", c.cipher, err, c.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			checkAgainstTcplay(t, u, outerInfo, c.prf)
			roundTrip(t, path, u, nil, sec)
			if c.hidden {
				hsec := &disk.Secret{Passphrase: []byte(hidden)}
				opts := disk.Options{OptHidden: "true"}
				_, hu, err := unlockImage(t, openImage(t, path, true), opts, hsec)
				if err != nil {
					t.Fatal(err)
				}
				checkAgainstTcplay(t, hu, hiddenInfo, "SHA512")
				roundTrip(t, path, hu, opts, hsec)
			}
		})
	}
}

// checkAgainstTcplay compares the unlocked layout with tcplay -i: volume
// size, the data's block offset and IV offset (tcplay's own words), and
// the KDF it names.
func checkAgainstTcplay(t *testing.T, u *disk.Unlocked, info map[string]string, prf string) {
	t.Helper()
	e := u.Layout.Extents[0]
	if got, want := e.Length/512, sectorsOf(t, info["Volume size"]); got != want {
		t.Errorf("volume size %d sectors, tcplay says %d", got, want)
	}
	if got, want := e.Source/512, sectorsOf(t, info["Block offset"]); got != want {
		t.Errorf("data at sector %d, tcplay says %d", got, want)
	}
	if got, want := int64(e.Sector.IVOffset), sectorsOf(t, info["IV offset"]); got != want {
		t.Errorf("units from %d, tcplay says %d", got, want)
	}
	if info["Cipher"] != "AES-256-XTS" || info["PBKDF2 PRF"] != prf {
		t.Errorf("tcplay says cipher %q, PRF %q", info["Cipher"], info["PBKDF2 PRF"])
	}
	want := fmt.Sprintf("PBKDF2-%s %s (TrueCrypt)", hashTitle(strings.ToLower(strings.ReplaceAll(prf, "RIPEMD", "ripemd"))), info["PBKDF2 iterations"])
	if !strings.Contains(u.SlotName, want) {
		t.Errorf("opened by %q, tcplay says %s", u.SlotName, want)
	}
}

// roundTrip writes a pattern through the device, unlocks again and reads
// it back.
func roundTrip(t *testing.T, path string, u *disk.Unlocked, opts disk.Options, sec *disk.Secret) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	d, err := disk.NewDevice(f, u.Layout, u.Key, disk.AttachOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pattern := bytes.Repeat([]byte(path), 1+8192/len(path))[:8192]
	if _, err := disk.NewWriterAt(d).WriteAt(pattern, 1000); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	_, u2, err := unlockImage(t, openImage(t, path, false), opts, sec)
	if err != nil {
		t.Fatal(err)
	}
	if got := plaintext(t, path, u2)[1000 : 1000+len(pattern)]; !bytes.Equal(got, pattern) {
		t.Fatal("what was written does not read back")
	}
}
