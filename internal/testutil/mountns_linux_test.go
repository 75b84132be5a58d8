package testutil

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestMountNSLockHelper is the other process of TestMountNSLock: it holds
// the shared lock until its standard input closes.
func TestMountNSLockHelper(t *testing.T) {
	if os.Getenv("XTSCTL_MOUNTNS_HELPER") == "" {
		t.Skip("run by TestMountNSLock")
	}
	ServingTest(t)
	os.Stdout.WriteString("held\n")
	b := make([]byte, 1)
	os.Stdin.Read(b)
}

// TestMountNSLock: a namespace test waits while another process serves,
// and runs once it is done; serving inside a namespace test (its
// subtests too) does not wait for itself.
func TestMountNSLock(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestMountNSLockHelper$", "-test.v")
	cmd.Env = append(os.Environ(), "XTSCTL_MOUNTNS_HELPER=1")
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 256)
	var got string
	for !strings.Contains(got, "held") {
		n, err := out.Read(buf)
		if err != nil {
			t.Fatalf("the helper: %v (%q)", err, got)
		}
		got += string(buf[:n])
	}
	released := make(chan time.Time, 1)
	go func() {
		time.Sleep(500 * time.Millisecond)
		released <- time.Now()
		in.Close()
	}()
	t.Run("namespace", func(t *testing.T) {
		MountNamespaceTest(t)
		at := time.Now()
		if r := <-released; at.Before(r) {
			t.Errorf("the exclusive lock was taken while another process held the shared one")
		}
		t.Run("serving", func(t *testing.T) { ServingTest(t) }) // would wait for ever
		ServingTest(t)
	})
	cmd.Wait()
}
