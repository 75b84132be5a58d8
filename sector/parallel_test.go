package sector

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/xtsctl/xtsctl/aesni"
)

// helperBytes is what the pool's helpers have converted so far.
func helperBytes() int64 {
	var n int64
	if hs := pool.helpers.Load(); hs != nil {
		for _, h := range *hs {
			n += h.bytes.Load()
		}
	}
	return n
}

// perSector is the reference: one xts call per sector, tweaks as in
// TestCodecEqualsPerSector.
func perSector(t *testing.T, s *Codec, key []byte, src []byte, first uint64) []byte {
	t.Helper()
	_, c := newCodec(t, key, s.p)
	want := make([]byte, len(src))
	for i := range len(src) / s.p.Size {
		c.Encrypt(want[i*s.p.Size:(i+1)*s.p.Size], src[i*s.p.Size:(i+1)*s.p.Size], s.p.Tweak(first+uint64(i)))
	}
	return want
}

// TestParallelHelpersShare: calls split between the caller and helpers
// (woken from parked, then found spinning) give what one xts call per
// sector gives, for every sector size, in place and not, and the helpers
// do part of the work.
func TestParallelHelpersShare(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("one core: no helpers")
	}
	testAlwaysWake.Store(true)
	defer testAlwaysWake.Store(false)
	r := rand.New(rand.NewPCG(5, 5))
	key := randomBytes(r, 64)
	before := helperBytes()
	for _, size := range []int{512, 4096} {
		for _, mode := range []IVMode{Plain64, Plain64LargeSectors} {
			p := Params{Size: size, IVMode: mode, IVOffset: uint64(r.IntN(64)) * 8}
			s, _ := newCodec(t, key, p)
			s.SetWorkers(runtime.GOMAXPROCS(0))
			for _, n := range []int{parallelMin, parallelMin + size, 7*parallelMin + 3*size} {
				pt := randomBytes(r, n)
				first := r.Uint64N(1 << 40)
				want := perSector(t, s, key, pt, first)
				for call := range 20 { // the first wakes the helpers, later ones find them spinning
					got := make([]byte, n)
					s.Encrypt(got, pt, first)
					if !bytes.Equal(got, want) {
						t.Fatalf("size %d, %v, %d bytes, call %d: differs from per-sector encryption", size, mode, n, call)
					}
					s.Decrypt(got, got, first)
					if !bytes.Equal(got, pt) {
						t.Fatalf("size %d, %v, %d bytes, call %d: in-place decryption differs", size, mode, n, call)
					}
				}
			}
		}
	}
	if helperBytes() == before {
		t.Error("no helper converted anything: every call ran on the caller alone")
	}
}

// helperCounts is what the pool's helpers have converted, and how often
// they were recruited, so far.
func helperCounts() (converted, recruits int64) {
	if hs := pool.helpers.Load(); hs != nil {
		for _, h := range *hs {
			converted += h.bytes.Load()
			recruits += h.recruits.Load()
		}
	}
	return converted, recruits
}

// TestParallelLateHelper: a helper that is recruited but does not start
// (held back here, as a busy machine may hold its thread) costs the call
// nothing: the caller converts everything and returns without waiting for
// it, and the helper, once let go, leaves the finished call alone.
func TestParallelLateHelper(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("one core: no helpers")
	}
	testAlwaysWake.Store(true)
	defer testAlwaysWake.Store(false)
	r := rand.New(rand.NewPCG(6, 6))
	key := randomBytes(r, 64)
	s, _ := newCodec(t, key, Params{Size: 4096})
	s.SetWorkers(runtime.GOMAXPROCS(0))
	pt := randomBytes(r, 16*parallelMin)
	want := perSector(t, s, key, pt, 3)

	// Every helper held in its waiting loop.
	release := make(chan struct{})
	held := make(chan struct{}, 64)
	hold := func() {
		select {
		case held <- struct{}{}:
		default:
		}
		<-release
	}
	testHelperWaits.Store(&hold)
	buf := bytes.Clone(pt)
	_, before := helperCounts()
	s.Encrypt(buf, buf, 3) // wakes the helpers it recruits, which stop in hold
	_, after := helperCounts()
	for range after - before {
		<-held
	}
	buf = bytes.Clone(pt)
	converted, recruits := helperCounts()
	s.Encrypt(buf, buf, 3)
	converted2, recruits2 := helperCounts()
	testHelperWaits.Store(nil)
	close(release)
	if recruits2 == recruits {
		t.Error("no helper was recruited")
	}
	if converted2 != converted {
		t.Error("a held-back helper converted sectors")
	}
	if !bytes.Equal(buf, want) {
		t.Fatal("the caller did not convert every sector itself")
	}
	// The pool still works: the released helpers go back to waiting.
	s.Decrypt(buf, buf, 3)
	if !bytes.Equal(buf, pt) {
		t.Fatal("decryption after the held-back call differs")
	}
}

// TestParallelPanic: a call whose claims panic (a wiped cipher) panics in
// the caller, after every helper has left it, and the pool keeps working.
func TestParallelPanic(t *testing.T) {
	testAlwaysWake.Store(true)
	defer testAlwaysWake.Store(false)
	r := rand.New(rand.NewPCG(7, 7))
	key := randomBytes(r, 64)
	s, _ := newCodec(t, key, Params{Size: 4096})
	s.SetWorkers(runtime.GOMAXPROCS(0))
	buf := randomBytes(r, 8*parallelMin)
	s.Encrypt(buf, buf, 0) // helpers spinning
	s.Wipe()
	func() {
		defer func() {
			if recover() == nil {
				t.Error("a wiped codec's parallel call did not panic")
			}
		}()
		s.Encrypt(buf, buf, 0)
	}()
	fresh, _ := newCodec(t, key, Params{Size: 4096})
	fresh.SetWorkers(runtime.GOMAXPROCS(0))
	pt := randomBytes(r, 8*parallelMin)
	want := perSector(t, fresh, key, pt, 1)
	got := make([]byte, len(pt))
	fresh.Encrypt(got, pt, 1)
	if !bytes.Equal(got, want) {
		t.Fatal("encryption after a panicking call differs")
	}
}

// TestParallelNoAllocs: a call split over helpers allocates nothing once
// the pool runs.
func TestParallelNoAllocs(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("one core: no helpers")
	}
	if raceEnabled && aesni.Pick(4096) == aesni.Portable {
		t.Skip("the race detector makes sync.Pool drop items, and the portable path then allocates scratch")
	}
	testAlwaysWake.Store(true)
	defer testAlwaysWake.Store(false)
	s, _ := newCodec(t, randomBytes(rand.New(rand.NewPCG(8, 8)), 64), Params{Size: 4096})
	s.SetWorkers(runtime.GOMAXPROCS(0))
	buf := make([]byte, 4*parallelMin)
	s.Encrypt(buf, buf, 1)
	if a := testing.AllocsPerRun(50, func() { s.Encrypt(buf, buf, 1) }); a != 0 {
		t.Errorf("%v allocations per parallel call", a)
	}
}

// TestParallelManyHelpers runs the tests above with five participants a
// call (four helpers), whatever the machine's cores: helpers then steal
// from one another's ranges, and a caller waits for and takes back
// several offers, paths that two cores never take.
func TestParallelManyHelpers(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(5))
	t.Run("share", TestParallelHelpersShare)
	t.Run("late", TestParallelLateHelper)
	t.Run("concurrent", TestParallelConcurrentCalls)
	t.Run("panic", TestParallelPanic)

	// One call recruits every helper it can use.
	testAlwaysWake.Store(true)
	defer testAlwaysWake.Store(false)
	r := rand.New(rand.NewPCG(10, 10))
	key := randomBytes(r, 64)
	s, _ := newCodec(t, key, Params{Size: 4096})
	s.SetWorkers(5)
	pt := randomBytes(r, 5*minShare)
	want := perSector(t, s, key, pt, 11)
	most := int64(0)
	for range 20 {
		_, before := helperCounts()
		got := make([]byte, len(pt))
		s.Encrypt(got, pt, 11)
		_, after := helperCounts()
		most = max(most, after-before)
		if !bytes.Equal(got, want) {
			t.Fatal("a five-way call differs from per-sector encryption")
		}
	}
	if most != 4 {
		t.Errorf("at most %d helpers recruited by one call, want 4", most)
	}
}

// TestSpanClaims: claims from the front and the back cover a span exactly
// once, each half of what is left, at least least and at most most
// sectors (or all that is left).
func TestSpanClaims(t *testing.T) {
	for _, c := range []struct{ lo, hi, least, most int }{
		{0, 1, 1, 1}, {0, 100, 8, 1 << 30}, {5, 1000, 8, 32}, {0, 7, 8, 32}, {10, 10, 1, 4},
	} {
		var sp span
		sp.v.Store(pack(c.lo, c.hi))
		seen := make([]int, c.hi)
		for back := false; ; back = !back {
			l, h := unpack(sp.v.Load())
			lo, hi, ok := sp.claim(c.least, c.most, back)
			if !ok {
				if l < h {
					t.Fatalf("%+v: no claim from [%d, %d)", c, l, h)
				}
				break
			}
			rest := h - l
			if n := hi - lo; n != min(max(c.least, rest/2), c.most, rest) {
				t.Errorf("%+v: claimed %d of %d left", c, n, rest)
			}
			if (back && hi != h) || (!back && lo != l) {
				t.Errorf("%+v: claim [%d, %d) not at the %v of [%d, %d)", c, lo, hi, map[bool]string{true: "back", false: "front"}[back], l, h)
			}
			for i := lo; i < hi; i++ {
				seen[i]++
			}
		}
		for i := c.lo; i < c.hi; i++ {
			if seen[i] != 1 {
				t.Fatalf("%+v: sector %d claimed %d times", c, i, seen[i])
			}
		}
	}
}

// TestParallelConcurrentCalls: many goroutines splitting calls over the
// same helpers at once. A helper that finished one caller's job could be
// recruited by the next before the first caller sent its helpers away; the
// first then sent away the second's assignment, and both waited forever
// (seen under -tags purego, whose slow kernels widen the window). A
// caller now takes back only its own offer, which lives in its job.
func TestParallelConcurrentCalls(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("one core: no helpers")
	}
	testAlwaysWake.Store(true)
	defer testAlwaysWake.Store(false)
	r := rand.New(rand.NewPCG(9, 9))
	key := randomBytes(r, 64)
	s, _ := newCodec(t, key, Params{Size: 512})
	s.SetWorkers(runtime.GOMAXPROCS(0))
	sizes := []int{parallelMin, 2 * parallelMin, 5*parallelMin + 512}
	pts := make([][]byte, len(sizes))
	wants := make([][]byte, len(sizes))
	for i, n := range sizes {
		pts[i] = randomBytes(r, n)
		wants[i] = perSector(t, s, key, pts[i], uint64(i)<<20)
	}
	const goroutines, calls = 8, 60
	errs := make(chan error, goroutines)
	for g := range goroutines {
		go func() {
			for c := range calls {
				i := (g + c) % len(sizes)
				got := make([]byte, len(pts[i]))
				s.Encrypt(got, pts[i], uint64(i)<<20)
				if !bytes.Equal(got, wants[i]) {
					errs <- fmt.Errorf("goroutine %d, call %d: %d bytes differ from per-sector encryption", g, c, len(got))
					return
				}
			}
			errs <- nil
		}()
	}
	for range goroutines {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
