package mount

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

func TestDetect(t *testing.T) {
	ext := make([]byte, 4096)
	binary.LittleEndian.PutUint16(ext[1080:], 0xEF53)
	xfs := append([]byte("XFSB"), make([]byte, 4092)...)
	for _, c := range []struct {
		b    []byte
		want string
	}{{ext, "ext4"}, {xfs, "xfs"}, {make([]byte, 4096), ""}} {
		p := filepath.Join(t.TempDir(), "dev")
		os.WriteFile(p, c.b, 0o600)
		if got, err := Detect(p); err != nil || got != c.want {
			t.Errorf("Detect = %q, %v; want %q", got, err, c.want)
		}
	}
	if _, err := Detect(filepath.Join(t.TempDir(), "none")); err == nil {
		t.Error("Detect of a missing device succeeded")
	}
}

func TestUnescapeMountinfo(t *testing.T) {
	for in, want := range map[string]string{`/a\040b`: "/a b", `/plain`: "/plain", `/x\134y`: `/x\y`, `/bad\09`: `/bad\09`} {
		if got := unescapeMountinfo(in); got != want {
			t.Errorf("unescape(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestMountUnmount: Source sees a mount and its absence; Unmount does not
// follow a symlink to a mountpoint.
func TestMountUnmount(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	dir := filepath.Join(t.TempDir(), "with space")
	os.Mkdir(dir, 0o755)
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, ""); err != nil {
		t.Fatal(err)
	}
	defer unix.Unmount(dir, unix.MNT_DETACH)
	if Source(dir) != "tmpfs" {
		t.Fatalf("Source = %q", Source(dir))
	}
	link := filepath.Join(t.TempDir(), "link")
	os.Symlink(dir, link)
	if err := Unmount(link); err == nil {
		t.Fatal("Unmount followed a symlink")
	}
	if err := Unmount(dir); err != nil {
		t.Fatal(err)
	}
	if Source(dir) != "" {
		t.Fatal("still mounted")
	}
}
