package devmapper

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDMVM runs scripts/test-dm-vm.sh, which boots a kernel with
// device-mapper under qemu and runs this package's tests in it, when
// XTSCTL_DM_VM=1. It takes about half a minute once the guest is cached,
// and root the first time (apt-get).
func TestDMVM(t *testing.T) {
	if os.Getenv("XTSCTL_DM_VM") != "1" {
		t.Skip("set XTSCTL_DM_VM=1 to test against a real kernel in a qemu guest")
	}
	script, err := filepath.Abs("../../scripts/test-dm-vm.sh")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", script)
	cmd.Env = append(os.Environ(), "XTSCTL_DM_VM=") // no recursion from the guest's build
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if err != nil || lines[len(lines)-1] != "PASS" {
		t.Fatalf("test-dm-vm.sh: %v", err)
	}
}
