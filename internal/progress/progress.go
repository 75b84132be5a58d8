// Package progress draws the progress of a long job: a bar or a spinner
// on a terminal, or JSON lines for programs, one phase at a time (the key
// derivation, then each pass over the data), each with its own clock.
package progress

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
)

// The phases of a job, as the JSON lines name them.
const (
	PhaseKDF   = "kdf"   // the key derivation (Argon2id, PBKDF2) before the data
	PhaseData  = "data"  // the pass that writes the result
	PhaseHash  = "hash"  // in place: hashing the plaintext before anything changes
	PhaseCheck = "check" // in place: checking every tag before anything changes
)

// A Reporter is one phase's bar or JSON lines.
type Reporter interface {
	// Update reports the bytes done.
	Update(done int64)
	// End closes the phase: finished, or interrupted (an error or a
	// signal stopped the job while the phase ran).
	End(interrupted bool)
	// Clear takes a bar off its line so that a message can be written
	// there; it comes back at its next frame.
	Clear()
}

// dataBar is a data phase drawn as a bar over what this run has to do.
type dataBar struct {
	w     io.Writer
	bar   *progressbar.ProgressBar
	desc  string
	start int64
	total int64
	done  int64
}

// NewBar is a data phase on a terminal: a bar over the total-start bytes
// this run has to do, its rate and time left counted from now.
func NewBar(w io.Writer, desc string, start, total int64) Reporter {
	return &dataBar{w: w, bar: newBar(w, desc, total-start), desc: desc, start: start, total: total, done: start}
}

func (b *dataBar) Update(n int64) {
	b.done = n
	_ = b.bar.Set64(n - b.start)
}

func (b *dataBar) Clear() { _ = b.bar.Clear() }

func (b *dataBar) End(interrupted bool) {
	_ = b.bar.Finish() // clears the line
	if interrupted {
		fmt.Fprintf(b.w, "%s: interrupted at %.1f%%\n", b.desc, 100*float64(b.done)/float64(max(b.total, 1)))
	}
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

// spinner is the key derivation on a terminal: no bytes and no rate,
// only the seconds it has taken so far.
type spinner struct {
	w    io.Writer
	bar  *progressbar.ProgressBar
	desc string
}

// NewSpinner is the key derivation on a terminal.
func NewSpinner(w io.Writer, desc string) Reporter {
	bar := progressbar.NewOptions64(-1,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionSetElapsedTime(true),
		progressbar.OptionSetPredictTime(false),
		progressbar.OptionClearOnFinish(),
	)
	_ = bar.RenderBlank() // starts its clock and its ticker
	return &spinner{w: w, bar: bar, desc: desc}
}

func (s *spinner) Update(int64) {}

func (s *spinner) Clear() { _ = s.bar.Clear() }

func (s *spinner) End(interrupted bool) {
	_ = s.bar.Finish()
	if interrupted {
		fmt.Fprintf(s.w, "%s: interrupted\n", s.desc)
	}
}

// Line is one line of JSON progress (xtsctl's --progress-json: its
// fields are part of the CLI's interface, docs/CLI.md).
type Line struct {
	Op          string   `json:"op"`
	Phase       string   `json:"phase"`
	Done        int64    `json:"done"`
	Total       int64    `json:"total"`
	Percent     float64  `json:"percent"`
	Rate        *float64 `json:"bytes_per_second"` // null until measured
	ETA         *float64 `json:"eta_seconds"`      // null until measured
	Elapsed     float64  `json:"elapsed_seconds"`
	Resumed     bool     `json:"resumed"`
	Finished    bool     `json:"finished"`
	Interrupted bool     `json:"interrupted"`
}

// jsonProgress writes a Line when a phase starts, at most once a
// second while it runs, and when it ends. The rate is over the last few
// seconds, and only once half a second has been measured: before that it
// would be a guess from a handful of bytes. A key derivation phase has no
// bytes: its lines have no rate.
type jsonProgress struct {
	mu           sync.Mutex
	w            io.Writer
	op, phase    string
	start, total int64
	resumed      bool
	now          func() time.Time
	t0, last     time.Time
	done         int64
	samples      []progressSample
	ended        bool
	finished     bool
	interrupted  bool
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

// NewJSON reports a phase as JSON lines on w (see jsonProgress); now is
// time.Now but in tests.
func NewJSON(w io.Writer, op, phase string, start, total int64, resumed bool, now func() time.Time) Reporter {
	p := &jsonProgress{w: w, op: op, phase: phase, start: start, total: total, resumed: resumed, now: now, done: start}
	p.t0 = now()
	p.samples = []progressSample{{p.t0, start}}
	p.emit(p.t0)
	return p
}

func (p *jsonProgress) Update(n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended {
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

func (p *jsonProgress) Clear() {}

func (p *jsonProgress) End(interrupted bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended {
		return
	}
	p.ended = true
	p.finished, p.interrupted = !interrupted, interrupted
	p.emit(p.now())
}

// emit writes the line for time t.
func (p *jsonProgress) emit(t time.Time) {
	p.last = t
	l := Line{Op: p.op, Phase: p.phase, Done: p.done, Total: p.total, Elapsed: t.Sub(p.t0).Seconds(),
		Resumed: p.resumed, Finished: p.finished, Interrupted: p.interrupted}
	if p.total > 0 {
		l.Percent = math.Round(1000*float64(p.done)/float64(p.total)) / 10
	}
	first := p.samples[0]
	if p.ended {
		// The whole phase is measured: its average, however short.
		first = progressSample{p.t0, p.start}
	}
	if span := t.Sub(first.t); p.phase != PhaseKDF && (span >= rateMinWindow || p.ended && span > 0) {
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
