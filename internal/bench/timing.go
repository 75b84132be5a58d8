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
		Median: quantile(v, 0.5),
		Min:    v[0],
		Max:    v[len(v)-1],
		Q1:     quantile(v, 0.25),
		Q3:     quantile(v, 0.75),
		Runs:   len(v),
	}
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

// timer runs one measurement: calibrate (which doubles as warm-up), one more
// warm-up run of the final length, then the timed runs.
type timer struct {
	clock  clock
	budget time.Duration // the total time of the timed runs of one measurement
	runs   int
}

// minCalibration is the shortest calibration run whose timing is trusted
// to scale the iteration count.
const minCalibration = 200 * time.Microsecond

// measure times op, which performs n operations of bytesPerOp bytes each
// and must not allocate, and returns MB/s statistics over t.runs runs.
func (t timer) measure(ctx context.Context, bytesPerOp int, op func(n int)) (Stats, error) {
	perRun := max(t.budget/time.Duration(t.runs), time.Microsecond)
	n := 1
	for {
		d := t.time(op, n)
		if d >= min(perRun, minCalibration) || n >= 1<<30 {
			n = scale(n, d, perRun)
			break
		}
		if d <= 0 {
			n *= 100
		} else {
			n = scale(n, d, 2*minCalibration)
		}
	}
	if err := ctx.Err(); err != nil {
		return Stats{}, err
	}
	t.time(op, n) // warm-up at the final length: caches, branch predictors, clock ramp
	mbps := make([]float64, t.runs)
	for i := range mbps {
		if err := ctx.Err(); err != nil {
			return Stats{}, err
		}
		d := t.time(op, n)
		mbps[i] = float64(n) * float64(bytesPerOp) / max(d.Seconds(), 1e-9) / 1e6
	}
	return summarise(mbps), nil
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
