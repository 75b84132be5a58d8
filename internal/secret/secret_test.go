//go:build linux

package secret

import (
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestProtect(t *testing.T) {
	err := Protect()
	if os.Geteuid() == 0 && err != nil {
		t.Fatalf("Protect as root: %v", err)
	}
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_CORE, &rl); err != nil {
		t.Fatal(err)
	}
	if rl.Cur != 0 || rl.Max != 0 {
		t.Errorf("RLIMIT_CORE = %+v, want 0", rl)
	}
	if d, err := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0); err != nil || d != 0 {
		t.Errorf("dumpable = %d (%v), want 0", d, err)
	}
	if err == nil {
		status, _ := os.ReadFile("/proc/self/status")
		for _, line := range strings.Split(string(status), "\n") {
			if strings.HasPrefix(line, "VmLck:") && strings.Fields(line)[1] == "0" {
				t.Errorf("memory not locked: %s", line)
			}
		}
	}
	if Protect() != err {
		t.Error("second call returned a different result")
	}
}

func TestWipe(t *testing.T) {
	b := []byte("secret passphrase")
	Wipe(b)
	for _, c := range b {
		if c != 0 {
			t.Fatalf("not wiped: %q", b)
		}
	}
}
