package bench

import (
	"bytes"
	"context"
	"crypto/aes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"image/png"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	xcxts "golang.org/x/crypto/xts"

	"github.com/xtsctl/xtsctl/aesni"
	"github.com/xtsctl/xtsctl/internal/impl"
	"github.com/xtsctl/xtsctl/sector"
	"github.com/xtsctl/xtsctl/xts"
)

// tiny is a configuration that finishes in milliseconds; tests never look
// at the speeds it measures, only at what was measured and how it is shown.
func tiny() Config {
	return Config{Sizes: []int{16, 127, 4096}, KeyBits: []int{256}, Variant: Auto, Time: time.Millisecond, Runs: 3}
}

func run(t *testing.T, c Config) *Report {
	t.Helper()
	r, err := Run(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestSummarise(t *testing.T) {
	s := summarise([]float64{5, 1, 4, 2, 3})
	want := Stats{Median: 3, Min: 1, Max: 5, Q1: 2, Q3: 4, Runs: 5, Samples: []float64{5, 1, 4, 2, 3}}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("summarise = %+v, want %+v", s, want)
	}
	if got := s.Spread(); got != 2.0/3 {
		t.Errorf("spread = %v, want 2/3", got)
	}
	// Even counts interpolate: the median of 1,2,3,4 is 2.5, Q1 1.75.
	s = summarise([]float64{4, 3, 2, 1})
	if s.Median != 2.5 || s.Q1 != 1.75 || s.Q3 != 3.25 {
		t.Errorf("summarise(1..4) = %+v", s)
	}
	if s := summarise([]float64{7}); s.Median != 7 || s.Min != 7 || s.Max != 7 || s.Spread() != 0 {
		t.Errorf("summarise(7) = %+v", s)
	}
}

// fakeClock advances by a fixed step per operation, so measure's
// arithmetic can be checked exactly.
type fakeClock struct {
	t       time.Duration
	perOp   time.Duration
	opsDone int
}

func (c *fakeClock) now() time.Duration { return c.t }
func (*fakeClock) name() string         { return "fake" }

func TestMeasure(t *testing.T) {
	c := &fakeClock{perOp: 2 * time.Microsecond}
	tm := timer{clock: c, budget: 50 * time.Millisecond, runs: 5}
	s, err := tm.measure(context.Background(), 1000, func(n int) {
		c.t += time.Duration(n) * c.perOp
		c.opsDone += n
	})
	if err != nil {
		t.Fatal(err)
	}
	// 1000 bytes every 2 µs is 500 MB/s in every run.
	if s.Runs != 5 || math.Abs(s.Median-500) > 1e-6 || s.Min != s.Max {
		t.Errorf("stats %+v, want 5 runs of exactly 500 MB/s", s)
	}
	// The timed runs fill the budget: 5 runs of 10 ms = 5000 ops each,
	// plus the calibration and one warm-up run.
	timed := 5 * 5000
	if c.opsDone < timed+5000 || c.opsDone > timed+5000+2*5000 {
		t.Errorf("%d operations in all, want about %d timed + warm-up + calibration", c.opsDone, timed)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := tm.measure(ctx, 1, func(n int) { c.t += time.Duration(n) * c.perOp }); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled measure: %v", err)
	}
}

// recorder makes group members whose operations advance a fake clock by
// perOp each, and records every call: the member and its operation count.
type recorder struct {
	t        *testing.T
	c        *fakeClock
	calls    []string
	ops      []int
	selected string
}

func (r *recorder) member(name string, perOp time.Duration) member {
	return member{
		bytesPerOp: 100,
		setup:      func() { r.selected = name },
		op: func(n int) {
			if r.selected != name {
				r.t.Errorf("%s ran with %s selected", name, r.selected)
			}
			r.calls = append(r.calls, name)
			r.ops = append(r.ops, n)
			r.c.t += time.Duration(n) * perOp
		},
	}
}

// TestMeasureGroupInterleaves checks that group members' timed runs
// alternate, each after its setup, so load changes fall on all alike.
func TestMeasureGroupInterleaves(t *testing.T) {
	rec := &recorder{t: t, c: &fakeClock{}}
	tm := timer{clock: rec.c, budget: 30 * time.Millisecond, runs: 3}
	stats, err := tm.measureGroup(context.Background(), []member{rec.member("a", time.Microsecond), rec.member("b", 4*time.Microsecond)})
	if err != nil {
		t.Fatal(err)
	}
	// The last 2*runs calls are the timed runs.
	timed := rec.calls[len(rec.calls)-6:]
	if want := []string{"a", "b", "a", "b", "a", "b"}; !slices.Equal(timed, want) {
		t.Errorf("timed runs in order %v, want %v", timed, want)
	}
	// 100 bytes per µs is 100 MB/s; per 4 µs, 25 MB/s.
	if math.Abs(stats[0].Median-100) > 1e-6 || math.Abs(stats[1].Median-25) > 1e-6 {
		t.Errorf("medians %v and %v, want 100 and 25", stats[0].Median, stats[1].Median)
	}
}

// TestMeasureGroupSlices checks that with a slice length each run is cut
// into slices that take turns, the order rotating, and that the figures
// count every slice's operations against the time they took.
func TestMeasureGroupSlices(t *testing.T) {
	rec := &recorder{t: t, c: &fakeClock{}}
	// 3 runs of 10 ms, slices of 1 ms: 10 slices per run.
	tm := timer{clock: rec.c, budget: 30 * time.Millisecond, runs: 3, slice: time.Millisecond}
	stats, err := tm.measureGroup(context.Background(), []member{rec.member("a", time.Microsecond), rec.member("b", 4*time.Microsecond)})
	if err != nil {
		t.Fatal(err)
	}
	const timed = 3 * 10 * 2
	if len(rec.calls) < timed {
		t.Fatalf("%d calls, want at least %d timed ones", len(rec.calls), timed)
	}
	got, n := rec.calls[len(rec.calls)-timed:], rec.ops[len(rec.ops)-timed:]
	for k := range timed {
		slice := (k / 2) % 10
		want := []string{"a", "b"}[(k+slice)%2]
		if got[k] != want {
			t.Fatalf("timed call %d is %s, want %s (order %v)", k, got[k], want, got[:8])
		}
		if wantOps := map[string]int{"a": 1000, "b": 250}[want]; n[k] != wantOps {
			t.Errorf("timed call %d (%s): %d operations, want %d (a tenth of a run)", k, want, n[k], wantOps)
		}
	}
	if math.Abs(stats[0].Median-100) > 1e-6 || math.Abs(stats[1].Median-25) > 1e-6 || stats[0].Runs != 3 {
		t.Errorf("medians %v and %v over %d runs, want 100 and 25 over 3", stats[0].Median, stats[1].Median, stats[0].Runs)
	}
}

func TestCheck(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(*Config)
		err  string
	}{
		{"short", func(c *Config) { c.Sizes = []int{15} }, "XTS needs at least 16"},
		{"long", func(c *Config) { c.Sizes = []int{MaxSize + 1} }, "out of range"},
		{"no sizes", func(c *Config) { c.Sizes = nil }, "no message lengths"},
		{"key", func(c *Config) { c.KeyBits = []int{384} }, "not an XTS key size"},
		{"no key", func(c *Config) { c.KeyBits = nil }, "no key size"},
		{"variant", func(c *Config) { c.Variant = "aesni3" }, `unknown variant "aesni3"`},
		{"threads", func(c *Config) { c.Threads = -1 }, "negative"},
		{"threads, no sectors", func(c *Config) { c.Threads = 2; c.Sizes = []int{16, 127} }, "no length is a sector size"},
		{"time", func(c *Config) { c.Time = 0 }, "must be positive"},
		{"runs", func(c *Config) { c.Runs = 0 }, "at least 1"},
	} {
		cfg := tiny()
		c.edit(&cfg)
		if err := cfg.Check(); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: %v, want an error containing %q", c.name, err, c.err)
		}
	}
	if err := tiny().Check(); err != nil {
		t.Errorf("tiny config: %v", err)
	}
}

func TestUnavailableVariant(t *testing.T) {
	for _, i := range impl.List(aesni.ImplPackage) {
		if !impl.Available(aesni.ImplPackage, i) {
			_, err := Variants(i)
			if err == nil || !strings.Contains(err.Error(), "does not run on this CPU") {
				t.Errorf("Variants(%v) on a CPU without it: %v", i, err)
			}
			return
		}
	}
	t.Skip("this CPU runs every variant")
}

// TestVariantAll checks that --variant all measures every available
// variant at every length and direction, and marks exactly the one that
// dispatch picks.
func TestVariantAll(t *testing.T) {
	c := tiny()
	c.Variant = All
	r := run(t, c)
	avail := AvailableVariants()
	for _, n := range c.Sizes {
		want := aesni.Pick(n).String()
		for _, op := range []string{"encrypt", "decrypt"} {
			var seen []string
			dispatched := 0
			for _, res := range r.Results {
				if res.Size != n || res.Op != op || res.Impl != ImplXtsctl {
					continue
				}
				seen = append(seen, res.Variant)
				if res.Auto {
					t.Errorf("%d bytes: variant %s marked auto under --variant all", n, res.Variant)
				}
				if res.Dispatched {
					dispatched++
					if res.Variant != want {
						t.Errorf("%d bytes %s: %s marked dispatched, dispatch picks %s", n, op, res.Variant, want)
					}
				}
				if res.MBps.Runs != c.Runs || res.MBps.Median <= 0 {
					t.Errorf("%d bytes %s %s: stats %+v", n, op, res.Variant, res.MBps)
				}
			}
			if !slices.Equal(seen, avail) {
				t.Errorf("%d bytes %s: measured %v, want every available variant %v", n, op, seen, avail)
			}
			if dispatched != 1 {
				t.Errorf("%d bytes %s: %d results marked dispatched, want 1", n, op, dispatched)
			}
		}
	}
	// The rule agrees with Pick at every measured length.
	for _, n := range c.Sizes {
		rule := ""
		for _, x := range r.Rule {
			if n >= x.MinLen {
				rule = x.Variant
			}
		}
		if rule != aesni.Pick(n).String() {
			t.Errorf("dispatch rule %v gives %s for %d bytes, Pick gives %v", r.Rule, rule, n, aesni.Pick(n))
		}
	}
	if aesni.Pick(4096).String() != r.dispatchOf(4096) {
		t.Errorf("report dispatch for 4096 = %v, Pick = %v", r.dispatchOf(4096), aesni.Pick(4096))
	}
}

func (r *Report) dispatchOf(n int) string {
	for _, d := range r.Dispatch {
		if d.Size == n {
			return d.Variant
		}
	}
	return ""
}

// TestVariantForced checks a named variant runs forced and that Run
// leaves dispatch automatic afterwards.
func TestVariantForced(t *testing.T) {
	avail := AvailableVariants()
	c := tiny()
	c.Variant = avail[len(avail)-1]
	r := run(t, c)
	for _, res := range r.Results {
		if res.Variant != c.Variant || res.Auto {
			t.Errorf("result %+v: want forced variant %s", res, c.Variant)
		}
	}
	if aesni.Pick(4096).String() != r.Dispatch[len(r.Dispatch)-1].Variant {
		t.Errorf("after Run, Pick(4096) = %v, want the automatic %s", aesni.Pick(4096), r.Dispatch[len(r.Dispatch)-1].Variant)
	}
}

// TestJSONRoundTrip checks the report survives JSON and carries every
// field docs/BENCH.md documents, under those names.
func TestJSONRoundTrip(t *testing.T) {
	c := tiny()
	c.KeyBits = []int{256, 512}
	c.Baseline, c.Roofline = true, true
	c.Version = "test"
	r := run(t, c)
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(*r, back) {
		t.Errorf("round trip changed the report:\n%+v\n%+v", *r, back)
	}

	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if doc["schema"] != Schema {
		t.Errorf("schema = %v", doc["schema"])
	}
	for _, k := range []string{"started", "xtsctl_version", "go_version", "goos", "goarch", "cpu", "timing", "config", "dispatch", "dispatch_rule", "prefers_ymm", "roofline", "results"} {
		if _, ok := doc[k]; !ok {
			t.Errorf("report has no %q", k)
		}
	}
	cpu := doc["cpu"].(map[string]any)
	for _, k := range []string{"model", "logical_cores", "features"} {
		if _, ok := cpu[k]; !ok {
			t.Errorf("cpu has no %q", k)
		}
	}
	timing := doc["timing"].(map[string]any)
	for _, k := range []string{"time_per_point_s", "runs", "clock", "pinned_cpu", "memory_locked"} {
		if _, ok := timing[k]; !ok {
			t.Errorf("timing has no %q", k)
		}
	}
	res := doc["results"].([]any)[0].(map[string]any)
	for _, k := range []string{"cipher", "key_bits", "size", "op", "implementation", "variant", "mode", "threads", "mb_per_s", "roofline_fraction"} {
		if _, ok := res[k]; !ok {
			t.Errorf("result has no %q: %v", k, res)
		}
	}
	stats := res["mb_per_s"].(map[string]any)
	for _, k := range []string{"median", "min", "max", "q1", "q3", "runs"} {
		if _, ok := stats[k]; !ok {
			t.Errorf("mb_per_s has no %q", k)
		}
	}
	if r.CPU.ClockMHz > 0 {
		if _, ok := res["cycles_per_byte"]; !ok {
			t.Errorf("clock known but no cycles_per_byte: %v", res)
		}
	}
}

// TestBaselineAndRoofline checks what --baseline and --roofline add.
func TestBaselineAndRoofline(t *testing.T) {
	c := tiny()
	c.Baseline, c.Roofline = true, true
	r := run(t, c)
	units := aesni.RooflineUnits()
	if len(r.Roofline) != len(units) {
		t.Errorf("%d roofline figures, want one per unit %v", len(r.Roofline), units)
	}
	for _, rl := range r.Roofline {
		if rl.Rounds != 10 || rl.KeyBits != 256 || rl.MBps.Median <= 0 {
			t.Errorf("roofline %+v: want 10 rounds for a 256-bit XTS key", rl)
		}
	}
	baseline := map[int]int{}
	for _, res := range r.Results {
		if res.Mode == ModeUnit && res.RooflineFraction <= 0 {
			t.Errorf("%+v: no roofline fraction", res)
		}
		if res.Impl == ImplXCrypto {
			baseline[res.Size]++
			if res.Ratio <= 0 {
				t.Errorf("%+v: no ratio", res)
			}
		}
	}
	// x/crypto/xts has no ciphertext stealing: 127 bytes is left out, with a note.
	if baseline[16] != 2 || baseline[4096] != 2 || baseline[127] != 0 {
		t.Errorf("baseline figures per size %v, want 2 each for 16 and 4096, none for 127", baseline)
	}
	if !hasNote(r, "no x/crypto/xts figure for 127 bytes") {
		t.Errorf("notes %q lack the ciphertext-stealing note", r.Notes)
	}
}

func hasNote(r *Report, s string) bool {
	return slices.ContainsFunc(r.Notes, func(n string) bool { return strings.Contains(n, s) })
}

func TestPeersWithoutOpenSSL(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	c := tiny()
	c.Peers = true
	r := run(t, c)
	if !hasNote(r, "openssl is not installed") || r.Peer != "" {
		t.Errorf("notes %q, peer %q: want a note that openssl is not installed", r.Notes, r.Peer)
	}
	for _, res := range r.Results {
		if res.Impl == ImplOpenSSL {
			t.Errorf("openssl result without openssl: %+v", res)
		}
	}
}

// TestThreadsAndIntegrity checks the sector-layer section: 1 and N
// workers for every sector size (odd lengths stay single-core), with
// scaling against 1 worker, and integrity tags that verify.
func TestThreadsAndIntegrity(t *testing.T) {
	c := tiny()
	c.Sizes = []int{127, 512}
	c.Threads, c.Integrity, c.BatchBytes = 2, true, 64<<10
	r := run(t, c)
	got := map[[2]int]int{}
	for _, res := range r.Results {
		if !res.Integrity {
			t.Errorf("%+v: not marked integrity", res)
		}
		if res.Mode != ModeBatch {
			continue
		}
		got[[2]int{res.Size, res.Threads}]++
		if res.Scaling <= 0 {
			t.Errorf("%+v: no scaling", res)
		}
		if res.Threads == 1 && res.Scaling != 1 {
			t.Errorf("1 worker scaling %v, want 1", res.Scaling)
		}
	}
	want := map[[2]int]int{{512, 1}: 2, {512, 2}: 2}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("batch figures (size, workers) -> count %v, want %v", got, want)
	}
	if r.Timing.BatchBytes != 64<<10 || r.Config.TagSize != TagSize {
		t.Errorf("timing %+v, config %+v", r.Timing, r.Config)
	}
	if !hasNote(r, "lengths 127 are not sector sizes") {
		t.Errorf("notes %q lack the odd-length note", r.Notes)
	}
}

// TestTimedLoopsDoNotAllocate checks the loops measure allocates nothing.
func TestTimedLoopsDoNotAllocate(t *testing.T) {
	c, err := xts.NewCipher(randomBytes(64))
	if err != nil {
		t.Fatal(err)
	}
	codec, err := sector.NewCodec(c, sector.Params{Size: 512})
	if err != nil {
		t.Fatal(err)
	}
	codec.SetWorkers(1) // more workers start goroutines inside sector, not here
	for _, integrity := range []bool{false, true} {
		p := &plan{cfg: Config{Integrity: integrity}, tagKey: make([]byte, TagKeySize)}
		for _, decrypt := range []bool{false, true} {
			op, check := p.unitOp(c, unitRing(127, false), decrypt)
			if a := testing.AllocsPerRun(10, func() { op(3) }); a != 0 {
				t.Errorf("unit loop (integrity %v, decrypt %v): %v allocations", integrity, decrypt, a)
			}
			if err := check(); err != nil {
				t.Error(err)
			}
			op, check, stop := p.batchOp(codec, 64<<10, 512, 2, decrypt)
			if a := testing.AllocsPerRun(10, func() { op(1) }); a != 0 {
				t.Errorf("batch loop (integrity %v, decrypt %v): %v allocations", integrity, decrypt, a)
			}
			stop()
			if err := check(); err != nil {
				t.Error(err)
			}
		}
	}
}

// TestUnitRing checks how many buffers the single-core loops take turns on.
func TestUnitRing(t *testing.T) {
	for _, tc := range []struct {
		size    int
		inPlace bool
		want    int
	}{
		{16, false, 16}, {127, false, 16}, {1024, false, 16}, {1420, false, 11}, {4096, false, 4},
		{8192, false, 2}, {8193, false, 2}, {16384, false, 2}, {16385, false, 1}, {1 << 20, false, 1},
		{16, true, 1}, {4096, true, 1},
	} {
		bufs := unitRing(tc.size, tc.inPlace)
		if len(bufs) != tc.want {
			t.Errorf("%d bytes, in place %v: %d buffers, want %d", tc.size, tc.inPlace, len(bufs), tc.want)
		}
		for i, b := range bufs {
			if len(b) != tc.size {
				t.Fatalf("buffer %d: %d bytes", i, len(b))
			}
			if i > 0 && &b[0] == &bufs[0][0] {
				t.Fatalf("buffer %d is buffer 0", i)
			}
		}
	}
}

// TestUnitLoopsTakeTurns checks that the single-core loops convert each
// buffer of the ring in turn, call i on buffer i mod len with sector number
// i (0 when decrypting with tags), and that every buffer holds what the
// reference gives.
func TestUnitLoopsTakeTurns(t *testing.T) {
	key := randomBytes(64)
	c, err := xts.NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := xcxts.NewCipher(aes.NewCipher, key)
	if err != nil {
		t.Fatal(err)
	}
	const size, calls = 128, 5 // three buffers: the first two are converted twice
	for _, integrity := range []bool{false, true} {
		for _, decrypt := range []bool{false, true} {
			p := &plan{cfg: Config{Integrity: integrity}, tagKey: randomBytes(TagKeySize)}
			bufs := [][]byte{randomBytes(size), randomBytes(size), randomBytes(size)}
			want := make([][]byte, len(bufs))
			for j := range bufs {
				want[j] = bytes.Clone(bufs[j])
			}
			src := bytes.Clone(bufs[0]) // the ciphertext of a tagged decryption
			for i := range calls {
				w := want[i%len(bufs)]
				switch {
				case integrity && decrypt:
					ref.Decrypt(w, src, 0)
				case decrypt:
					ref.Decrypt(w, w, uint64(i))
				default:
					ref.Encrypt(w, w, uint64(i))
				}
			}
			op, check := p.unitOp(c, bufs, decrypt)
			op(calls)
			if err := check(); err != nil {
				t.Error(err)
			}
			for j := range bufs {
				if !bytes.Equal(bufs[j], want[j]) {
					t.Errorf("integrity %v, decrypt %v: buffer %d differs from the reference", integrity, decrypt, j)
				}
			}
		}
	}
}

// TestDerive checks the derived figures on a report with chosen numbers.
func TestDerive(t *testing.T) {
	st := func(v float64) Stats { return Stats{Median: v, Runs: 1} }
	r := &Report{
		CPU:      CPU{ClockMHz: 2000},
		Roofline: []Roofline{{Unit: "xmm", KeyBits: 512, MBps: st(4000)}, {Unit: "zmm", KeyBits: 512, MBps: st(16000)}},
		Results: []Result{
			{KeyBits: 512, Size: 4096, Op: "encrypt", Impl: ImplXtsctl, Variant: "aesni1", Mode: ModeUnit, MBps: st(2000)},
			{KeyBits: 512, Size: 4096, Op: "encrypt", Impl: ImplXtsctl, Variant: "vaes512", Dispatched: true, Mode: ModeUnit, MBps: st(8000)},
			{KeyBits: 512, Size: 4096, Op: "encrypt", Impl: ImplOpenSSL, Mode: ModeUnit, MBps: st(4000)},
			{KeyBits: 512, Size: 4096, Op: "encrypt", Impl: ImplXtsctl, Variant: "vaes512", Mode: ModeBatch, Threads: 1, MBps: st(7000)},
			{KeyBits: 512, Size: 4096, Op: "encrypt", Impl: ImplXtsctl, Variant: "vaes512", Mode: ModeBatch, Threads: 2, MBps: st(10500)},
		},
	}
	r.derive()
	want := []struct{ cpb, roof, ratio, scaling float64 }{
		{1, 0.125, 0, 0},  // 2000 MHz / 2000 MB/s; 2000/16000
		{0.25, 0.5, 0, 0}, // the dispatched variant
		{0.5, 0.25, 2, 0}, // openssl: xtsctl (dispatched, 8000) is 2x
		{0, 0, 0, 1},      // batch figures get scaling only
		{0, 0, 0, 1.5},
	}
	for i, w := range want {
		g := r.Results[i]
		if g.CyclesPerByte != w.cpb || g.RooflineFraction != w.roof || g.Ratio != w.ratio || g.Scaling != w.scaling {
			t.Errorf("result %d: cpb %v roof %v ratio %v scaling %v, want %+v", i, g.CyclesPerByte, g.RooflineFraction, g.Ratio, g.Scaling, w)
		}
	}
}

// Scaling is the median of the rounds' ratios where the two figures ran
// in the same rounds: a round slowed for both (another program on the
// machine) does not move it, as it moves the ratio of the medians.
func TestDeriveScalingPaired(t *testing.T) {
	one := summarise([]float64{100, 50, 100, 100, 40})
	two := summarise([]float64{190, 100, 180, 200, 90})
	r := &Report{Results: []Result{
		{KeyBits: 512, Size: 4096, Op: "decrypt", Impl: ImplXtsctl, Variant: "vaes512", Mode: ModeBatch, Threads: 1, MBps: one},
		{KeyBits: 512, Size: 4096, Op: "decrypt", Impl: ImplXtsctl, Variant: "vaes512", Mode: ModeBatch, Threads: 2, MBps: two},
	}}
	r.derive()
	// Per round: 1.9, 2.0, 1.8, 2.0, 2.25; the medians' ratio is 1.8.
	if got := r.Results[1].Scaling; got != 2.0 {
		t.Errorf("scaling %v, want 2.0 (the median of the rounds' ratios)", got)
	}
	// Figures from different rounds (unequal counts): the medians' ratio.
	if got := pairedRatio(summarise([]float64{180, 200}), one); got != 1.9 {
		t.Errorf("unpaired ratio %v, want 190/100", got)
	}
}

// The dispatched variant's share of the fastest comes from the rounds
// they shared: one slow round for both does not move it.
func TestDeriveOfFastest(t *testing.T) {
	disp := summarise([]float64{99, 40, 59.4, 89.1, 69.3})
	fast := summarise([]float64{100, 80, 60, 90, 70})
	slow := summarise([]float64{60, 60, 60, 60, 60})
	r := &Report{Results: []Result{
		{KeyBits: 512, Size: 48, Op: "encrypt", Impl: ImplXtsctl, Variant: "vaes512c", Dispatched: true, Mode: ModeUnit, MBps: disp},
		{KeyBits: 512, Size: 48, Op: "encrypt", Impl: ImplXtsctl, Variant: "vaes256", Mode: ModeUnit, MBps: fast},
		{KeyBits: 512, Size: 48, Op: "encrypt", Impl: ImplXtsctl, Variant: "aesni4", Mode: ModeUnit, MBps: slow},
		{KeyBits: 512, Size: 4096, Op: "encrypt", Impl: ImplXtsctl, Variant: "vaes512c", Dispatched: true, Mode: ModeUnit, MBps: fast},
		{KeyBits: 512, Size: 4096, Op: "encrypt", Impl: ImplXtsctl, Variant: "vaes256", Mode: ModeUnit, MBps: slow},
		{KeyBits: 512, Size: 512, Op: "encrypt", Impl: ImplXtsctl, Variant: "vaes512c", Auto: true, Dispatched: true, Mode: ModeUnit, MBps: fast},
	}}
	r.derive()
	// Per round: 0.99, 0.5, 0.99, 0.99, 0.99; the medians' ratio is 69.3/80.
	if g := r.Results[0]; math.Abs(g.OfFastest-0.99) > 1e-9 || g.Fastest != "vaes256" {
		t.Errorf("48 bytes: of fastest %v (%q), want 0.99 of vaes256", g.OfFastest, g.Fastest)
	}
	if g := r.Results[3]; g.OfFastest != 1 || g.Fastest != "vaes512c" {
		t.Errorf("4096 bytes: of fastest %v (%q), want 1 (itself)", g.OfFastest, g.Fastest)
	}
	for _, i := range []int{1, 2, 5} {
		if g := r.Results[i]; g.OfFastest != 0 || g.Fastest != "" {
			t.Errorf("result %d (not dispatched, or alone): of fastest %v %q", i, g.OfFastest, g.Fastest)
		}
	}
	out := table(t, r)
	for _, s := range []string{"choice    512b    48 B encrypt: vaes512c, 0.990 of vaes256", "choice    512b  4096 B encrypt: vaes512c, the fastest"} {
		if !strings.Contains(out, s) {
			t.Errorf("table lacks %q:\n%s", s, out)
		}
	}
}

func TestTable(t *testing.T) {
	c := tiny()
	c.KeyBits = []int{256, 512}
	c.Sizes = []int{512, 4096}
	c.Variant = All
	out := table(t, run(t, c))
	for _, s := range []string{"cpu ", "features ", "timing ", "kernels ", "(dispatch: ", "dispatch  512:", "encrypt MB/s", "decrypt MB/s"} {
		if !strings.Contains(out, s) {
			t.Errorf("table lacks %q:\n%s", s, out)
		}
	}
	// One row per key size, length and variant, each with both directions;
	// exactly one dispatched row per key size and length.
	rows, starred := countRows(out)
	if want := 2 * 2 * len(AvailableVariants()); rows != want {
		t.Errorf("%d rows, want %d:\n%s", rows, want, out)
	}
	if starred != 2*2 {
		t.Errorf("%d dispatched rows, want 4:\n%s", starred, out)
	}

	// With --threads, a second section: 1 and 2 workers per sector size.
	c = tiny()
	c.Sizes, c.Threads, c.BatchBytes = []int{4096}, 2, 64<<10
	out = table(t, run(t, c))
	if !strings.Contains(out, "# sector layer (sector.Codec), 64 KiB per call") || !strings.Contains(out, "scaling") {
		t.Errorf("no sector-layer section:\n%s", out)
	}
	if rows, starred := countRows(out); rows != 3 || starred != 3 {
		t.Errorf("%d rows (%d dispatched), want 1 single-core and 2 batch rows, all dispatched:\n%s", rows, starred, out)
	}
}

func table(t *testing.T, r *Report) string {
	t.Helper()
	var b bytes.Buffer
	if err := WriteTable(&b, r); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// countRows counts the table's result rows and those marked dispatched.
func countRows(out string) (rows, starred int) {
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) > 3 && f[0] == "aes-xts" {
			rows++
			if strings.HasSuffix(f[3], "*") {
				starred++
			}
		}
	}
	return rows, starred
}

func TestPlot(t *testing.T) {
	c := tiny()
	c.Variant, c.Roofline, c.Baseline = All, true, true
	r := run(t, c)
	for _, format := range []string{"svg", "png"} {
		var b bytes.Buffer
		if err := WritePlot(&b, r, format); err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		switch format {
		case "svg":
			var doc struct{ XMLName xml.Name }
			if err := xml.Unmarshal(b.Bytes(), &doc); err != nil || doc.XMLName.Local != "svg" {
				t.Errorf("svg: root %v, err %v", doc.XMLName, err)
			}
			for _, v := range append(AvailableVariants(), "x/crypto/xts", "roofline", "AES-XTS encryption", "AES-XTS decryption") {
				if !bytes.Contains(b.Bytes(), []byte(v)) {
					t.Errorf("svg has no legend entry or title for %s", v)
				}
			}
		case "png":
			img, err := png.Decode(&b)
			if err != nil {
				t.Fatalf("png: %v", err)
			}
			if s := img.Bounds().Size(); s.X < 100 || s.Y < 100 {
				t.Errorf("png is %v", s)
			}
		}
	}
	if got := ruleOf([]Rule{{16, "aesni4"}, {64, "vaes512"}}, "aesni4"); got != " (auto 16-63 B)" {
		t.Errorf("ruleOf aesni4 = %q", got)
	}
	if got := ruleOf([]Rule{{16, "aesni4"}, {64, "vaes512"}}, "vaes512"); got != " (auto from 64 B)" {
		t.Errorf("ruleOf vaes512 = %q", got)
	}
	if got := ruleOf([]Rule{{16, "aesni4"}}, "generic"); got != "" {
		t.Errorf("ruleOf generic = %q", got)
	}
	if _, err := PlotFormat("x.pdf"); err == nil {
		t.Error("PlotFormat accepted .pdf")
	}
	if f, err := PlotFormat("A.PNG"); err != nil || f != "png" {
		t.Errorf("PlotFormat(A.PNG) = %q, %v", f, err)
	}
}

func TestRunCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := Run(ctx, tiny()); !errors.Is(err, context.Canceled) {
		t.Errorf("Run with a cancelled context: %v", err)
	}
}

func TestProgress(t *testing.T) {
	c := tiny()
	c.Sizes = []int{16}
	var calls []int
	c.Progress = func(done, total int, what string) {
		if total != 2 || what == "" {
			t.Errorf("progress(%d, %d, %q)", done, total, what)
		}
		calls = append(calls, done)
	}
	run(t, c)
	if !slices.Equal(calls, []int{0, 1}) {
		t.Errorf("progress calls %v, want [0 1]", calls)
	}
}

// TestLogTicks: a log axis gets at least three labels, all inside the
// range, however narrow the range (one label for 11,000..26,000 MB/s was
// unreadable), and minor ticks without labels.
func TestLogTicks(t *testing.T) {
	for _, c := range []struct {
		lo, hi float64
		want   []string // labels that must appear
	}{
		{11000, 26000, []string{"15k", "20k", "25k"}},
		{16, 16384, []string{"20", "100", "1k", "10k"}},
		{550, 900, nil},
		{7e5, 3.2e6, []string{"1M", "2M"}},
	} {
		ticks := logTicks{}.Ticks(c.lo, c.hi)
		var labels []string
		for _, tk := range ticks {
			if tk.Value < c.lo*(1-1e-9) || tk.Value > c.hi*(1+1e-9) {
				t.Errorf("%g..%g: tick %g outside", c.lo, c.hi, tk.Value)
			}
			if tk.Label != "" {
				labels = append(labels, tk.Label)
			}
		}
		if len(labels) < 3 || len(labels) == len(ticks) && c.hi/c.lo > 10 {
			t.Errorf("%g..%g: labels %v of %d ticks", c.lo, c.hi, labels, len(ticks))
		}
		for _, w := range c.want {
			if !slices.Contains(labels, w) {
				t.Errorf("%g..%g: labels %v lack %s", c.lo, c.hi, labels, w)
			}
		}
	}
}
