// Package bench measures xtsctl's AES-XTS throughput the way xtsctl bench
// reports it: per message length, per kernel variant, one core pinned or
// many through the sector layer, beside golang.org/x/crypto/xts, openssl
// speed and the machine's raw AES limit, all in one run.
//
// Every figure is the median of several timed runs after a warm-up, with
// the spread kept (Stats). Single-core figures run on one OS thread bound to
// one CPU and are timed with that thread's CPU time, so another process
// sharing the core does not lower them (openssl speed divides by CPU time
// too); multi-core figures are timed by the wall clock. The timed loops do
// not allocate.
//
// The report has a documented JSON form (docs/BENCH.md), a text table and a
// plot; cmd/xtsctl only parses flags and prints.
package bench

import (
	"context"
	"crypto/rand"
	"fmt"
	"runtime"
	"slices"
	"time"

	"github.com/xtsctl/xtsctl/aesni"
	"github.com/xtsctl/xtsctl/blake2b"
	"github.com/xtsctl/xtsctl/internal/impl"
)

// Schema identifies the JSON form of Report; it changes when a field's
// meaning does.
const Schema = "xtsctl-bench/1"

// Auto and All are the variant names beside the kernel names.
const (
	Auto = "auto" // whatever dispatch picks for each length
	All  = "all"  // every variant this CPU runs, each forced in turn
)

// MinSize is the shortest XTS data unit.
const MinSize = aesni.BlockSize

// MaxSize bounds a message length, to keep buffers and runs reasonable.
const MaxSize = 16 << 20

// TagSize and TagKeySize are the integrity tag's shape under --integrity:
// a keyed BLAKE2b-256 tag per sector over its number and ciphertext, as
// the volume format makes them.
const (
	TagSize    = 32
	TagKeySize = 32
)

// Config says what to measure.
type Config struct {
	Sizes      []int         // message lengths in bytes, each MinSize..MaxSize
	KeyBits    []int         // XTS key sizes in bits: 256 (XTS-AES-128) and/or 512 (XTS-AES-256)
	Variant    string        // Auto, All, or a kernel name (as internal/impl lists aesni's)
	Threads    int           // >0: also measure sector batches with this many workers
	BatchBytes int           // bytes per sector-layer call; 0: 1 MiB, or 256 KiB per worker if more
	Time       time.Duration // timed duration of each measurement, split over Runs
	Runs       int           // timed runs per measurement (median and spread)
	Integrity  bool          // tag every message with BLAKE2b as volumes do
	Baseline   bool          // also measure golang.org/x/crypto/xts
	Peers      bool          // also run openssl speed
	Roofline   bool          // also measure raw AES rounds
	InPlace    bool          // one buffer per single-core figure, each call on the last one's output (see unitBuffers)
	Version    string        // xtsctl's version, recorded in the report

	// Progress, if set, is called before each measurement.
	Progress func(done, total int, what string)
}

// Report is the result of a run; its JSON form is documented in docs/BENCH.md.
type Report struct {
	Schema    string     `json:"schema"`
	Started   time.Time  `json:"started"`
	Version   string     `json:"xtsctl_version,omitempty"`
	GoVersion string     `json:"go_version"`
	GOOS      string     `json:"goos"`
	GOARCH    string     `json:"goarch"`
	CPU       CPU        `json:"cpu"`
	Timing    Timing     `json:"timing"`
	Config    Settings   `json:"config"`
	Dispatch  []Dispatch `json:"dispatch"`
	Rule      []Rule     `json:"dispatch_rule"`
	PreferYMM bool       `json:"prefers_ymm"`
	// DispatchSource says where the XTS choice came from: the per-CPU
	// table's row (internal/cpuid), a timing at start-up, or the features.
	DispatchSource string `json:"dispatch_source"`
	// Blake2b is the BLAKE2b compression function single messages use,
	// and where that choice came from.
	Blake2b  string     `json:"blake2b_compress"`
	Peer     string     `json:"peer,omitempty"` // openssl version, with --peers
	Roofline []Roofline `json:"roofline,omitempty"`
	Results  []Result   `json:"results"`
	Notes    []string   `json:"notes,omitempty"`
}

// Timing records how the figures were taken.
type Timing struct {
	TimePerPoint float64 `json:"time_per_point_s"` // timed seconds per measurement
	Runs         int     `json:"runs"`
	UnitSlice    float64 `json:"unit_slice_s"`          // single-core runs are cut into slices this long that take turns
	Clock        string  `json:"clock"`                 // single-core clock: "thread-cpu" or "wall"
	PinnedCPU    int     `json:"pinned_cpu"`            // CPU the single-core thread was bound to, -1 if none
	MemoryLocked bool    `json:"memory_locked"`         // mlockall succeeded: no page was reclaimed mid-run
	BatchBytes   int     `json:"batch_bytes,omitempty"` // bytes per call in batch mode
}

// Settings echoes the configuration in the report.
type Settings struct {
	Sizes     []int  `json:"sizes"`
	KeyBits   []int  `json:"key_bits"`
	Variant   string `json:"variant"`
	Threads   int    `json:"threads"`
	Integrity bool   `json:"integrity"`
	TagSize   int    `json:"tag_size,omitempty"`
	Baseline  bool   `json:"baseline"`
	Peers     bool   `json:"peers"`
	Roofline  bool   `json:"roofline"`
	InPlace   bool   `json:"in_place"`
}

// Dispatch is the kernel variant the dispatcher picks for one length.
type Dispatch struct {
	Size    int    `json:"size"`
	Variant string `json:"variant"`
}

// Rule is one row of the dispatcher's choice: lengths from MinLen (up to
// the next row's MinLen) use Variant.
type Rule struct {
	MinLen  int    `json:"min_len"`
	Variant string `json:"variant"`
}

// Roofline is the raw AES rate of one unit at one key size.
type Roofline struct {
	Unit    string `json:"unit"` // "xmm", "ymm", "zmm" or "go"
	KeyBits int    `json:"key_bits"`
	Rounds  int    `json:"rounds"` // rounds per block: 10 or 14
	MBps    Stats  `json:"mb_per_s"`
}

// Implementations a Result can name.
const (
	ImplXtsctl  = "xtsctl"
	ImplXCrypto = "x/crypto/xts"
	ImplOpenSSL = "openssl"
)

// Modes a Result can name.
const (
	ModeUnit  = "unit"  // one call per message, one core
	ModeBatch = "batch" // sector.Codec over batches of sectors, Threads workers
)

// Result is one measurement.
type Result struct {
	Cipher     string `json:"cipher"` // "aes-xts"
	KeyBits    int    `json:"key_bits"`
	Size       int    `json:"size"`           // message (data unit, sector) length in bytes
	Op         string `json:"op"`             // "encrypt" or "decrypt"
	Impl       string `json:"implementation"` // ImplXtsctl, ImplXCrypto or ImplOpenSSL
	Variant    string `json:"variant,omitempty"`
	Auto       bool   `json:"auto,omitempty"`       // run through dispatch rather than forced
	Dispatched bool   `json:"dispatched,omitempty"` // Variant is what dispatch picks at Size
	Mode       string `json:"mode"`
	Threads    int    `json:"threads"`
	Integrity  bool   `json:"integrity,omitempty"`
	MBps       Stats  `json:"mb_per_s"`

	CyclesPerByte    float64 `json:"cycles_per_byte,omitempty"`
	RooflineFraction float64 `json:"roofline_fraction,omitempty"`
	Ratio            float64 `json:"xtsctl_ratio,omitempty"` // peers: xtsctl's figure / this one
	Scaling          float64 `json:"scaling,omitempty"`      // batch: this / the same with 1 worker
	// OfFastest is set on the dispatched variant's row where several
	// variants ran (--variant all): the median over the rounds of its
	// figure over that of the variant with the highest median, Fastest.
	OfFastest float64 `json:"of_fastest,omitempty"`
	Fastest   string  `json:"fastest,omitempty"`
}

// label names the implementation and variant of r for tables and plots.
func (r *Result) label() string {
	switch {
	case r.Impl != ImplXtsctl:
		return r.Impl
	case r.Auto:
		return Auto
	}
	return r.Variant
}

// Variants resolves a --variant value to the names to run, checking that
// this CPU runs them.
func Variants(name string) ([]string, error) {
	switch name {
	case Auto:
		return []string{Auto}, nil
	case All:
		return AvailableVariants(), nil
	}
	if !slices.Contains(impl.List(aesni.ImplPackage), name) {
		return nil, fmt.Errorf("unknown variant %q", name)
	}
	if !impl.Available(aesni.ImplPackage, name) {
		return nil, fmt.Errorf("variant %s does not run on this CPU", name)
	}
	return []string{name}, nil
}

// AvailableVariants lists the kernel variants this CPU runs.
func AvailableVariants() []string {
	var names []string
	for _, name := range impl.List(aesni.ImplPackage) {
		if impl.Available(aesni.ImplPackage, name) {
			names = append(names, name)
		}
	}
	return names
}

// Check validates c; its errors name the offending value.
func (c Config) Check() error {
	if len(c.Sizes) == 0 {
		return fmt.Errorf("no message lengths to measure")
	}
	sectorSizes := 0
	for _, n := range c.Sizes {
		if n < MinSize || n > MaxSize {
			return fmt.Errorf("message length %d is out of range (XTS needs at least %d bytes; at most %d)", n, MinSize, MaxSize)
		}
		if isSectorSize(n) {
			sectorSizes++
		}
	}
	if c.Threads > 0 && sectorSizes == 0 {
		return fmt.Errorf("--threads measures whole sectors through the sector layer, and no length is a sector size (512, 1024, 2048 or 4096)")
	}
	if len(c.KeyBits) == 0 {
		return fmt.Errorf("no key size to measure")
	}
	for _, k := range c.KeyBits {
		if k != 256 && k != 512 {
			return fmt.Errorf("key size %d bits is not an XTS key size (256 for XTS-AES-128, 512 for XTS-AES-256)", k)
		}
	}
	if _, err := Variants(c.Variant); err != nil {
		return err
	}
	if c.Threads < 0 {
		return fmt.Errorf("thread count %d is negative", c.Threads)
	}
	if c.Time <= 0 {
		return fmt.Errorf("time per measurement must be positive")
	}
	if c.BatchBytes < 0 || c.BatchBytes%4096 != 0 {
		return fmt.Errorf("batch length %d is not a whole number of 4096-byte sectors", c.BatchBytes)
	}
	if c.Runs < 1 {
		return fmt.Errorf("runs per measurement must be at least 1")
	}
	return nil
}

func isSectorSize(n int) bool { return n >= 512 && n <= 4096 && n&(n-1) == 0 }

// Run measures what c asks for. Cancelling ctx stops it between runs with
// ctx's error. It changes aesni's process-wide selection while it runs and
// resets it to automatic dispatch before it returns.
func Run(ctx context.Context, c Config) (*Report, error) {
	if err := c.Check(); err != nil {
		return nil, err
	}
	variants, _ := Variants(c.Variant)
	sizes := slices.Clone(c.Sizes)
	slices.Sort(sizes)
	sizes = slices.Compact(sizes)
	keys := slices.Clone(c.KeyBits)
	slices.Sort(keys)
	keys = slices.Compact(keys)

	r := &Report{
		Schema:    Schema,
		Started:   time.Now().UTC().Truncate(time.Second),
		Version:   c.Version,
		GoVersion: runtime.Version(),
		GOOS:      runtime.GOOS,
		GOARCH:    runtime.GOARCH,
		CPU:       DetectCPU(),
		Timing:    Timing{TimePerPoint: c.Time.Seconds(), Runs: c.Runs, UnitSlice: unitSlice.Seconds(), PinnedCPU: -1},
		Config: Settings{Sizes: sizes, KeyBits: keys, Variant: c.Variant, Threads: c.Threads,
			Integrity: c.Integrity, Baseline: c.Baseline, Peers: c.Peers, Roofline: c.Roofline, InPlace: c.InPlace},
		Results: []Result{},
	}
	if c.Integrity {
		r.Config.TagSize = TagSize
	}
	impl.Reset(aesni.ImplPackage)
	defer impl.Reset(aesni.ImplPackage)
	for _, n := range sizes {
		r.Dispatch = append(r.Dispatch, Dispatch{Size: n, Variant: aesni.Pick(n).String()})
	}
	for _, d := range aesni.DispatchTable() {
		r.Rule = append(r.Rule, Rule{MinLen: d.MinLen, Variant: d.Impl.String()})
	}
	r.PreferYMM = aesni.PrefersYMM()
	r.DispatchSource = aesni.DispatchSource()
	r.Blake2b = blake2b.CompressDispatch()

	var peer *openssl
	if c.Peers {
		var err error
		if peer, err = findOpenSSL(ctx); err != nil {
			r.note("--peers skipped: %v", err)
		} else {
			r.Peer = peer.version
		}
	}
	if c.Threads > runtime.GOMAXPROCS(0) {
		r.note("--threads %d exceeds GOMAXPROCS %d: at most %d workers run at once", c.Threads, runtime.GOMAXPROCS(0), runtime.GOMAXPROCS(0))
	}

	locked, unlock := lockMemory()
	defer unlock()
	r.Timing.MemoryLocked = locked
	if !locked {
		r.note("memory not locked (mlockall needs CAP_IPC_LOCK or a larger RLIMIT_MEMLOCK): idle buffers may be paged out between runs")
	}
	p := newPlan(c, r, keys, sizes, variants, peer)
	if err := p.run(ctx); err != nil {
		return nil, err
	}
	r.derive()
	return r, nil
}

func (r *Report) note(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

// derive fills in the figures computed from others: cycles per byte,
// roofline fractions, peer ratios, batch scaling and the dispatched
// variant against the fastest.
func (r *Report) derive() {
	r.deriveOfFastest()
	best := map[int]float64{}
	for _, rl := range r.Roofline {
		best[rl.KeyBits] = max(best[rl.KeyBits], rl.MBps.Median)
	}
	type key struct {
		keyBits, size int
		op            string
	}
	ours := map[key]float64{}
	oneWorker := map[key]map[string]Stats{}
	for i := range r.Results {
		res := &r.Results[i]
		k := key{res.KeyBits, res.Size, res.Op}
		if res.Mode == ModeBatch {
			if res.Threads == 1 {
				if oneWorker[k] == nil {
					oneWorker[k] = map[string]Stats{}
				}
				oneWorker[k][res.label()] = res.MBps
			}
			continue
		}
		if res.Impl != ImplXtsctl {
			continue
		}
		// xtsctl's figure for ratios: the dispatched variant, else the first.
		if _, seen := ours[k]; !seen || res.Dispatched {
			ours[k] = res.MBps.Median
		}
	}
	for i := range r.Results {
		res := &r.Results[i]
		k := key{res.KeyBits, res.Size, res.Op}
		if res.MBps.Median > 0 && r.CPU.ClockMHz > 0 && res.Mode == ModeUnit {
			res.CyclesPerByte = r.CPU.ClockMHz / res.MBps.Median
		}
		if b := best[res.KeyBits]; b > 0 && res.Mode == ModeUnit {
			res.RooflineFraction = res.MBps.Median / b
		}
		if o := ours[k]; res.Impl != ImplXtsctl && res.Mode == ModeUnit && o > 0 && res.MBps.Median > 0 {
			res.Ratio = o / res.MBps.Median
		}
		if one, ok := oneWorker[k][res.label()]; res.Mode == ModeBatch && ok && one.Median > 0 {
			// Both ran in the same interleaved rounds (batchGroup,
			// peerMulti): the median of the rounds' ratios.
			res.Scaling = pairedRatio(res.MBps, one)
		}
	}
}

// deriveOfFastest sets OfFastest and Fastest on the dispatched variant's
// unit rows where forced variants ran side by side: how near dispatch
// comes to the fastest kernel at each length, from the rounds they shared
// (a ratio of two medians would carry the noise of both).
func (r *Report) deriveOfFastest() {
	type key struct {
		keyBits, size int
		op            string
	}
	fastest := map[key]int{}
	count := map[key]int{}
	for i, res := range r.Results {
		if res.Mode != ModeUnit || res.Impl != ImplXtsctl || res.Auto {
			continue
		}
		k := key{res.KeyBits, res.Size, res.Op}
		count[k]++
		if j, ok := fastest[k]; !ok || res.MBps.Median > r.Results[j].MBps.Median {
			fastest[k] = i
		}
	}
	for i := range r.Results {
		res := &r.Results[i]
		k := key{res.KeyBits, res.Size, res.Op}
		if res.Mode != ModeUnit || res.Impl != ImplXtsctl || res.Auto || !res.Dispatched || count[k] < 2 {
			continue
		}
		f := r.Results[fastest[k]]
		res.Fastest = f.Variant
		res.OfFastest = 1
		if fastest[k] != i {
			res.OfFastest = pairedRatio(res.MBps, f.MBps)
		}
	}
}

// randomBytes returns n bytes from crypto/rand, for keys and data.
func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}
