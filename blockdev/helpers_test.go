package blockdev

import (
	"fmt"
	"os"
	"testing"

	"github.com/xtsctl/xtsctl/internal/testhooks"
)

// noScanEnv makes the server (the test binary, TestMain) leave /proc
// alone at close (scanProcesses), for tests of what the kernel finds.
const noScanEnv = "XTSCTL_TEST_NO_PROC_SCAN"

// TestMain lets the test binary be the server too: the FUSE backend
// starts it by running /proc/self/exe with ServeCommand.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == ServeCommand {
		if os.Getenv(noScanEnv) != "" {
			scanProcesses = false
		}
		if root := os.Getenv(swapEnv); root != "" {
			testhooks.BeforeMount = func(string) {
				if err := swapForSymlink(root); err != nil {
					fmt.Fprintln(os.Stderr, err)
				}
			}
		}
		if err := Serve(); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// skipUnlessDevices skips tests that need root, FUSE and loop devices.
func skipUnlessDevices(t testing.TB) {
	t.Helper()
	if err := Available(); err != nil {
		t.Skip(err)
	}
}

func createEmpty(t testing.TB, path string) string {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	return path
}
