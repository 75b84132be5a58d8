// Package kdfcal picks the Argon2id costs of a new key slot the way
// cryptsetup's PBKDF benchmark does (crypt_argon2_check in its
// lib/crypto_backend/pbkdf_check.c), for volumes and LUKS2 keyslots alike:
// find small costs that take a measurable time, scale them to the target,
// then measure and correct until a run falls within 95-110% of it. Memory
// grows first, up to its maximum, then passes; memory is lowered only when
// the fewest passes allowed would take longer than the target.
//
// It differs from cryptsetup in what a run's time is: cryptsetup takes the
// wall-clock time, which on a busy machine includes the time other
// processes ran and so picks costs that are cheap to guess. Here a run
// takes the smaller of its wall-clock time and its CPU time over the lanes
// that could run at once: on an idle machine the two agree, on a busy one
// the second is what the run would have taken without the others.
package kdfcal

import (
	"math"
	"runtime"
	"time"

	"golang.org/x/crypto/argon2"
)

// Bounds are what the search may choose.
type Bounds struct {
	// MinPasses is the fewest passes (cryptsetup: 4; at least 1);
	// MaxPasses the most (0: no bound).
	MinPasses, MaxPasses uint32
	// MinMemoryKiB and MaxMemoryKiB bound the memory; equal, they fix it
	// (a memory the user chose) and only the passes are calibrated. The
	// minimum is raised to the 8 KiB per lane Argon2 needs.
	MinMemoryKiB, MaxMemoryKiB uint32
	Threads                    uint8
}

// Result are the costs chosen and what a run of them takes here.
type Result struct {
	Passes, MemoryKiB uint32
	Threads           uint8
	// Took is the time of the last run measured, scaled in proportion to
	// passes × memory when the search ended on costs it computed without
	// running them (as cryptsetup's does at a bound).
	Took time.Duration
	// Runs is how many times the search ran Argon2id.
	Runs int
}

// A Measure runs Argon2id once with passes over memoryKiB and returns how
// long that took.
type Measure func(passes, memoryKiB uint32) time.Duration

// cryptsetup's constants (pbkdf_check.c).
const (
	benchMin        = 250 * time.Millisecond // step 1 looks for costs that take this long
	benchMinFast    = 10 * time.Millisecond  // below this, step 1 multiplies by 16
	benchSamples    = 3                      // step 1 keeps the best of these
	percentAtLeast  = 95                     // step 3 accepts a run within these
	percentAtMost   = 110                    // percentages of the target
	maxSearchSteps  = 64                     // a bound on step 1, whatever Measure says
	maxCorrections  = 5                      // and on step 3 (each run takes the target)
	minLaneMemory   = 8                      // KiB per lane, Argon2's minimum
	unboundedPasses = math.MaxUint32
)

// Calibrate searches for the costs within b that take about target to run
// with measure (Argon2id(b.Threads) for the real thing).
func Calibrate(target time.Duration, b Bounds, measure Measure) Result {
	threads := max(b.Threads, 1)
	minT := max(b.MinPasses, 1)
	maxT := b.MaxPasses
	if maxT == 0 {
		maxT = unboundedPasses
	}
	maxT = max(maxT, minT)
	minM := max(b.MinMemoryKiB, minLaneMemory*uint32(threads))
	maxM := max(b.MaxMemoryKiB, minM)
	target = max(target, time.Millisecond)

	r := Result{Threads: threads}
	run := func(t, m uint32, samples int, atLeast time.Duration) time.Duration {
		best := time.Duration(math.MaxInt64)
		for range samples {
			d := max(measure(t, m), time.Nanosecond)
			r.Runs++
			best = min(best, d)
			if d < atLeast || d >= 2*target {
				break // short, or twice the target: more samples would not change the decision
			}
		}
		return best
	}

	// 1. Costs that take at least benchMin (or the target, if that is
	// shorter: cryptsetup goes on to benchMin): memory grows first, then
	// passes; sixteenfold while a run is too short to scale from, and at
	// least twofold (cryptsetup scales by exactly what is missing, which
	// creeps where a fixed cost of starting dominates).
	t, m := minT, minM
	var took time.Duration
	for range maxSearchSteps {
		took = run(t, m, benchSamples, min(benchMin, target))
		if took >= min(benchMin, target) {
			break // long enough to scale from; or, for a short target, already too long
		}
		if m == maxM {
			if t == maxT {
				break
			}
			n := max(scale(t, benchMin, took), mul(t, 2))
			if took < benchMinFast {
				n = mul(t, 16)
			}
			if n == t {
				break
			}
			t = min(n, maxT)
		} else {
			n := max(scale(m, benchMin, took), mul(m, 2))
			if took < benchMinFast {
				n = mul(m, 16)
			}
			if n == m {
				break
			}
			m = min(n, maxM)
		}
	}

	// 2. Scale to the target; 3. measure, and correct while a run falls
	// outside 95-110% of it. cryptsetup corrects from the last run alone
	// and does not stop; on a noisy machine that bounces around the
	// target, so each correction here uses the time per pass×KiB of all
	// of step 3's runs, and after maxCorrections the estimate stands.
	var work, spent float64
	for i := 0; ; i++ {
		nt, nm, final := next(t, m, took, target, minT, maxT, minM, maxM)
		if final || i == maxCorrections {
			if nt != t || nm != m {
				took = time.Duration(float64(took) * float64(nt) * float64(nm) / (float64(t) * float64(m)))
			}
			t, m = nt, nm
			break
		}
		t, m = nt, nm
		d := run(t, m, 1, 0)
		if d >= target*percentAtLeast/100 && d <= target*percentAtMost/100 {
			took = d
			break
		}
		work += float64(t) * float64(m)
		spent += float64(d)
		took = time.Duration(spent / work * float64(t) * float64(m))
	}
	r.Passes, r.MemoryKiB, r.Took = t, m, took
	return r
}

// next is cryptsetup's next_argon2_params: the costs that should take
// target, given that t passes over m took took. Too slow: fewer passes,
// then (at the fewest) less memory. Too fast: more memory, then (at the
// most) more passes. final: a bound was reached or nothing changes, and
// the search ends with these costs.
func next(t, m uint32, took, target time.Duration, minT, maxT, minM, maxM uint32) (uint32, uint32, bool) {
	ratio := float64(target) / float64(took)
	if took > target {
		nt := uint32(float64(t) * ratio)
		if nt < minT {
			nm := float64(t) * float64(m) * ratio / float64(minT)
			if nm < float64(minM) {
				return minT, minM, true
			}
			return minT, uint32(nm), minT == t && uint32(nm) == m
		}
		return nt, m, nt == t
	}
	nm := float64(m) * ratio
	switch {
	case nm > float64(maxM):
		nt := float64(t) * float64(m) * ratio / float64(maxM)
		if nt <= float64(minT) {
			return minT, maxM, true
		}
		if nt >= float64(maxT) {
			return maxT, maxM, true
		}
		return uint32(nt), maxM, uint32(nt) == t && maxM == m
	case nm < float64(minM):
		return t, minM, true
	}
	return t, uint32(nm), uint32(nm) == m
}

// scale returns v × want/got, at least 1, at most MaxUint32.
func scale(v uint32, want, got time.Duration) uint32 {
	return uint32(min(max(float64(v)*float64(want)/float64(got), 1), math.MaxUint32))
}

func mul(v, k uint32) uint32 { return uint32(min(uint64(v)*uint64(k), math.MaxUint32)) }

// Argon2id measures real runs with threads lanes: the smaller of the wall
// time and the process's CPU time over the lanes that can run at once
// (package doc). It collects the garbage of the previous run first, so
// that runs over a GiB do not add up in memory, and outside the time.
func Argon2id(threads uint8) Measure {
	lanes := time.Duration(max(1, min(int(threads), runtime.GOMAXPROCS(0))))
	pass := []byte("xtsctl calibration")
	salt := make([]byte, 32)
	return func(passes, memoryKiB uint32) time.Duration {
		runtime.GC()
		cpu0, start := processCPU(), time.Now()
		k := argon2.IDKey(pass, salt, passes, memoryKiB, threads, 32)
		wall, cpu := time.Since(start), processCPU()-cpu0
		clear(k)
		if cpu > 0 {
			return min(wall, cpu/lanes)
		}
		return wall
	}
}
