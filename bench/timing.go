package bench

import (
	"context"
	"slices"
	"time"
)

// Stats summarises the runs of one measurement, in MB/s (10^6 bytes per
// second, the unit openssl speed and cryptsetup's "MB/s" readers expect).
type Stats struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	Q1     float64 `json:"q1"` // lower quartile
	Q3     float64 `json:"q3"` // upper quartile
	Runs   int     `json:"runs"`
	// Samples are the runs' figures in the order they ran, for ratios
	// of members measured in the same rounds (scaling): a ratio of two
	// medians carries both members' noise, the median of per-round
	// ratios only what changed within a round.
	Samples []float64 `json:"samples,omitempty"`
}

// Spread is half the range relative to the median: the table's "±".
func (s Stats) Spread() float64 {
	if s.Median == 0 {
		return 0
	}
	return (s.Max - s.Min) / 2 / s.Median
}

func summarise(mbps []float64) Stats {
	v := slices.Clone(mbps)
	slices.Sort(v)
	return Stats{
		Median:  quantile(v, 0.5),
		Min:     v[0],
		Max:     v[len(v)-1],
		Q1:      quantile(v, 0.25),
		Q3:      quantile(v, 0.75),
		Runs:    len(v),
		Samples: slices.Clone(mbps),
	}
}

// pairedRatio is the median over the rounds of a's figure over b's, where
// both ran in the same rounds; else the ratio of their medians.
func pairedRatio(a, b Stats) float64 {
	if len(a.Samples) == 0 || len(a.Samples) != len(b.Samples) {
		return a.Median / b.Median
	}
	r := make([]float64, 0, len(a.Samples))
	for i, x := range a.Samples {
		if b.Samples[i] > 0 {
			r = append(r, x/b.Samples[i])
		}
	}
	if len(r) == 0 {
		return a.Median / b.Median
	}
	slices.Sort(r)
	return quantile(r, 0.5)
}

// quantile interpolates linearly between the order statistics of sorted v.
func quantile(v []float64, q float64) float64 {
	pos := q * float64(len(v)-1)
	i := int(pos)
	if i+1 >= len(v) {
		return v[len(v)-1]
	}
	return v[i] + (pos-float64(i))*(v[i+1]-v[i])
}

// A clock measures elapsed time: wall time, or the CPU time of the calling
// OS thread (which excludes time other processes ran on our core).
type clock interface {
	now() time.Duration
	name() string
}

type wallClock struct{ start time.Time }

func (c *wallClock) now() time.Duration { return time.Since(c.start) }
func (*wallClock) name() string         { return "wall" }

// timer runs measurements: calibrate (which doubles as warm-up), one more
// warm-up run of the final length, then the timed runs.
type timer struct {
	clock  clock
	budget time.Duration // the total time of the timed runs of one measurement
	runs   int
	// slice, if set, cuts each run into slices of about this long, the
	// members' slices taking turns (see measureGroup).
	slice time.Duration
}

// unitSlice is the slice of one-core runs. On a VM the host takes the CPU
// in bursts shorter than a run (and a guest's thread CPU time counts them),
// so whole runs of a group, taken one after the other, saw different
// bursts: 16- to 128-byte figures spread by ±20-60% in 66 ms runs on the
// Intel f6m207 VM, where rounds of about 100 µs in turn
// (TestMeasureInterleaved) hold ratios to a few percent.
const unitSlice = 500 * time.Microsecond

// minCalibration is the shortest calibration run whose timing is trusted
// to scale the iteration count.
const minCalibration = 200 * time.Microsecond

// A member is one loop of a measured group.
type member struct {
	bytesPerOp int
	setup      func() // run before each of the member's runs, untimed (selects a variant)
	op         func(n int)
}

// measure times op, which performs n operations of bytesPerOp bytes each
// and must not allocate, and returns MB/s statistics over t.runs runs.
func (t timer) measure(ctx context.Context, bytesPerOp int, op func(n int)) (Stats, error) {
	s, err := t.measureGroup(ctx, []member{{bytesPerOp: bytesPerOp, op: op}})
	if err != nil {
		return Stats{}, err
	}
	return s[0], nil
}

// measureGroup times several loops that are to be compared, interleaving
// their runs (run 1 of each, then run 2 of each, ...), so that a change of
// load on a shared machine falls on all of them alike and their ratios
// stay fair. With t.slice, each run is itself cut into slices that take
// turns (slice 1 of each member's run, then slice 2, ..., the order
// rotating), so the members of a run share the same stretch of time. Each
// member is calibrated and warmed up first.
func (t timer) measureGroup(ctx context.Context, ms []member) ([]Stats, error) {
	perRun := max(t.budget/time.Duration(t.runs), time.Microsecond)
	ns := make([]int, len(ms))
	for i, m := range ms {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		m.prepare()
		ns[i] = t.calibrate(m.op, perRun)
		t.time(m.op, ns[i]) // warm-up at the final length: caches, branch predictors, clock ramp
	}
	cuts := 1
	if t.slice > 0 {
		cuts = max(1, int(perRun/t.slice))
		for _, n := range ns {
			cuts = min(cuts, n) // at least one operation per slice
		}
	}
	per := make([]int, len(ms)) // operations per slice
	for i, n := range ns {
		per[i] = n / cuts
	}
	mbps := make([][]float64, len(ms))
	spent := make([]time.Duration, len(ms))
	for range t.runs {
		clear(spent)
		for c := range cuts {
			for k := range ms {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				i := (k + c) % len(ms)
				ms[i].prepare()
				spent[i] += t.time(ms[i].op, per[i])
			}
		}
		for i, m := range ms {
			mbps[i] = append(mbps[i], float64(per[i]*cuts)*float64(m.bytesPerOp)/max(spent[i].Seconds(), 1e-9)/1e6)
		}
	}
	stats := make([]Stats, len(ms))
	for i := range ms {
		stats[i] = summarise(mbps[i])
	}
	return stats, nil
}

func (m member) prepare() {
	if m.setup != nil {
		m.setup()
	}
}

// calibrate returns how many operations of op fill perRun, growing the
// count until a run is long enough to trust.
func (t timer) calibrate(op func(n int), perRun time.Duration) int {
	n := 1
	for {
		d := t.time(op, n)
		if d >= min(perRun, minCalibration) || n >= 1<<30 {
			return scale(n, d, perRun)
		}
		if d <= 0 {
			n *= 100
		} else {
			n = scale(n, d, 2*minCalibration)
		}
	}
}

func (t timer) time(op func(n int), n int) time.Duration {
	start := t.clock.now()
	op(n)
	return t.clock.now() - start
}

// scale returns how many operations fill target, given that n took d; it
// at least doubles n when d is too short to trust, and is at least 1.
func scale(n int, d, target time.Duration) int {
	if d <= 0 {
		return n * 2
	}
	next := int(float64(n) * float64(target) / float64(d))
	return min(max(next, 1), 1<<30)
}
