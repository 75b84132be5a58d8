package aesni

import (
	"os/exec"
	"strings"
	"testing"
)

// TestPuregoSelectsNoAssembly fails if any package of the module still
// selects a .s file under the purego tag, on amd64 or arm64 (as
// crypto/purego_test.go does for the standard library). It also checks
// that without the tag aesni does use assembly on amd64, so the listing
// it relies on is real.
func TestPuregoSelectsNoAssembly(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("go command not found: %v", err)
	}
	list := func(goarch string, tags ...string) map[string]string {
		t.Helper()
		args := append([]string{"list"}, tags...)
		args = append(args, "-f", "{{.ImportPath}} {{.SFiles}}", "github.com/xtsctl/xtsctl/...")
		cmd := exec.Command(goTool, args...)
		cmd.Env = append(cmd.Environ(), "GOOS=linux", "GOARCH="+goarch, "CGO_ENABLED=0")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go %v (GOARCH=%s): %v", args, goarch, err)
		}
		files := make(map[string]string)
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			pkg, s, _ := strings.Cut(line, " ")
			files[pkg] = s
		}
		return files
	}
	for _, goarch := range []string{"amd64", "arm64"} {
		for pkg, s := range list(goarch, "-tags", "purego") {
			if s != "[]" {
				t.Errorf("GOARCH=%s -tags purego: %s selects %s", goarch, pkg, s)
			}
		}
	}
	if s := list("amd64")["github.com/xtsctl/xtsctl/aesni"]; !strings.Contains(s, "xts_amd64.s") {
		t.Errorf("GOARCH=amd64: aesni selects %s, want xts_amd64.s among them", s)
	}
}
