package main

import (
	"time"

	"github.com/schollz/progressbar/v3"
)

// progressMin is the smallest image that gets a progress bar: smaller ones
// finish before a bar would be worth reading.
const progressMin = 64 << 20

// newProgress returns a callback reporting bytes done, drawing a bar on
// stderr when it is a terminal, the job is large and --quiet is off; and a
// function to call at the end. Otherwise both do nothing.
func newProgress(a *app, what string, total int64) (update func(int64), done func()) {
	if a.quiet || total < progressMin || !a.stderrIsTerminal() {
		return nil, func() {}
	}
	bar := progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(a.stderr),
		progressbar.OptionSetDescription("xtsctl: "+what),
		progressbar.OptionShowBytes(true),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionSetPredictTime(true),
	)
	return func(n int64) { _ = bar.Set64(n) }, func() { _ = bar.Finish() }
}
