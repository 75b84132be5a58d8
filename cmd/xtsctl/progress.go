package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/pflag"
)

// progressMin is the smallest image that gets a progress bar: smaller ones
// finish before a bar would be worth reading.
const progressMin = 64 << 20

// registerProgressFlag adds --progress-json to a long-running command.
func registerProgressFlag(a *app, fs *pflag.FlagSet) {
	fs.BoolVar(&a.progressJSON, "progress-json", false,
		"report progress as JSON, one object per line on stderr (docs/CLI.md), instead of a bar")
}

// newProgress returns a callback reporting bytes done, and a function to
// call at the end: a bar on stderr when it is a terminal, the job is large
// and --quiet is off; JSON lines with --progress-json; otherwise nothing.
func newProgress(a *app, what string, total int64) (update func(int64), done func()) {
	return newProgressFrom(a, what, 0, total)
}

// newProgressFrom is newProgress for a job that starts with start bytes
// already done (a resumed run): rate and time left count only what this
// run does.
func newProgressFrom(a *app, what string, start, total int64) (update func(int64), done func()) {
	if a.progressJSON {
		p := newJSONProgress(a.stderr, what, start, total, time.Now)
		return p.update, p.finish
	}
	if a.quiet || total-start < progressMin || !a.stderrIsTerminal() {
		return nil, func() {}
	}
	desc := "xtsctl: " + what
	if start > 0 {
		desc += fmt.Sprintf(" (resumed at %.1f%%)", 100*float64(start)/float64(total))
	}
	bar := newBar(a.stderr, desc, total-start)
	return func(n int64) { _ = bar.Set64(n - start) }, func() { _ = bar.Finish() }
}

// newBar makes the bar. Its clock starts now: progressbar otherwise starts
// it at the first update and divides the bytes of that update by the
// nanoseconds since, which made the first frame show rates like 95 GB/s.
func newBar(w io.Writer, desc string, total int64) *progressbar.ProgressBar {
	bar := progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionShowBytes(true),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionSetPredictTime(true),
	)
	bar.StartWithoutRender()
	return bar
}

// progressLine is one line of --progress-json (its fields are part of the
// CLI's interface, docs/CLI.md).
type progressLine struct {
	Op       string   `json:"op"`
	Done     int64    `json:"done"`
	Total    int64    `json:"total"`
	Percent  float64  `json:"percent"`
	Rate     *float64 `json:"bytes_per_second"` // null until measured
	ETA      *float64 `json:"eta_seconds"`      // null until measured
	Elapsed  float64  `json:"elapsed_seconds"`
	Finished bool     `json:"finished"`
}

// jsonProgress writes a progressLine when a job starts, at most once a
// second while it runs, and when it ends. The rate is over the last few
// seconds, and only once half a second has been measured: before that it
// would be a guess from a handful of bytes.
type jsonProgress struct {
	mu           sync.Mutex
	w            io.Writer
	op           string
	start, total int64
	now          func() time.Time
	t0, last     time.Time
	done         int64
	samples      []progressSample
	finished     bool
}

type progressSample struct {
	t    time.Time
	done int64
}

const (
	jsonInterval  = time.Second
	rateWindow    = 5 * time.Second
	rateMinWindow = 500 * time.Millisecond
)

func newJSONProgress(w io.Writer, op string, start, total int64, now func() time.Time) *jsonProgress {
	p := &jsonProgress{w: w, op: op, start: start, total: total, now: now, done: start}
	p.t0 = now()
	p.samples = []progressSample{{p.t0, start}}
	p.emit(p.t0)
	return p
}

func (p *jsonProgress) update(n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.finished {
		return
	}
	t := p.now()
	p.done = n
	p.samples = append(p.samples, progressSample{t, n})
	for len(p.samples) > 2 && t.Sub(p.samples[1].t) >= rateWindow {
		p.samples = p.samples[1:]
	}
	if t.Sub(p.last) >= jsonInterval {
		p.emit(t)
	}
}

func (p *jsonProgress) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.finished {
		return
	}
	p.finished = true
	p.emit(p.now())
}

// emit writes the line for time t.
func (p *jsonProgress) emit(t time.Time) {
	p.last = t
	l := progressLine{Op: p.op, Done: p.done, Total: p.total, Elapsed: t.Sub(p.t0).Seconds(), Finished: p.finished}
	if p.total > 0 {
		l.Percent = math.Round(1000*float64(p.done)/float64(p.total)) / 10
	}
	first := p.samples[0]
	if p.finished {
		// The whole job is measured: its average, however short.
		first = progressSample{p.t0, p.start}
	}
	if span := t.Sub(first.t); span >= rateMinWindow || p.finished && span > 0 {
		rate := float64(p.done-first.done) / span.Seconds()
		l.Rate = &rate
		if rate > 0 {
			eta := float64(p.total-p.done) / rate
			l.ETA = &eta
		}
	}
	b, _ := json.Marshal(l)
	fmt.Fprintf(p.w, "%s\n", b)
}
