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

// The phases of a job, as --progress-json names them (docs/CLI.md).
const (
	phaseKDF   = "kdf"   // the key derivation (Argon2id, PBKDF2) before the data
	phaseData  = "data"  // the pass that writes the result
	phaseHash  = "hash"  // in place: hashing the plaintext before anything changes
	phaseCheck = "check" // in place: checking every tag before anything changes
)

// registerProgressFlag adds --progress-json to a long-running command.
func registerProgressFlag(a *app, fs *pflag.FlagSet) {
	fs.BoolVar(&a.progressJSON, "progress-json", false,
		"report progress as JSON, one object per line on stderr (docs/CLI.md), instead of a bar")
}

// phases reports a job one phase after another: the key derivation, if
// there is a slow one, then each pass over the data. Every phase has its
// own clock, so the rate and the time left of a pass count its bytes over
// its own time and never the seconds of the key derivation before it. The
// zero value reports nothing until a phase starts.
type phases struct {
	a   *app
	cur phaseReporter
	now func() time.Time // time.Now but in tests
}

// A phaseReporter is one phase's bar or JSON lines.
type phaseReporter interface {
	update(done int64)
	// end closes the phase: finished, or interrupted (an error or a
	// signal stopped the job while the phase ran).
	end(interrupted bool)
	// clear takes a bar off its line so that a message can be written
	// there; it comes back at its next frame.
	clear()
}

func newPhases(a *app) *phases { return &phases{a: a, now: time.Now} }

// kdf starts the key derivation, ending the phase before it. size is the
// data that follows, which decides whether a bar is worth drawing.
func (p *phases) kdf(what string, size int64) {
	p.endPhase(false)
	switch {
	case p.a.progressJSON:
		p.cur = newJSONProgress(p.a.stderr, what, phaseKDF, 0, 0, false, p.now)
	case p.barWanted(size):
		p.cur = newSpinner(p.a.stderr, "xtsctl: "+what)
	}
}

// data starts a pass over total bytes of data, of which start are done
// already, ending the phase before it. resumed says that start is what an
// interrupted run did (the bar says so); otherwise start is work of this
// run reported late and the bar simply counts from it.
func (p *phases) data(phase, what string, start, total int64, resumed bool) {
	p.endPhase(false)
	switch {
	case p.a.progressJSON:
		p.cur = newJSONProgress(p.a.stderr, what, phase, start, total, resumed && start > 0, p.now)
	case p.barWanted(total - start):
		p.cur = newDataBar(p.a.stderr, barDescription(what, start, total, resumed), start, total)
	}
}

// barDescription is the text before a data bar: a resumed run says where
// it resumed; a new one never does, even when its first report comes
// after some of its own work.
func barDescription(what string, start, total int64, resumed bool) string {
	desc := "xtsctl: " + what
	if resumed && start > 0 {
		desc += fmt.Sprintf(" (resumed at %.1f%%)", 100*float64(start)/float64(total))
	}
	return desc
}

// update reports the bytes done of the current pass.
func (p *phases) update(n int64) {
	if p.cur != nil {
		p.cur.update(n)
	}
}

// end closes the current phase: finished when err is nil, else
// interrupted.
func (p *phases) end(err error) { p.endPhase(err != nil) }

func (p *phases) endPhase(interrupted bool) {
	if p.cur != nil {
		p.cur.end(interrupted)
		p.cur = nil
	}
}

// say wraps a message function (a.infof, a.warningf) so that a message
// written while a bar is drawn gets a line of its own.
func (p *phases) say(f func(format string, args ...any)) func(format string, args ...any) {
	if f == nil {
		return nil
	}
	return func(format string, args ...any) {
		if p.cur != nil {
			p.cur.clear()
		}
		f(format, args...)
	}
}

func (p *phases) barWanted(size int64) bool {
	return !p.a.quiet && size >= progressMin && p.a.stderrIsTerminal()
}

// newProgress returns a callback reporting bytes done, and a function to
// call at the end with the job's error: a bar on stderr when it is a
// terminal, the job is large and --quiet is off; JSON lines with
// --progress-json; otherwise nothing. It is one data phase of its own.
func newProgress(a *app, what string, total int64) (update func(int64), done func(error)) {
	p := newPhases(a)
	p.data(phaseData, what, 0, total, false)
	return p.update, p.end
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

func newDataBar(w io.Writer, desc string, start, total int64) *dataBar {
	return &dataBar{w: w, bar: newBar(w, desc, total-start), desc: desc, start: start, total: total, done: start}
}

func (b *dataBar) update(n int64) {
	b.done = n
	_ = b.bar.Set64(n - b.start)
}

func (b *dataBar) clear() { _ = b.bar.Clear() }

func (b *dataBar) end(interrupted bool) {
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

func newSpinner(w io.Writer, desc string) *spinner {
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

func (s *spinner) update(int64) {}

func (s *spinner) clear() { _ = s.bar.Clear() }

func (s *spinner) end(interrupted bool) {
	_ = s.bar.Finish()
	if interrupted {
		fmt.Fprintf(s.w, "%s: interrupted\n", s.desc)
	}
}

// progressLine is one line of --progress-json (its fields are part of the
// CLI's interface, docs/CLI.md).
type progressLine struct {
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

// jsonProgress writes a progressLine when a phase starts, at most once a
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

func newJSONProgress(w io.Writer, op, phase string, start, total int64, resumed bool, now func() time.Time) *jsonProgress {
	p := &jsonProgress{w: w, op: op, phase: phase, start: start, total: total, resumed: resumed, now: now, done: start}
	p.t0 = now()
	p.samples = []progressSample{{p.t0, start}}
	p.emit(p.t0)
	return p
}

func (p *jsonProgress) update(n int64) {
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

func (p *jsonProgress) clear() {}

func (p *jsonProgress) end(interrupted bool) {
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
	l := progressLine{Op: p.op, Phase: p.phase, Done: p.done, Total: p.total, Elapsed: t.Sub(p.t0).Seconds(),
		Resumed: p.resumed, Finished: p.finished, Interrupted: p.interrupted}
	if p.total > 0 {
		l.Percent = math.Round(1000*float64(p.done)/float64(p.total)) / 10
	}
	first := p.samples[0]
	if p.ended {
		// The whole phase is measured: its average, however short.
		first = progressSample{p.t0, p.start}
	}
	if span := t.Sub(first.t); p.phase != phaseKDF && (span >= rateMinWindow || p.ended && span > 0) {
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
