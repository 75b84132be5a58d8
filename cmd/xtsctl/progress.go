package main

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"
	"github.com/xtsctl/xtsctl/internal/progress"
)

// progressMin is the smallest image that gets a progress bar: smaller ones
// finish before a bar would be worth reading.
const progressMin = 64 << 20

// The phases of a job, as --progress-json names them (docs/CLI.md).
const (
	phaseKDF   = progress.PhaseKDF
	phaseData  = progress.PhaseData
	phaseHash  = progress.PhaseHash
	phaseCheck = progress.PhaseCheck
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
	cur progress.Reporter
	now func() time.Time // time.Now but in tests
}

func newPhases(a *app) *phases { return &phases{a: a, now: time.Now} }

// kdf starts the key derivation, ending the phase before it. size is the
// data that follows, which decides whether a bar is worth drawing.
func (p *phases) kdf(what string, size int64) {
	p.endPhase(false)
	switch {
	case p.a.progressJSON:
		p.cur = progress.NewJSON(p.a.stderr, what, phaseKDF, 0, 0, false, p.now)
	case p.barWanted(size):
		p.cur = progress.NewSpinner(p.a.stderr, "xtsctl: "+what)
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
		p.cur = progress.NewJSON(p.a.stderr, what, phase, start, total, resumed && start > 0, p.now)
	case p.barWanted(total - start):
		p.cur = progress.NewBar(p.a.stderr, barDescription(what, start, total, resumed), start, total)
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
		p.cur.Update(n)
	}
}

// end closes the current phase: finished when err is nil, else
// interrupted.
func (p *phases) end(err error) { p.endPhase(err != nil) }

func (p *phases) endPhase(interrupted bool) {
	if p.cur != nil {
		p.cur.End(interrupted)
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
			p.cur.Clear()
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
