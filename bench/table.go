package bench

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/xtsctl/xtsctl/internal/bytesize"
)

// WriteTable prints r as text: a header describing the machine and the
// method, then one row per implementation, length and key size, with the
// encrypt and decrypt figures side by side (like cryptsetup benchmark).
func WriteTable(w io.Writer, r *Report) error {
	var b strings.Builder
	writeHeader(&b, r)
	unit, batch := groupRows(r, ModeUnit), groupRows(r, ModeBatch)
	if len(unit) > 0 {
		fmt.Fprintf(&b, "\n# one call per message, one core; MB/s = 10^6 bytes/s, median ± half the range; * = what dispatch picks\n")
		writeRows(&b, r, unit, false)
		writeChoice(&b, r)
	}
	if len(batch) > 0 {
		fmt.Fprintf(&b, "\n# sector layer (sector.Codec), %s per call, wall clock; scaling = this / 1 worker\n", bytesize.Exact(int64(r.Timing.BatchBytes)))
		writeRows(&b, r, batch, true)
		writeCores(&b, r)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func writeHeader(b *strings.Builder, r *Report) {
	c := r.CPU
	model := c.Model
	var extra []string
	if c.OSModel != "" {
		extra = append(extra, c.OSModel)
	}
	if c.Family != 0 {
		extra = append(extra, fmt.Sprintf("family %d model %d", c.Family, c.ModelNumber))
	}
	if len(extra) > 0 {
		model += " (" + strings.Join(extra, ", ") + ")"
	}
	fmt.Fprintf(b, "cpu       %s, %d logical cores\n", model, c.LogicalCores)
	fmt.Fprintf(b, "features  %s\n", orNone(strings.Join(c.Features, " ")))
	if c.ClockMHz > 0 {
		fmt.Fprintf(b, "clock     %.0f MHz (%s); cycles/byte are at this clock\n", c.ClockMHz, c.ClockSource)
	}
	fmt.Fprintf(b, "go        %s %s/%s, xtsctl %s\n", r.GoVersion, r.GOOS, r.GOARCH, orNone(r.Version))
	pinned := "not bound to a CPU"
	if r.Timing.PinnedCPU >= 0 {
		pinned = fmt.Sprintf("bound to CPU %d", r.Timing.PinnedCPU)
	}
	locked := ""
	if r.Timing.MemoryLocked {
		locked = "; memory locked"
	}
	fmt.Fprintf(b, "timing    %d runs of %s after a warm-up per figure; one core: locked OS thread %s, timed by %s, runs in slices of %s taking turns%s\n",
		r.Timing.Runs, fmtSeconds(r.Timing.TimePerPoint/float64(r.Timing.Runs)), pinned, clockName(r.Timing.Clock), fmtSeconds(r.Timing.UnitSlice), locked)
	if r.Config.InPlace {
		fmt.Fprintf(b, "units     one buffer per figure, converted in place call after call (each call waits for the previous one's output, as in openssl speed)\n")
	} else {
		fmt.Fprintf(b, "units     each call on the next of up to 16 buffers (16 KiB at most), so no call waits for the previous one's output; openssl speed converts one buffer in place\n")
	}
	fmt.Fprintf(b, "kernels   %s (dispatch: %s", strings.Join(AvailableVariants(), " "), ruleText(r.Rule))
	if r.PreferYMM {
		fmt.Fprintf(b, "; this CPU prefers ymm")
	}
	fmt.Fprintf(b, ")\n")
	var d []string
	for _, x := range r.Dispatch {
		d = append(d, fmt.Sprintf("%d:%s", x.Size, x.Variant))
	}
	fmt.Fprintf(b, "dispatch  %s\n", strings.Join(d, " "))
	if r.DispatchSource != "" {
		fmt.Fprintf(b, "          from %s\n", r.DispatchSource)
	}
	if r.Blake2b != "" {
		fmt.Fprintf(b, "blake2b   compression function for single messages: %s\n", r.Blake2b)
	}
	if r.Peer != "" {
		fmt.Fprintf(b, "peer      %s (openssl speed -evp, CPU time)\n", r.Peer)
	}
	for _, rl := range r.Roofline {
		fmt.Fprintf(b, "roofline  raw AES, %d rounds/block on %s: %s MB/s ±%.1f%%\n", rl.Rounds, rl.Unit, fmtMBps(rl.MBps.Median), 100*rl.MBps.Spread())
	}
	if r.Config.Integrity {
		fmt.Fprintf(b, "integrity each message also gets a keyed BLAKE2b-%d tag (encrypt: tag after; decrypt: verify first)\n", 8*r.Config.TagSize)
	}
}

// writeCores sets the sector layer's scaling beside that of openssl speed
// -multi with as many processes (--threads with --peers): the share of
// openssl's gain from more cores that the codec's workers reach.
func writeCores(b *strings.Builder, r *Report) {
	type key struct {
		keyBits, size, threads int
		op                     string
	}
	peer := map[key]float64{}
	for _, x := range r.Results {
		if x.Mode == ModeBatch && x.Impl == ImplOpenSSL && x.Threads > 1 {
			peer[key{x.KeyBits, x.Size, x.Threads, x.Op}] = x.Scaling
		}
	}
	if len(peer) == 0 {
		return
	}
	fmt.Fprintf(b, "\n# cores: the codec's scaling with N workers over that of openssl speed -elapsed -multi N (goal: at least 0.95)\n")
	for _, x := range r.Results {
		if x.Mode != ModeBatch || x.Impl != ImplXtsctl || x.Threads < 2 || !(x.Auto || x.Dispatched) || x.Scaling == 0 {
			continue
		}
		if o := peer[key{x.KeyBits, x.Size, x.Threads, x.Op}]; o > 0 {
			fmt.Fprintf(b, "cores     %db %d B %s, %d workers: xtsctl %.2fx, openssl %.2fx: %.2f of openssl's gain\n",
				x.KeyBits, x.Size, x.Op, x.Threads, x.Scaling, o, x.Scaling/o)
		}
	}
}

// writeChoice sets the dispatched variant beside the fastest one measured
// at each length (--variant all).
func writeChoice(b *strings.Builder, r *Report) {
	head := false
	for _, x := range r.Results {
		if x.OfFastest == 0 {
			continue
		}
		if !head {
			fmt.Fprintf(b, "\n# choice: the dispatched variant over the fastest measured, median of the rounds' ratios (goal: at least 0.97)\n")
			head = true
		}
		if x.Fastest == x.Variant {
			fmt.Fprintf(b, "choice    %db %5d B %s: %s, the fastest\n", x.KeyBits, x.Size, x.Op, x.Variant)
		} else {
			fmt.Fprintf(b, "choice    %db %5d B %s: %s, %.3f of %s\n", x.KeyBits, x.Size, x.Op, x.Variant, x.OfFastest, x.Fastest)
		}
	}
}

// ruleText describes the dispatch rule: "aesni4 below 64 bytes, vaes512 from 64".
func ruleText(rule []Rule) string {
	var parts []string
	for i, x := range rule {
		switch {
		case len(rule) == 1:
			parts = append(parts, x.Variant+" for every length")
		case i == 0:
			parts = append(parts, fmt.Sprintf("%s below %d bytes", x.Variant, rule[1].MinLen))
		default:
			parts = append(parts, fmt.Sprintf("%s from %d", x.Variant, x.MinLen))
		}
	}
	return strings.Join(parts, ", ")
}

// row pairs the encrypt and decrypt results of one configuration.
type row struct {
	enc, dec *Result
}

func (w row) any() *Result {
	if w.enc != nil {
		return w.enc
	}
	return w.dec
}

func groupRows(r *Report, mode string) []row {
	type key struct {
		keyBits, size, threads int
		label, variant         string
	}
	var order []key
	rows := map[key]*row{}
	for i := range r.Results {
		res := &r.Results[i]
		if res.Mode != mode {
			continue
		}
		k := key{res.KeyBits, res.Size, res.Threads, res.label(), res.Variant}
		if rows[k] == nil {
			rows[k] = &row{}
			order = append(order, k)
		}
		if res.Op == "decrypt" {
			rows[k].dec = res
		} else {
			rows[k].enc = res
		}
	}
	out := make([]row, len(order))
	for i, k := range order {
		out[i] = *rows[k]
	}
	return out
}

func writeRows(b *strings.Builder, r *Report, rows []row, batch bool) {
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	hasCPB, hasRoof, hasRatio := false, false, false
	for _, w := range rows {
		for _, x := range []*Result{w.enc, w.dec} {
			if x != nil {
				hasCPB = hasCPB || x.CyclesPerByte > 0
				hasRoof = hasRoof || x.RooflineFraction > 0
				hasRatio = hasRatio || x.Ratio > 0
			}
		}
	}
	head := []string{"cipher", "key", "size", "variant"}
	if batch {
		head = append(head, "workers")
	}
	head = append(head, "encrypt MB/s", "decrypt MB/s")
	if hasCPB && !batch {
		head = append(head, "cycles/B enc/dec")
	}
	if hasRoof && !batch {
		head = append(head, "of roofline")
	}
	if hasRatio && !batch {
		head = append(head, "xtsctl is")
	}
	if batch {
		head = append(head, "scaling")
	}
	fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
	for _, w := range rows {
		a := w.any()
		variant := a.label()
		if a.Auto {
			variant = "auto=" + a.Variant
		}
		if a.Dispatched {
			variant += "*"
		}
		cols := []string{a.Cipher, fmt.Sprintf("%db", a.KeyBits), fmt.Sprint(a.Size), variant}
		if batch {
			cols = append(cols, fmt.Sprint(a.Threads))
		}
		cols = append(cols, fmtStats(w.enc), fmtStats(w.dec))
		if hasCPB && !batch {
			cols = append(cols, pair(w, func(x *Result) float64 { return x.CyclesPerByte }, "%.3g"))
		}
		if hasRoof && !batch {
			cols = append(cols, pairWith(w, func(x *Result) string { return fmtPercent(x.RooflineFraction) }))
		}
		if hasRatio && !batch {
			cols = append(cols, pair(w, func(x *Result) float64 { return x.Ratio }, "%.3gx"))
		}
		if batch {
			cols = append(cols, pair(w, func(x *Result) float64 { return x.Scaling }, "%.2fx"))
		}
		fmt.Fprintln(tw, strings.Join(cols, "\t")+"\t")
	}
	tw.Flush()
}

// pair formats f of the encrypt and decrypt results as "enc/dec".
func pair(w row, f func(*Result) float64, format string) string {
	return pairWith(w, func(x *Result) string {
		if f(x) == 0 {
			return ""
		}
		return fmt.Sprintf(format, f(x))
	})
}

func pairWith(w row, f func(*Result) string) string {
	one := func(x *Result) string {
		if x == nil || f(x) == "" {
			return "-"
		}
		return f(x)
	}
	s := one(w.enc) + "/" + one(w.dec)
	if s == "-/-" {
		return ""
	}
	return s
}

func fmtStats(x *Result) string {
	if x == nil {
		return "-"
	}
	if x.MBps.Runs < 2 {
		return fmtMBps(x.MBps.Median) + "      "
	}
	return fmt.Sprintf("%s ±%4.1f%%", fmtMBps(x.MBps.Median), 100*x.MBps.Spread())
}

// fmtPercent shows a fraction as a percentage to the precision that means
// something on a noisy machine.
func fmtPercent(f float64) string {
	switch p := 100 * f; {
	case p == 0:
		return ""
	case p < 1:
		return "<1%"
	case p < 10:
		return fmt.Sprintf("%.1f%%", p)
	default:
		return fmt.Sprintf("%.0f%%", p)
	}
}

func fmtMBps(v float64) string {
	if v >= 100 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

func fmtSeconds(s float64) string {
	if s >= 1 {
		return fmt.Sprintf("%.2g s", s)
	}
	if s >= 1e-3 {
		return fmt.Sprintf("%.3g ms", s*1e3)
	}
	return fmt.Sprintf("%.3g µs", s*1e6)
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func clockName(c string) string {
	if c == "thread-cpu" {
		return "its CPU time"
	}
	return "the wall clock"
}
