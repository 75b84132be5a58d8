package kdfcal

import (
	"math/rand/v2"
	"testing"
	"time"
)

// machine models Argon2id's cost: a fixed start plus a time per pass per
// GiB, with noise; it counts the runs and their costs.
type machine struct {
	fixed, perGiBPass time.Duration
	noise             float64 // ± this fraction, uniformly
	rng               *rand.Rand
	runs              int
	work              float64 // GiB×passes run
}

func (mc *machine) measure(t, m uint32) time.Duration {
	mc.runs++
	gib := float64(m) / (1 << 20)
	mc.work += gib * float64(t)
	d := float64(mc.fixed) + float64(mc.perGiBPass)*gib*float64(t)
	if mc.noise > 0 {
		d *= 1 + mc.noise*(2*mc.rng.Float64()-1)
	}
	return time.Duration(d)
}

func (mc *machine) cost(t, m uint32) time.Duration {
	return time.Duration(float64(mc.fixed) + float64(mc.perGiBPass)*float64(m)/(1<<20)*float64(t))
}

const gib = 1 << 20 // KiB

// luks are cryptsetup's bounds for a new LUKS2 keyslot at its defaults.
var luks = Bounds{MinPasses: 4, MinMemoryKiB: 32, MaxMemoryKiB: gib, Threads: 4}

// TestCalibrateLikeCryptsetup: the search's choices on modelled machines,
// as cryptsetup's would be: memory first, up to its maximum, then passes;
// memory lowered only when the fewest passes take longer than the target;
// the result within 95-110% of the target when it is not at a bound.
func TestCalibrateLikeCryptsetup(t *testing.T) {
	target := 2 * time.Second
	for _, c := range []struct {
		name             string
		mc               machine
		b                Bounds
		passes           [2]uint32 // at least, at most
		memMin, memMax   uint32
		atBound          bool // the target cannot be met within b
		tookMin, tookMax time.Duration
		maxRuns          int // 0: 20
	}{
		// 1 GiB × 4 passes takes 1 s: the memory stays at its maximum,
		// the passes double.
		{name: "fast", mc: machine{perGiBPass: 250 * time.Millisecond}, b: luks, passes: [2]uint32{7, 9}, memMin: gib, memMax: gib},
		// 1 GiB × 4 passes takes 8 s: 4 passes, a quarter of the memory.
		{name: "slow", mc: machine{perGiBPass: 2 * time.Second}, b: luks, passes: [2]uint32{4, 4}, memMin: gib / 4 * 95 / 100, memMax: gib / 4 * 110 / 100},
		// A fixed cost of starting does not throw it off.
		{name: "fixed cost", mc: machine{fixed: 200 * time.Millisecond, perGiBPass: time.Second}, b: luks, passes: [2]uint32{4, 4}, memMin: gib * 40 / 100, memMax: gib * 50 / 100},
		// Our volumes: one pass at the fewest, so the memory stays.
		{name: "volume", mc: machine{perGiBPass: time.Second}, b: Bounds{MinPasses: 1, MinMemoryKiB: 32, MaxMemoryKiB: gib, Threads: 2}, passes: [2]uint32{2, 2}, memMin: gib, memMax: gib},
		// Noise of ±5% still lands within the window.
		{name: "noisy", mc: machine{perGiBPass: 2 * time.Second, noise: 0.05}, b: luks, passes: [2]uint32{4, 4}, memMin: gib / 5, memMax: gib / 3},
		// A machine whose runs vary by ±15% (a shared one, busy with
		// memory traffic): the corrections pool their runs rather than
		// bounce around the target, and the search still ends close.
		{name: "very noisy", mc: machine{perGiBPass: 2 * time.Second, noise: 0.15}, b: luks, passes: [2]uint32{4, 4}, memMin: gib / 5, memMax: gib / 3},
		// A memory the user chose stays, even where 4 passes take 1 s
		// of a 50 ms target: the search says how long it takes.
		{name: "chosen memory, too slow", mc: machine{perGiBPass: time.Second}, b: Bounds{MinPasses: 4, MinMemoryKiB: 256 << 10, MaxMemoryKiB: 256 << 10, Threads: 4},
			passes: [2]uint32{4, 4}, memMin: 256 << 10, memMax: 256 << 10, atBound: true, tookMin: time.Second, tookMax: time.Second,
			maxRuns: 1}, // one run says it is too slow already

		// A small chosen memory gets many passes.
		{name: "chosen memory, passes grow", mc: machine{perGiBPass: time.Second}, b: Bounds{MinPasses: 4, MinMemoryKiB: 32 << 10, MaxMemoryKiB: 32 << 10, Threads: 4},
			passes: [2]uint32{60, 70}, memMin: 32 << 10, memMax: 32 << 10},
		// The passes stop at their bound.
		{name: "pass bound", mc: machine{perGiBPass: time.Millisecond}, b: Bounds{MinPasses: 4, MaxPasses: 1000, MinMemoryKiB: 32, MaxMemoryKiB: gib, Threads: 4},
			passes: [2]uint32{1000, 1000}, memMin: gib, memMax: gib, atBound: true, tookMin: time.Second, tookMax: time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			tg := target
			if c.name == "chosen memory, too slow" {
				tg = 50 * time.Millisecond
			}
			mc := c.mc
			mc.rng = rand.New(rand.NewPCG(1, 2))
			r := Calibrate(tg, c.b, mc.measure)
			t.Logf("%d passes over %d KiB, %d threads: %v (%d runs, %.1f GiB×passes run)", r.Passes, r.MemoryKiB, r.Threads, r.Took, r.Runs, mc.work)
			if r.Passes < c.passes[0] || r.Passes > c.passes[1] || r.MemoryKiB < c.memMin || r.MemoryKiB > c.memMax || r.Threads != c.b.Threads {
				t.Fatalf("chose %d passes over %d KiB with %d threads; want %v passes over %d..%d KiB with %d", r.Passes, r.MemoryKiB, r.Threads, c.passes, c.memMin, c.memMax, c.b.Threads)
			}
			real := mc.cost(r.Passes, r.MemoryKiB)
			if c.atBound {
				if real < c.tookMin || real > c.tookMax*11/10 {
					t.Fatalf("the costs take %v, want %v..%v", real, c.tookMin, c.tookMax)
				}
			} else if real < tg*90/100 || real > tg*115/100 {
				t.Fatalf("the costs take %v of a %v target", real, tg)
			}
			// Took says what the costs take (measured, or scaled).
			if d := float64(r.Took) / float64(real); d < 1-c.mc.noise-0.01 || d > 1+c.mc.noise+0.01 {
				t.Fatalf("Took %v, the costs take %v", r.Took, real)
			}
			// The search takes a handful of runs, not dozens.
			if c.maxRuns == 0 {
				c.maxRuns = 20
			}
			if mc.runs > c.maxRuns {
				t.Fatalf("%d runs", mc.runs)
			}
		})
	}
}

// TestCalibrateEnds: whatever the measurements say (nothing at all, or
// wildly different times), the search ends, within its bounds.
func TestCalibrateEnds(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for name, measure := range map[string]Measure{
		"zero":    func(uint32, uint32) time.Duration { return 0 },
		"hour":    func(uint32, uint32) time.Duration { return time.Hour },
		"erratic": func(uint32, uint32) time.Duration { return time.Duration(rng.Int64N(int64(10 * time.Second))) },
	} {
		runs := 0
		counted := func(p, m uint32) time.Duration { runs++; return measure(p, m) }
		b := Bounds{MinPasses: 4, MaxPasses: 1000, MinMemoryKiB: 32, MaxMemoryKiB: gib, Threads: 4}
		r := Calibrate(2*time.Second, b, counted)
		if r.Passes < 4 || r.Passes > 1000 || r.MemoryKiB < 32 || r.MemoryKiB > gib || runs > 3*maxSearchSteps+maxCorrections {
			t.Errorf("%s: %+v after %d runs", name, r, runs)
		}
	}
}

// TestArgon2idMeasures: a real run is timed, and more work takes longer
// (by CPU time over the lanes, which another process cannot inflate much).
func TestArgon2idMeasures(t *testing.T) {
	m := Argon2id(1)
	small, large := m(1, 1<<10), m(16, 8<<10)
	if small <= 0 || large <= small {
		t.Fatalf("1 pass over 1 MiB: %v; 16 passes over 8 MiB: %v", small, large)
	}
}
