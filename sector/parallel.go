package sector

import (
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// How a large call is spread over cores.
//
// A call's sectors are split into one contiguous range per participant:
// the calling goroutine and the helpers it recruits. Each works through its
// own range from the front, in claims of about half of what is left, then
// steals from the back of the others' ranges. So a helper that starts late,
// or not at all, costs the call nothing but the recruiting: the caller does
// its share. The caller then waits only for claims a helper is in the
// middle of.
//
// Helpers are goroutines of a pool that lives as long as the process, one
// per core beside the caller's. Starting a goroutine per call, as the codec
// first did, cost every call a wake-up of another core: measured on an
// Intel Xeon VM (family 6 model 207, 2 vCPUs, at real-time priority), a
// call that started a goroutine and waited for it spent 10 µs more of wall
// time than its work and 6 µs of the caller's CPU time, and the goroutine
// started 5-16 µs after the go statement; so did a persistent goroutine
// woken through a channel. A goroutine that was running (spinning on a flag)
// started 0.2-0.3 µs after the hand-off, and the round trip cost 0.6 µs.
// With 1 MiB calls (about 45 µs of work on each of two cores) the wake-ups
// took a quarter of the time two cores could have saved.
//
// So a helper that finishes its work spins for about as long as it worked,
// in case the next call comes (a stream of calls finds it running), then
// parks. The caller recruits spinning helpers for any call with enough
// work per participant (minShare) and wakes parked ones only for calls
// long enough to pay for the wake-up, judged from the costs this process
// has measured (wakeWorth). A spinning helper yields its core to other
// goroutines every few microseconds, so the pool does not hold up the
// program's own work.
//
// Each participant keeps the same place in a call (the caller the first
// range, helper i range i), so calls on the same buffer leave each range in
// the cache of the core that last worked on it. Claims are whole sectors:
// the ranges and claims start on sector boundaries, which are cache-line
// and (for 4096-byte sectors) page boundaries of the buffer.

// minShare is the least work, in bytes, worth one more participant: a
// participant's range is at least this long. About 5 µs of XTS on one core
// at 12 GB/s, against 0.3-0.6 µs for the hand-off to a spinning helper.
const minShare = 64 << 10

// minClaim is the least a claim takes, in bytes (rounded up to a sector):
// each claim is one multi-sector kernel call, whose set-up (round keys,
// the first group's tweaks) costs about as much as 1 KiB of work. Claims
// halve what is left, so this bounds the last ones, and the caller waits at
// the end for the rest of the claim a helper is in: measured on the Intel
// Xeon f6m207 VM (31 interleaved rounds of 400 calls, medians of call
// times), 1 MiB calls with 2 workers ran 1.014-1.030x as fast with 8 KiB
// as with 32 KiB (4 KiB: 1.012-1.038x, wider spread), 128 KiB calls
// 0.984-1.013x.
const minClaim = 8 << 10

// maxClaim bounds a helper's claims, in bytes: about 10 µs of work.
const maxClaim = 128 << 10

// maxSpin bounds how long an idle helper spins before it parks, and how
// long a caller spins waiting for a helper before it blocks.
const maxSpin = 100 * time.Microsecond

// yieldEvery is how often a spinning goroutine yields its core.
const yieldEvery = 5 * time.Microsecond

// A helper's offer word says what it is doing: nil while it waits
// running (spinning), parkedMark while it is blocked on wake, an offer (a
// part of a call) that a caller has handed it and it has not yet taken,
// and takenMark while it works. A caller hands over a part with one CAS on
// the helper's word, from nil or parkedMark to its offer, after the job is
// ready: the helper starts the moment it sees the offer. A caller sends
// away only its own offer (CAS from it back to nil): an offer lives in the
// job, which no other call can hold until this one returns.
type offer struct {
	job  *job
	part int // the helper's range in job
}

var parkedMark, takenMark = new(offer), new(offer)

type helper struct {
	offer atomic.Pointer[offer]
	sent  atomic.Int64  // when a caller woke it (now), for wakeDelay
	bytes atomic.Int64  // converted by this helper, for tests
	wake  chan struct{} // buffered 1: a token for a parked helper
	_     [32]byte
	// recruits counts the calls that offered this helper a part (for
	// tests), on its own cache line: the caller counts while the helper
	// takes the offer.
	recruits atomic.Int64
	_        [56]byte
}

// span is a participant's range of sectors, lo<<32 | hi, claimed by CAS:
// its owner from the front, others from the back.
type span struct {
	v atomic.Uint64
	_ [120]byte // one per 128 bytes: adjacent-line prefetch pairs lines
}

func pack(lo, hi int) uint64 { return uint64(lo)<<32 | uint64(hi) }

func unpack(v uint64) (lo, hi int) { return int(v >> 32), int(uint32(v)) }

// claim takes half of what is left of s (at least least, at most most
// sectors): from the front for its owner, from the back for a thief.
func (s *span) claim(least, most int, fromBack bool) (lo, hi int, ok bool) {
	for {
		v := s.v.Load()
		lo, hi := unpack(v)
		if lo >= hi {
			return 0, 0, false
		}
		n := min(max(least, (hi-lo)/2), most, hi-lo)
		if fromBack {
			if s.v.CompareAndSwap(v, pack(lo, hi-n)) {
				return hi - n, hi, true
			}
		} else if s.v.CompareAndSwap(v, pack(lo+n, hi)) {
			return lo, lo + n, true
		}
	}
}

// job is one call being worked on.
type job struct {
	codec     *Codec
	dst, src  []byte
	first     uint64
	decrypt   bool
	claim     int // sectors per claim, at least
	spans     []span
	offers    []offer   // offers[i] is part i+1, for the i-th recruit
	recruited []*helper // in the order of offers
	// pending is twice the number of offers not yet finished (or sent
	// away), plus 1 while the caller is blocked on done: one word, so that
	// a helper's last touch of the job is the decrement that tells the
	// caller it may reuse it.
	pending atomic.Int64
	done    chan struct{}
	failed  atomic.Pointer[any] // a helper's panic, raised again by the caller
}

var jobs = sync.Pool{New: func() any { return &job{done: make(chan struct{}, 1)} }}

// work is participant p's part of j: its own span, then the others'. It
// returns the bytes it converted. The caller (p = 0) claims half of what
// is left at a time; a helper at most maxClaim, because the caller waits
// at the end for a claim a helper is in the middle of, and the longer the
// claim the likelier the system preempts the helper in it on a busy
// machine.
func (j *job) work(p int) int {
	size := j.codec.p.Size
	least, most := j.claim, math.MaxInt32
	if p != 0 {
		most = max(least, maxClaim/size)
	}
	n := 0
	do := func(lo, hi int) {
		j.codec.chunk(j.dst[lo*size:hi*size], j.src[lo*size:hi*size], j.first+uint64(lo), j.decrypt)
		n += (hi - lo) * size
	}
	for {
		lo, hi, ok := j.spans[p].claim(least, most, false)
		if !ok {
			break
		}
		do(lo, hi)
	}
	for k := 1; k < len(j.spans); k++ {
		q := (p + k) % len(j.spans)
		for {
			lo, hi, ok := j.spans[q].claim(least, most, true)
			if !ok {
				break
			}
			do(lo, hi)
		}
	}
	return n
}

// leave is a recruited helper leaving j (done, or sent away before it
// started); the last one wakes a blocked caller.
func (j *job) leave() {
	if j.pending.Add(-2) == 1 {
		j.done <- struct{}{}
	}
}

// wait returns once no helper works on j: spinning first (a helper is in
// the middle of one claim), then blocked on done.
func (j *job) wait() {
	start := now()
	last := start
	for {
		v := j.pending.Load()
		if v == 0 {
			return
		}
		t := now()
		if t-start > int64(maxSpin) {
			if j.pending.CompareAndSwap(v, v|1) {
				<-j.done
				j.pending.Store(0)
				return
			}
			continue
		}
		if t-last > int64(yieldEvery) {
			runtime.Gosched()
			last = t
		}
	}
}

// pool holds the helpers and what the process has measured of them.
var pool struct {
	mu      sync.Mutex
	helpers atomic.Pointer[[]*helper]

	// Costs of recruiting a parked helper, in nanoseconds, as moving
	// averages: the caller's time to wake it (wakeCost) and the delay
	// until it starts (wakeDelay); rate is one core's speed, in bytes
	// per microsecond, as the callers measure it.
	wakeCost, wakeDelay, rate atomic.Int64
	wakeSkips                 atomic.Int64 // calls that found only parked helpers and did not wake them
}

func init() {
	// Until measured: a wake-up as costly as seen on a VM (the caller's
	// 5 µs, the helper's 20 µs) and a fast core (10 GB/s), so that calls
	// from about 500 KB wake parked helpers.
	pool.wakeCost.Store(int64(5 * time.Microsecond))
	pool.wakeDelay.Store(int64(20 * time.Microsecond))
	pool.rate.Store(10000)
}

// helpers returns at least n helpers, starting the missing ones.
func helpers(n int) []*helper {
	if hs := pool.helpers.Load(); hs != nil && len(*hs) >= n {
		return *hs
	}
	pool.mu.Lock()
	defer pool.mu.Unlock()
	var hs []*helper
	if p := pool.helpers.Load(); p != nil {
		hs = *p
	}
	for len(hs) < n {
		h := &helper{wake: make(chan struct{}, 1)}
		hs = append(hs, h)
		go h.loop()
	}
	pool.helpers.Store(&hs)
	return hs
}

// average folds sample into the moving average a (weight 1/8).
func average(a *atomic.Int64, sample int64) {
	old := a.Load()
	a.CompareAndSwap(old, old+(sample-old)/8)
}

// wakeWorth reports whether a call of the given bytes, done alone, would
// take long enough that waking a parked helper pays. A helper that starts
// L after the call and works beside the caller (who paid C to wake it)
// until the end saves (T - C - L) / 2 of a call that takes T alone: the
// call must take at least twice C + L for the saving to be worth the
// helper's core. One call in 16 that finds only parked helpers wakes one
// anyway, so that the costs are measured again when they change.
func wakeWorth(bytes int) bool {
	if testAlwaysWake.Load() {
		return true
	}
	solo := int64(bytes) * 1000 / max(pool.rate.Load(), 1)
	if solo >= 2*(pool.wakeCost.Load()+pool.wakeDelay.Load()) {
		return true
	}
	return pool.wakeSkips.Add(1)%16 == 0
}

var epoch = time.Now()

// now is a monotonic clock in nanoseconds.
func now() int64 { return int64(time.Since(epoch)) }

// parallel converts dst, src (sectors whole sectors) with up to workers
// participants; it returns false, doing nothing, when one is enough or no
// helper could be had.
func (s *Codec) parallel(dst, src []byte, first uint64, decrypt bool, sectors, workers int) bool {
	size := s.p.Size
	want := min(workers, len(src)/minShare, runtime.GOMAXPROCS(0))
	if want < 2 || sectors > math.MaxInt32 {
		return false
	}
	hs := helpers(runtime.GOMAXPROCS(0) - 1)
	j := jobs.Get().(*job)
	j.codec, j.dst, j.src, j.first, j.decrypt = s, dst, src, first, decrypt
	j.claim = max(1, (minClaim+size-1)/size)

	// The job is made ready for every part before any is offered, so that
	// a helper starts the moment it sees its offer; a part no helper takes
	// is stolen like any other.
	if cap(j.spans) < want {
		j.spans = make([]span, want)
		j.offers = make([]offer, want-1)
	}
	j.spans, j.offers = j.spans[:want], j.offers[:want-1]
	for p := range want {
		j.spans[p].v.Store(pack(p*sectors/want, (p+1)*sectors/want))
	}
	for i := range j.offers {
		j.offers[i] = offer{job: j, part: i + 1}
	}
	j.pending.Store(2 * int64(len(j.offers)))

	// Offer parts to spinning helpers first, then to parked ones if the
	// call is long enough to pay for waking them.
	j.recruited = j.recruited[:0]
	hand := func(h *helper, from *offer) bool {
		if h.offer.Load() != from || !h.offer.CompareAndSwap(from, &j.offers[len(j.recruited)]) {
			return false
		}
		j.recruited = append(j.recruited, h)
		return true
	}
	for _, h := range hs {
		if len(j.recruited) == len(j.offers) {
			break
		}
		hand(h, nil)
	}
	if len(j.recruited) < len(j.offers) && wakeWorth(len(src)) {
		t, woken := now(), 0
		for _, h := range hs {
			if len(j.recruited) == len(j.offers) {
				break
			}
			if hand(h, parkedMark) {
				h.sent.Store(t) // read by the helper after the token
				woken++
				select {
				case h.wake <- struct{}{}:
				default:
				}
			}
		}
		if woken > 0 {
			average(&pool.wakeCost, now()-t)
		}
	}
	for _, h := range j.recruited {
		h.recruits.Add(1)
	}
	if len(j.recruited) == 0 {
		j.pending.Store(0)
		j.release()
		return false
	}
	j.pending.Add(-2 * int64(len(j.offers)-len(j.recruited))) // the parts nobody was offered

	// The caller's share; then offers not yet taken are taken back and the
	// helpers that took theirs waited for, also when a claim panics (a
	// wiped cipher), so that no helper still writes to dst once the call
	// is over.
	finished := false
	defer func() {
		for i, h := range j.recruited {
			if h.offer.CompareAndSwap(&j.offers[i], nil) {
				j.leave()
			}
		}
		j.wait()
		p := j.failed.Swap(nil)
		j.release()
		if p != nil && finished {
			panic(*p)
		}
	}()
	begin := now()
	mine := j.work(0)
	if d := now() - begin; mine >= minShare && d > 0 {
		average(&pool.rate, int64(mine)*1000/d)
	}
	finished = true
	return true
}

// release drops j's references and returns it to the pool.
func (j *job) release() {
	clear(j.recruited)
	clear(j.offers)
	j.codec, j.dst, j.src = nil, nil, nil
	jobs.Put(j)
}

// loop is a helper's life: wait for an offer (spinning, then parked), work
// on it, and spin again for about as long as the work took.
func (h *helper) loop() {
	spin := int64(10 * time.Microsecond)
	for {
		start := now()
		last := start
		var o *offer
		for {
			if f := testHelperWaits.Load(); f != nil {
				(*f)()
			}
			v := h.offer.Load()
			if v != nil && v != parkedMark {
				if h.offer.CompareAndSwap(v, takenMark) {
					o = v
					break
				}
				continue // taken back
			}
			t := now()
			if t-start < spin {
				if t-last > int64(yieldEvery) {
					runtime.Gosched()
					last = t
				}
				continue
			}
			if h.offer.CompareAndSwap(nil, parkedMark) {
				<-h.wake
				start = now()
				last = start
				// A token whose offer came after the last wake-up had
				// already ended the park (the helper took the offer
				// spinning) finds no offer now: spin again, and measure
				// no wake-up that did not happen.
				if !h.offer.CompareAndSwap(parkedMark, nil) {
					average(&pool.wakeDelay, start-h.sent.Load())
				}
			}
		}
		// o is read only once taken: until then its caller may take it
		// back and, with its job reused, offer it again.
		j, part := o.job, o.part
		begin := now()
		h.run(j, part)
		spin = min(max(now()-begin, int64(10*time.Microsecond)), int64(maxSpin))
	}
}

// run works on j as participant part; a panic is handed to the caller.
func (h *helper) run(j *job, part int) {
	defer func() {
		if r := recover(); r != nil {
			j.failed.CompareAndSwap(nil, &r)
		}
		h.offer.Store(nil)
		j.leave()
	}()
	h.bytes.Add(int64(j.work(part)))
}

// testHelperWaits, if set, runs in every turn of a waiting helper's loop:
// tests hold helpers back with it.
var testHelperWaits atomic.Pointer[func()]

// testAlwaysWake makes every call wake parked helpers (tests).
var testAlwaysWake atomic.Bool
