package blake2b

import (
	"os/exec"
	"strings"
	"testing"
)

// TestPuregoSelectsNoAssembly fails if any .s file of this package is
// still compiled under the purego build tag, on any GOARCH we build for.
func TestPuregoSelectsNoAssembly(t *testing.T) {
	gotool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list the files a build selects: %v", err)
	}
	for _, arch := range []string{"amd64", "arm64", "386", "riscv64", "ppc64le", "s390x"} {
		cmd := exec.Command(gotool, "list", "-tags", "purego", "-f", "{{.SFiles}}", ".")
		cmd.Env = append(cmd.Environ(), "GOARCH="+arch, "GOOS=linux", "CGO_ENABLED=0")
		out, err := cmd.Output() // stdout only: GODEBUG warnings go to stderr
		if err != nil {
			t.Fatalf("go list: %v", err)
		}
		if s := strings.TrimSpace(string(out)); s != "[]" {
			t.Errorf("GOARCH=%s -tags purego selects assembly: %s", arch, s)
		}
	}
}
