package devmapper

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// On a host without device-mapper (like the machines this project runs on)
// Available must say what is missing; on one with it, it must work.
func TestAvailable(t *testing.T) {
	err := Available()
	_, statErr := os.Stat(controlPath)
	_, hasMisc := miscMinor("device-mapper")
	switch {
	case statErr == nil && hasMisc && os.Geteuid() == 0:
		if err != nil {
			t.Errorf("Available with %s present, as root: %v", controlPath, err)
		}
	case statErr == nil && !hasMisc:
		// A node left by a tool that expected device-mapper (cryptsetup
		// creates it) on a kernel without it.
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "dm_mod") {
			t.Errorf("Available with a stale %s: %v, want ErrUnavailable naming dm_mod", controlPath, err)
		}
	case statErr != nil && !hasMisc:
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), controlPath+" missing") {
			t.Errorf("Available without device-mapper: %v, want ErrUnavailable naming %s", err, controlPath)
		}
		t.Logf("as expected here: %v", err)
	default:
		t.Logf("Available: %v", err)
	}
	if err != nil && !errors.Is(err, ErrUnavailable) {
		t.Errorf("Available error %v does not wrap ErrUnavailable", err)
	}
}

func TestNoDeviceMapperErrors(t *testing.T) {
	if Available() == nil {
		t.Skip("device-mapper works here")
	}
	tab := &CryptTable{Key: seqKey(64), Device: "7:0", Length: 8}
	if _, err := CreateCrypt("xtsctl-test", tab); !errors.Is(err, ErrUnavailable) {
		t.Errorf("CreateCrypt: %v, want ErrUnavailable", err)
	}
	if err := Remove("xtsctl-test"); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Remove: %v, want ErrUnavailable", err)
	}
	if _, err := Status("xtsctl-test"); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Status: %v, want ErrUnavailable", err)
	}
	// Bad arguments are reported before device-mapper is needed.
	if _, err := CreateCrypt("a/b", tab); err == nil || errors.Is(err, ErrUnavailable) {
		t.Errorf("CreateCrypt with a bad name: %v", err)
	}
	if _, err := CreateCrypt("ok", &CryptTable{Device: "7:0", Length: 8}); err == nil || errors.Is(err, ErrUnavailable) {
		t.Errorf("CreateCrypt without a key: %v", err)
	}
}

func TestDeviceNodes(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mknod needs root")
	}
	dir := filepath.Join(t.TempDir(), "mapper")
	isDev := func(name string, major, minor uint32) bool {
		var st unix.Stat_t
		return unix.Stat(filepath.Join(dir, name), &st) == nil &&
			st.Mode&unix.S_IFMT == unix.S_IFBLK && st.Rdev == unix.Mkdev(major, minor) && st.Mode&0o777 == 0o600
	}
	exists := func(name string) bool {
		_, err := os.Lstat(filepath.Join(dir, name))
		return err == nil
	}

	path, err := makeNode(dir, "vol", 254, 3)
	if err != nil {
		t.Fatal(err)
	}
	if path != dir+"/vol" || !isDev("vol", 254, 3) {
		t.Fatalf("makeNode made %s, not a 0600 block node 254:3", path)
	}
	if _, err := makeNode(dir, "vol", 254, 3); err != nil || !isDev("vol", 254, 3) {
		t.Errorf("makeNode over the same node: %v", err)
	}
	if _, err := makeNode(dir, "vol", 254, 300); err != nil || !isDev("vol", 254, 300) {
		t.Errorf("makeNode over a stale node: %v", err)
	}

	// A udev-style link to the right device is kept as it is.
	if err := unix.Mknod(filepath.Join(dir, "dm-7"), unix.S_IFBLK|0o600, int(unix.Mkdev(254, 7))); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("dm-7", filepath.Join(dir, "linked")); err != nil {
		t.Fatal(err)
	}
	if _, err := makeNode(dir, "linked", 254, 7); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(filepath.Join(dir, "linked")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("a correct link was replaced: %v", err)
	}

	if err := os.WriteFile(filepath.Join(dir, "file"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := makeNode(dir, "file", 254, 1); err == nil {
		t.Error("makeNode replaced a regular file")
	}

	// removeNode leaves what is not ours.
	if err := removeNode(dir, "vol", 254, 3); err != nil || !isDev("vol", 254, 300) {
		t.Errorf("removeNode removed another device's node: %v", err)
	}
	if err := removeNode(dir, "file", 254, 1); err != nil || !exists("file") {
		t.Errorf("removeNode removed a regular file: %v", err)
	}
	if err := removeNode(dir, "linked", 254, 8); err != nil || !exists("linked") {
		t.Errorf("removeNode removed a link to another device: %v", err)
	}
	// ... and removes what is.
	if err := removeNode(dir, "vol", 254, 300); err != nil || exists("vol") {
		t.Errorf("removeNode kept its node: %v", err)
	}
	if err := removeNode(dir, "linked", 254, 7); err != nil || exists("linked") {
		t.Errorf("removeNode kept a link to its device: %v", err)
	}
	if err := os.Symlink("gone", filepath.Join(dir, "dangling")); err != nil {
		t.Fatal(err)
	}
	if err := removeNode(dir, "dangling", 254, 9); err != nil || exists("dangling") {
		t.Errorf("removeNode kept a dangling link: %v", err)
	}
	if err := removeNode(dir, "never", 254, 9); err != nil {
		t.Errorf("removeNode of nothing: %v", err)
	}
}
