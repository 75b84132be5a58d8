//go:build linux

package main

import (
	"os"
	"strings"
	"testing"

	"github.com/xtsctl/xtsctl/blockdev"
	"github.com/xtsctl/xtsctl/internal/devmapper"
)

// TestOpenDMUnavailable: open --backend dm on a host without device-mapper
// fails with exit 7 and the reason, before it asks for a passphrase. Here
// the reason is this host's own, unless it has device-mapper.
func TestOpenDMUnavailable(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the dm backend needs root; its error for others is another one")
	}
	if err := blockdev.Available(); err != nil {
		t.Skip(err)
	}
	dmErr := devmapper.Available()
	if dmErr == nil {
		t.Skip("this host has device-mapper")
	}
	want := dmErr.Error()
	t.Setenv("XTSCTL_RUNDIR", t.TempDir())
	dir := t.TempDir()
	img, flags := plainImage(t, dir, 1<<20)
	code, _, stderr := runOut(t, args("open", "--backend", "dm", flags, img, "p")...)
	if code != exitDevice || !strings.Contains(stderr, "xtsctl: error: "+want) || !strings.Contains(stderr, "hint: the fuse backend needs no device-mapper") {
		t.Errorf("plain image: exit %d, stderr %q; want exit %d with %q", code, stderr, exitDevice, want)
	}
	// A volume: no passphrase is asked for (stdin is empty, there is no
	// terminal: a prompt would fail otherwise).
	code, _, stderr = runOut(t, "open", "--backend", "dm", "../../testimages/v2/disk-xtsctl-nointegrity.vol", "v")
	if code != exitDevice || !strings.Contains(stderr, want) || strings.Contains(stderr, "passphrase") {
		t.Errorf("volume: exit %d, stderr %q; want exit %d with %q", code, stderr, exitDevice, want)
	}
}
