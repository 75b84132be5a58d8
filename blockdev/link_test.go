//go:build linux

package blockdev

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStableNameLinks: makeLink and removeLink touch only what is theirs,
// through a link directory they trust (as an attacker who could put
// things under /dev/xtsctl would try them).
func TestStableNameLinks(t *testing.T) {
	run := t.TempDir()
	t.Setenv("XTSCTL_RUNDIR", run)
	dir := filepath.Join(run, ".dev")
	target := func(name string) string {
		t.Helper()
		s, err := os.Readlink(filepath.Join(dir, name))
		if err != nil {
			return ""
		}
		return s
	}

	// Made, shown, removed.
	link, err := makeLink("one", "/dev/loop7")
	if err != nil || link != filepath.Join(dir, "one") || target("one") != "/dev/loop7" {
		t.Fatalf("makeLink: %q %v, target %q", link, err, target("one"))
	}
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o755 {
		t.Errorf("link directory mode %v", fi.Mode())
	}
	if got := linkOf("one", "/dev/loop7"); got != link {
		t.Errorf("linkOf: %q", got)
	}
	if got := linkOf("one", "/dev/loop8"); got != "" {
		t.Errorf("linkOf another device: %q", got)
	}
	removeLink("one", "/dev/loop8") // not what it points at: stays
	if target("one") != "/dev/loop7" {
		t.Fatal("removeLink removed a link to another device")
	}
	removeLink("one", "/dev/loop7")
	if _, err := os.Lstat(filepath.Join(dir, "one")); !os.IsNotExist(err) {
		t.Fatalf("removeLink left %v", err)
	}

	// A link of ours a crash left is replaced; so is one to NAME's
	// device-mapper device.
	for _, old := range []string{"/dev/loop250", "/dev/mapper/one"} {
		os.Symlink(old, filepath.Join(dir, "one"))
		if _, err := makeLink("one", "/dev/loop3"); err != nil || target("one") != "/dev/loop3" {
			t.Errorf("stale link to %s: %v, now %q", old, err, target("one"))
		}
		os.Remove(filepath.Join(dir, "one"))
	}

	// What is not ours is left as it is, and no link is made.
	victim := filepath.Join(t.TempDir(), "victim")
	os.WriteFile(victim, []byte("keep"), 0o600)
	for _, c := range []struct {
		what string
		make func(p string) error
	}{
		{"a symlink elsewhere", func(p string) error { return os.Symlink(victim, p) }},
		{"a symlink to another NAME's dm device", func(p string) error { return os.Symlink("/dev/mapper/two", p) }},
		{"a symlink to /dev/loop-control", func(p string) error { return os.Symlink("/dev/loop-control", p) }},
		{"a file", func(p string) error { return os.WriteFile(p, []byte("x"), 0o600) }},
		{"a directory", func(p string) error { return os.Mkdir(p, 0o700) }},
	} {
		p := filepath.Join(dir, "one")
		if err := c.make(p); err != nil {
			t.Fatal(err)
		}
		before, _ := os.Lstat(p)
		_, err := makeLink("one", "/dev/loop3")
		if err == nil || !strings.Contains(err.Error(), "exists and is not a link xtsctl made") {
			t.Errorf("%s: makeLink: %v", c.what, err)
		}
		removeLink("one", "/dev/loop3")
		after, err := os.Lstat(p)
		if err != nil || !os.SameFile(before, after) || after.Mode() != before.Mode() {
			t.Errorf("%s: changed (%v)", c.what, err)
		}
		if b, _ := os.ReadFile(victim); string(b) != "keep" {
			t.Fatalf("%s: the victim was written", c.what)
		}
		os.RemoveAll(p)
	}
	if names, _ := filepath.Glob(filepath.Join(dir, "*")); len(names) != 0 {
		t.Errorf("left in the link directory: %v", names)
	}
	if names, _ := filepath.Glob(filepath.Join(dir, ".*")); len(names) != 0 {
		t.Errorf("temporaries left: %v", names)
	}

	// A link directory that is a symlink, or that others may write in, is
	// not used.
	os.RemoveAll(dir)
	elsewhere := t.TempDir()
	os.Symlink(elsewhere, dir)
	if _, err := makeLink("one", "/dev/loop3"); err == nil || !strings.Contains(err.Error(), "is not a directory") {
		t.Errorf("link directory a symlink: %v", err)
	}
	if names, _ := os.ReadDir(elsewhere); len(names) != 0 {
		t.Errorf("made through a symlinked directory: %v", names)
	}
	os.Remove(dir)
	os.Mkdir(dir, 0o755)
	os.Chmod(dir, 0o777)
	if _, err := makeLink("one", "/dev/loop3"); err == nil || !strings.Contains(err.Error(), "someone else can write in it") {
		t.Errorf("world-writable link directory: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "one")); !os.IsNotExist(err) {
		t.Errorf("made in a world-writable directory")
	}
}

// TestNameOf: NAME, device, link and mountpoint name an open image, as
// recorded; other paths are refused.
func TestNameOf(t *testing.T) {
	run := t.TempDir()
	t.Setenv("XTSCTL_RUNDIR", run)
	mnt := t.TempDir()
	os.MkdirAll(filepath.Join(run, "one"), 0o700)
	if err := writeState(&State{Name: "one", Device: "/dev/loop250", Mountpoint: mnt}); err != nil {
		t.Fatal(err)
	}
	for _, arg := range []string{"one", "/dev/loop250", mnt, LinkPath("one")} {
		if name, err := NameOf(arg); err != nil || name != "one" {
			t.Errorf("NameOf(%q) = %q, %v", arg, name, err)
		}
	}
	// A valid NAME that is not open is left for the caller ("not open"),
	// also when a file of that name is here.
	t.Chdir(t.TempDir())
	os.WriteFile("disk.vol", nil, 0o600)
	for _, arg := range []string{"two", "disk.vol"} {
		if name, err := NameOf(arg); err != nil || name != arg {
			t.Errorf("NameOf(%s) = %q, %v", arg, name, err)
		}
	}
	other := t.TempDir()
	for arg, want := range map[string]string{
		other:         "is a directory, but not the device or mountpoint of an image xtsctl opened",
		"/no/such":    "is not the NAME, device or mountpoint of an open image",
		"bad name!":   "invalid NAME",
		"/dev/null":   "is a path, but not the device or mountpoint",
		mnt + "/../x": "is not the NAME, device or mountpoint",
	} {
		if name, err := NameOf(arg); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("NameOf(%q) = %q, %v; want an error with %q", arg, name, err, want)
		}
	}
}
