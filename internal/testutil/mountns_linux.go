package testutil

import (
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The tests of several packages run at once (go test ./...). A test that
// makes a mount namespace copies every mount on the machine into it, other
// packages' volumes too, and while the copy lives their close refuses,
// rightly: "mounted in another mount namespace". So the tests that serve
// volumes hold a shared lock and the tests that make namespaces an
// exclusive one, across processes. A second lock, the gate, keeps a
// waiting namespace test from starving: it holds the gate while it waits,
// and new serving tests pass the gate before they take their share.
const (
	mountNSLock = "/tmp/xtsctl-tests-mountns.lock"
	mountNSGate = "/tmp/xtsctl-tests-mountns.gate"
)

// lockWait bounds every wait; the longest holder is one test.
const lockWait = 15 * time.Minute

var (
	namespaceTests sync.Map // test name -> struct{}: holds the exclusive lock

	// The shared lock is the process's: one descriptor, counted, so that
	// a test nested in another (a subtest) never waits at the gate while
	// its parent holds the lock a waiting namespace test wants.
	shared struct {
		sync.Mutex
		n int
		f *os.File
	}
)

// ServingTest takes the shared lock for t's duration: no test of another
// package makes a mount namespace while t has volumes open. Call it
// before the test's other cleanups are registered, so that it is released
// after them. Within a MountNamespaceTest it does nothing.
func ServingTest(t testing.TB) {
	t.Helper()
	inNamespaceTest := false
	namespaceTests.Range(func(k, _ any) bool {
		name := k.(string)
		inNamespaceTest = t.Name() == name || strings.HasPrefix(t.Name(), name+"/")
		return !inNamespaceTest
	})
	if inNamespaceTest {
		return
	}
	shared.Lock()
	defer shared.Unlock()
	if shared.n == 0 {
		gate := lockFile(t, mountNSGate, unix.LOCK_SH)
		shared.f = lockFile(t, mountNSLock, unix.LOCK_SH)
		gate.Close()
	}
	shared.n++
	t.Cleanup(func() {
		shared.Lock()
		defer shared.Unlock()
		if shared.n--; shared.n == 0 {
			shared.f.Close()
			shared.f = nil
		}
	})
}

// MountNamespaceTest takes the exclusive lock for t's duration, before
// t makes a mount namespace: no other package's test has a volume open
// meanwhile. Call it first, before the test serves anything.
func MountNamespaceTest(t testing.TB) {
	t.Helper()
	gate := lockFile(t, mountNSGate, unix.LOCK_EX)
	f := lockFile(t, mountNSLock, unix.LOCK_EX)
	gate.Close()
	namespaceTests.Store(t.Name(), struct{}{})
	t.Cleanup(func() {
		namespaceTests.Delete(t.Name())
		f.Close()
	})
}

// lockFile opens path and locks it as how says, waiting at most
// lockWait; closing the file releases the lock.
func lockFile(t testing.TB, path string, how int) *os.File {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatalf("the tests' mount namespace lock: %v", err)
	}
	deadline := time.Now().Add(lockWait)
	for {
		err = unix.Flock(int(f.Fd()), how|unix.LOCK_NB)
		if err == nil {
			return f
		}
		if err != unix.EWOULDBLOCK || time.Now().After(deadline) {
			f.Close()
			t.Fatalf("the tests' mount namespace lock %s: %v", path, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
