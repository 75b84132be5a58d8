package safefile

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// withoutUnnamedFiles makes Create see a filesystem without O_TMPFILE,
// failing with err, for the rest of the test.
func withoutUnnamedFiles(t *testing.T, err error) {
	t.Helper()
	saved := openUnnamed
	openUnnamed = func(string) (int, error) { return -1, err }
	t.Cleanup(func() { openUnnamed = saved })
}

var tempNameRE = regexp.MustCompile(`^` + regexp.QuoteMeta(TempPrefix) + `out\.[0-9a-f]{12}$`)

// TestFallback: without O_TMPFILE (each error a filesystem or kernel
// gives for it), the output is written to a hidden temporary file,
// recognisable by its name and readable by its owner only until it is
// committed with its mode; Abort removes it.
func TestFallback(t *testing.T) {
	for _, errno := range []error{unix.EOPNOTSUPP, unix.EISDIR, unix.EINVAL} {
		t.Run(errno.Error(), func(t *testing.T) {
			withoutUnnamedFiles(t, errno)
			dir := t.TempDir()
			out := filepath.Join(dir, "out")
			f, err := Create(out, false, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			f.Write([]byte("complete"))
			names := entries(t, dir)
			if len(names) != 1 || !tempNameRE.MatchString(names[0]) {
				t.Fatalf("directory holds %v, want one %sout.RANDOM", names, TempPrefix)
			}
			if fi, err := os.Stat(filepath.Join(dir, names[0])); err != nil || fi.Mode().Perm() != 0o600 {
				t.Fatalf("temporary file %v, %v: want mode 0600 until committed", fi, err)
			}
			if err := f.Commit(); err != nil {
				t.Fatal(err)
			}
			if names := entries(t, dir); len(names) != 1 || names[0] != "out" {
				t.Fatalf("directory holds %v after Commit", names)
			}
			if fi, _ := os.Stat(out); fi.Mode().Perm() != 0o644 {
				t.Fatalf("committed mode %v", fi.Mode())
			}
			if b, _ := os.ReadFile(out); string(b) != "complete" {
				t.Fatalf("output %q", b)
			}

			// Overwriting, and aborting.
			g, err := Create(out, true, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			g.Write([]byte("partial"))
			g.Abort()
			if names := entries(t, dir); len(names) != 1 || names[0] != "out" {
				t.Fatalf("directory holds %v after Abort", names)
			}
			if b, _ := os.ReadFile(out); string(b) != "complete" {
				t.Fatalf("Abort changed the output: %q", b)
			}
			// Without overwrite, a file that appeared meanwhile stays.
			h, err := Create(filepath.Join(dir, "late"), false, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(dir, "late"), []byte("theirs"), 0o644)
			if err := h.Commit(); !errors.Is(err, ErrExists) {
				t.Fatalf("Commit over a file created meanwhile: %v", err)
			}
			if b, _ := os.ReadFile(filepath.Join(dir, "late")); string(b) != "theirs" {
				t.Fatal("replaced a file created during the run")
			}
		})
	}
}

// TestRemoveTemporaries: a fallback file neither committed nor aborted
// (an exit path that missed Abort) is removed by RemoveTemporaries; an
// unnamed file needs nothing.
func TestRemoveTemporaries(t *testing.T) {
	dir := t.TempDir()
	unnamed, err := Create(filepath.Join(dir, "a"), false, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer unnamed.Close()
	withoutUnnamedFiles(t, unix.EOPNOTSUPP)
	named, err := Create(filepath.Join(dir, "out"), false, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer named.Close()
	named.Write([]byte("partial"))
	if names := entries(t, dir); len(names) != 1 || !tempNameRE.MatchString(names[0]) {
		t.Fatalf("directory holds %v", names)
	}
	RemoveTemporaries()
	if names := entries(t, dir); len(names) != 0 {
		t.Fatalf("directory holds %v after RemoveTemporaries", names)
	}
}

// TestOverwriteNamesOnlyCompleteData: replacing an existing output links
// the unnamed file under a temporary name and renames it over; when the
// temporary name appears, the data behind it is complete, synced and has
// its mode, so a crash between the two leaves no partial data named.
func TestOverwriteNamesOnlyCompleteData(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	os.WriteFile(out, []byte("old"), 0o600)
	want := bytes.Repeat([]byte("new data "), 100000)
	var seen []string
	testHookLinked = func(tmp string) {
		seen = append(seen, tmp)
		if !tempNameRE.MatchString(filepath.Base(tmp)) {
			t.Errorf("temporary name %s", tmp)
		}
		fi, err := os.Stat(tmp)
		if b, _ := os.ReadFile(tmp); err != nil || !bytes.Equal(b, want) || fi.Mode().Perm() != 0o640 {
			t.Errorf("the temporary name holds %d bytes with mode %v (%v), want the complete %d with 0640", len(b), fi.Mode(), err, len(want))
		}
		if b, _ := os.ReadFile(out); string(b) != "old" {
			t.Error("the output was replaced before the rename")
		}
	}
	defer func() { testHookLinked = nil }()
	f, err := Create(out, true, 0o640)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(want)
	if names := entries(t, dir); len(names) != 1 {
		t.Fatalf("directory holds %v while writing", names)
	}
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 1 {
		t.Fatalf("linked under %d temporary names", len(seen))
	}
	if names := entries(t, dir); len(names) != 1 || names[0] != "out" {
		t.Fatalf("directory holds %v", names)
	}
	if b, _ := os.ReadFile(out); !bytes.Equal(b, want) {
		t.Fatal("output does not hold the new data")
	}
	// A new output needs no temporary name at all.
	seen = nil
	g, _ := Create(filepath.Join(dir, "new"), true, 0o600)
	g.Write([]byte("x"))
	if err := g.Commit(); err != nil || len(seen) != 0 {
		t.Fatalf("new output: %v, temporary names %v", err, seen)
	}
}

// TestLinkWithoutCapability: the /proc/self/fd way of linking works for
// a process without CAP_DAC_READ_SEARCH (AT_EMPTY_PATH fails there).
func TestLinkWithoutCapability(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a helper as nobody")
	}
	// A directory nobody can enter, with a copy of the test binary and
	// a directory nobody can write.
	base := t.TempDir()
	for d := base; d != filepath.Dir(d) && strings.HasPrefix(d, os.TempDir()+"/"); d = filepath.Dir(d) {
		os.Chmod(d, 0o755)
	}
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	helper := filepath.Join(base, "helper.test")
	if err := os.WriteFile(helper, self, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(base, "w")
	os.Mkdir(dir, 0o777)
	os.Chmod(dir, 0o777)
	cmd := exec.Command(helper, "-test.run=^TestHelperProcess$")
	cmd.Env = append(os.Environ(), "SAFEFILE_HELPER=commit", "SAFEFILE_DIR="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "out")); err != nil || string(b) != "complete" {
		t.Fatalf("output %q, %v", b, err)
	}
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(dir, "out"), &st); err != nil || st.Uid != 65534 {
		t.Fatalf("output not written by nobody: %v %v", st.Uid, err)
	}
}

// TestKilledLeavesNothing: a process killed with SIGKILL while writing an
// output leaves nothing in the directory; with the fallback (no
// O_TMPFILE), only the temporary file, named as documented and readable
// by its owner only.
func TestKilledLeavesNothing(t *testing.T) {
	for _, fallback := range []bool{false, true} {
		dir := t.TempDir()
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
		cmd.Env = append(os.Environ(), "SAFEFILE_HELPER=write", "SAFEFILE_DIR="+dir, fmt.Sprintf("SAFEFILE_FALLBACK=%v", fallback))
		stdout, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		if line != "writing\n" {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("helper said %q", line)
		}
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		names := entries(t, dir)
		switch {
		case !fallback && len(names) != 0:
			t.Errorf("killed while writing: directory holds %v, want nothing", names)
		case fallback && (len(names) != 1 || !tempNameRE.MatchString(names[0])):
			t.Errorf("fallback killed while writing: directory holds %v, want one %sout.RANDOM", names, TempPrefix)
		case fallback:
			if fi, err := os.Stat(filepath.Join(dir, names[0])); err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("leftover %v, %v: want mode 0600", fi, err)
			}
		}
	}
}

// TestHelperProcess is run as a child process by the tests above.
func TestHelperProcess(t *testing.T) {
	dir := os.Getenv("SAFEFILE_DIR")
	switch os.Getenv("SAFEFILE_HELPER") {
	case "commit":
		f, err := Create(filepath.Join(dir, "out"), false, 0o644)
		if err == nil {
			f.Write([]byte("complete"))
			err = f.Commit()
		}
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
	case "write":
		if os.Getenv("SAFEFILE_FALLBACK") == "true" {
			openUnnamed = func(string) (int, error) { return -1, unix.EOPNOTSUPP }
		}
		f, err := Create(filepath.Join(dir, "out"), false, 0o644)
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		f.Write(make([]byte, 1<<20))
		fmt.Println("writing")
		select {} // until killed
	default:
		t.Skip("run by other tests")
	}
	os.Exit(0)
}
