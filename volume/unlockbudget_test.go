package volume

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xtsctl/xtsctl/disk"
	"golang.org/x/crypto/argon2"
)

// eightSlots makes a volume with a passphrase in each of its 8 slots
// ("pass N" in slot N, testPass in slot 7), then rewrites the costs of
// slots 0..6 to hostile as someone who can write the image would.
func eightSlots(t *testing.T, hostile KDFParams) *memDevice {
	t.Helper()
	dev := &memDevice{}
	plain := make([]byte, 64<<10)
	if _, _, err := Create(context.Background(), dev, strings.NewReader(string(plain)), int64(len(plain)),
		CreateOptions{SectorSize: 4096, TagSize: 16, KDF: testKDF, Passphrase: []byte("pass 0")}, nil); err != nil {
		t.Fatal(err)
	}
	v := mustOpenPass(t, dev, []byte("pass 0"))
	key := v.MasterKey()
	v.Close()
	for i := 1; i < MaxSlots; i++ {
		pass := fmt.Appendf(nil, "pass %d", i)
		if i == 7 {
			pass = testPass
		}
		hs, err := ReadHeaders(dev, dev.size())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := AddSlot(dev, hs, key, pass, testKDF, i); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 7 {
		inflateSlot(t, dev, i, hostile)
	}
	return dev
}

// countKDF replaces Argon2id for the test: it records the work of each
// run, runs the real thing for slots of the test's own cost, and returns
// a key that opens nothing for the others (an inflated slot never opens:
// its costs are bound into its wrapping), without spending their cost.
func countKDF(t *testing.T) *[]uint64 {
	var mu sync.Mutex
	ran := &[]uint64{}
	old := argon2IDKey
	argon2IDKey = func(pass, salt []byte, time, mem uint32, threads uint8, n uint32) []byte {
		mu.Lock()
		*ran = append(*ran, uint64(time)*uint64(mem))
		mu.Unlock()
		if (KDFParams{Time: time, MemoryKiB: mem, Threads: threads}) == testKDF {
			return old(pass, salt, time, mem, threads, n)
		}
		return make([]byte, n)
	}
	t.Cleanup(func() { argon2IDKey = old })
	return ran
}

func sum(w []uint64) (s uint64) {
	for _, x := range w {
		s += x
	}
	return s
}

// TestUnlockWorkIsBoundedOverAllSlots: eight slots rewritten to the
// per-slot bound no longer cost eight times it: one unlock runs at most
// MaxUnlockWork over all slots, the slots skipped are named, and the
// genuine slot, tried first as the cheapest, opens at once.
func TestUnlockWorkIsBoundedOverAllSlots(t *testing.T) {
	hostile := KDFParams{Time: 512, MemoryKiB: 256 << 10, Threads: 4}
	if hostile.Work() != MaxKDFWork {
		t.Fatalf("hostile work %d, want the per-slot bound %d", hostile.Work(), MaxKDFWork)
	}
	dev := eightSlots(t, hostile)
	hs, err := ReadHeaders(dev, dev.size())
	if err != nil {
		t.Fatal(err)
	}
	limits := DefaultKDFLimits()
	limits.MaxMemoryKiB = MaxKDFMemoryKiB // the fake KDF spends no memory: not this machine's
	ran := countKDF(t)
	var order []int
	opts := UnlockOptions{Slot: -1, Limits: limits, Trying: func(slot int, _ KDFParams) { order = append(order, slot) }}

	// The genuine passphrase: its slot is the cheapest, tried first.
	if _, slot, err := hs.UnlockWith(testPass, opts); err != nil || slot != 7 || !slices.Equal(order, []int{7}) {
		t.Fatalf("genuine passphrase: slot %d, %v; slots run %v", slot, err, order)
	}

	// A wrong one: the cheap slot, then hostile ones until the budget
	// (twice the per-slot bound: the cheap slot and one of them).
	*ran, order = nil, nil
	_, _, err = hs.UnlockWith([]byte("wrong"), opts)
	var tc *SlotsTooCostlyError
	if !errors.As(err, &tc) {
		t.Fatalf("wrong passphrase: %v", err)
	}
	if total := sum(*ran); total > MaxUnlockWork || !slices.Equal(order, []int{7, 0}) {
		t.Fatalf("ran slots %v, %d KiB·passes in all (bound %d)", order, total, uint64(MaxUnlockWork))
	}
	var skipped []int
	for _, ce := range tc.Slots {
		skipped = append(skipped, ce.Slot)
		if !ce.OverTotal() || ce.Spent != testKDF.Work()+MaxKDFWork {
			t.Errorf("slot %d: skipped over total %v, spent %d", ce.Slot, ce.OverTotal(), ce.Spent)
		}
	}
	if !slices.Equal(skipped, []int{1, 2, 3, 4, 5, 6}) {
		t.Fatalf("skipped %v", skipped)
	}
	if msg := err.Error(); !strings.Contains(msg, "key slot 1 asks for Argon2id with 256 MiB × 512 passes × 4 threads, which after the") ||
		!strings.Contains(msg, "one unlock runs unasked") {
		t.Errorf("message %q", msg)
	}

	// The user is told how to run a slot skipped only for the total, and
	// the per-slot hint does not claim xtsctl never makes such a slot.
	de := DiskError("disk.vol", err)
	if hints := strings.Join(disk.HintsOf(de), "\n"); disk.KindOf(de) != disk.KindKey ||
		!strings.Contains(hints, "--key-slot 1 tries that slot alone") || strings.Contains(hints, "made no such slot") {
		t.Errorf("skipped for the total: kind %v, hints %q", disk.KindOf(de), hints)
	}

	// A slot chosen is run alone: the total does not stop it.
	*ran = nil
	if _, _, err := hs.UnlockWith([]byte("wrong"), UnlockOptions{Slot: 4, Limits: limits}); !errors.Is(err, ErrWrongPassphrase) || len(*ran) != 1 {
		t.Fatalf("slot 4 alone: %v, %d runs", err, len(*ran))
	}

	// The real KDF under a lowered budget: slots of 640 KiB·passes, a
	// budget of 1500 runs the cheap slot and two of them.
	argon2IDKey = argon2.IDKey
	small := KDFParams{Time: 10, MemoryKiB: 64, Threads: 1}
	dev = eightSlots(t, small)
	hs, _ = ReadHeaders(dev, dev.size())
	low := KDFLimits{MaxMemoryKiB: 1 << 20, MaxWork: 1000, MaxTotalWork: 1500}
	var work uint64
	order = nil
	_, _, err = hs.UnlockWith([]byte("wrong"), UnlockOptions{Slot: -1, Limits: low, Trying: func(slot int, p KDFParams) {
		order = append(order, slot)
		work += p.Work()
	}})
	if !errors.As(err, &tc) || work > low.MaxTotalWork || !slices.Equal(order, []int{7, 0, 1}) || len(tc.Slots) != 5 {
		t.Fatalf("lowered budget: ran %v (%d KiB·passes), %v", order, work, err)
	}
	if key, slot, err := hs.UnlockWith([]byte("pass 1"), UnlockOptions{Slot: -1, Limits: low}); err == nil {
		clear(key)
		t.Fatalf("an inflated slot opened (slot %d)", slot)
	}
}

// TestUnlockCancel: a cancelled context stops an unlock before the next
// slot, and in the middle of a slot's Argon2id: UnlockWith returns while
// the run is still going; when the run ends, what it derived and its copy
// of the passphrase are wiped.
func TestUnlockCancel(t *testing.T) {
	dev := eightSlots(t, KDFParams{Time: 2, MemoryKiB: 64, Threads: 1})
	hs, err := ReadHeaders(dev, dev.size())
	if err != nil {
		t.Fatal(err)
	}

	// Between slots: cancelled while the first one is announced, nothing
	// runs.
	ran := countKDF(t)
	ctx, cancel := context.WithCancel(context.Background())
	var order []int
	_, _, err = hs.UnlockWith([]byte("wrong"), UnlockOptions{Slot: -1, Limits: DefaultKDFLimits(), Context: ctx,
		Trying: func(slot int, _ KDFParams) { order = append(order, slot); cancel() }})
	if !errors.Is(err, context.Canceled) || len(order) != 1 || len(*ran) != 0 {
		t.Fatalf("cancelled before a slot: %v; announced %v, ran %d", err, order, len(*ran))
	}

	// Within a run: the KDF is held until the test lets it go.
	started, release, wiped := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var gotPass, gotKey []byte
	argon2IDKey = func(pass, salt []byte, time, mem uint32, threads uint8, n uint32) []byte {
		gotPass, gotKey = pass, make([]byte, n)
		for i := range gotKey {
			gotKey[i] = 0xa5
		}
		close(started)
		<-release
		return gotKey
	}
	abandonedKDFTestHook = func() { close(wiped) }
	defer func() { abandonedKDFTestHook = nil }()
	// The cause is returned, as the command line's signal names itself.
	stopped := fmt.Errorf("stopped by the test: %w", context.Canceled)
	ctx, cancelCause := context.WithCancelCause(context.Background())
	type result struct {
		key []byte
		err error
	}
	res := make(chan result, 1)
	pass := []byte("the passphrase being tried")
	go func() {
		key, _, err := hs.UnlockWith(pass, UnlockOptions{Slot: -1, Limits: DefaultKDFLimits(), Context: ctx})
		res <- result{key, err}
	}()
	<-started
	cancelCause(stopped)
	var r result
	select {
	case r = <-res:
	case <-time.After(time.Minute): // a hang guard, not a measurement
		close(release)
		t.Fatal("UnlockWith did not return on cancel while the KDF ran")
	}
	if !errors.Is(r.err, stopped) || !errors.Is(r.err, context.Canceled) || r.key != nil {
		t.Fatalf("cancelled in a run: %v", r.err)
	}
	clear(pass) // what the caller does at once: the run has its own copy
	close(release)
	<-wiped
	if !slices.Equal(gotKey, make([]byte, len(gotKey))) || !slices.Equal(gotPass, make([]byte, len(gotPass))) {
		t.Fatalf("after the abandoned run: key %x, passphrase %q", gotKey, gotPass)
	}
}

// TestDiskUnlockCancel: the format layer's Unlock of a volume stops when
// its context is cancelled in the middle of a slot's Argon2id, and says
// the unlock was interrupted (disk.KindInterrupted), not that it failed.
func TestDiskUnlockCancel(t *testing.T) {
	dev, _ := newTestVolume(t, make([]byte, 64<<10), 4096, 16, 64)
	path := writeTestImage(t, dev)
	img, err := disk.OpenImage(path, disk.ImageOptions{Access: disk.Read})
	if err != nil {
		t.Fatal(err)
	}
	defer img.Close()
	h, err := Format.Open(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	started, release := make(chan struct{}), make(chan struct{})
	old := argon2IDKey
	argon2IDKey = func(pass, salt []byte, time, mem uint32, threads uint8, n uint32) []byte {
		close(started)
		<-release
		return make([]byte, n)
	}
	defer func() { argon2IDKey = old }()
	ctx, cancel := context.WithCancel(context.Background())
	res := make(chan error, 1)
	go func() {
		_, err := h.Unlock(ctx, &disk.Request{Slot: -1, ReadOnly: true}, &disk.Secret{Passphrase: []byte("any")})
		res <- err
	}()
	<-started
	cancel()
	select {
	case err = <-res:
	case <-time.After(time.Minute): // a hang guard, not a measurement
		close(release)
		t.Fatal("Unlock did not return on cancel while the KDF ran")
	}
	close(release)
	if !errors.Is(err, context.Canceled) || disk.KindOf(err) != disk.KindInterrupted {
		t.Fatalf("cancelled unlock: %v (kind %v)", err, disk.KindOf(err))
	}
}
