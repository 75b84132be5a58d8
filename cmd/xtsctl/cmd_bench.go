package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/xtsctl/xtsctl/bench"
	"github.com/xtsctl/xtsctl/internal/safefile"
)

func init() { registerCommand(newBenchCmd) }

// defaultBenchSizes are the sector sizes cryptsetup users choose between.
const defaultBenchSizes = "512,1024,2048,4096"

// kernelSizes are the message lengths kernel XTS work is judged by: whole
// blocks, odd lengths that exercise ciphertext stealing, and sector sizes.
const kernelSizes = "16,64,127,128,200,256,511,512,1024,1420,3173,4096,16384"

func newBenchCmd(a *app) *cobra.Command {
	var (
		sizes, variant, plotPath string
		keySize, threads, runs   int
		perPoint                 time.Duration
		integrity, baseline      bool
		peers, roofline, asJSON  bool
		inPlace                  bool
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure AES-XTS throughput per sector size and kernel variant",
		Long: `Measure this machine's AES-XTS throughput, like cryptsetup benchmark, per
message length, key size and kernel variant.

Without flags it takes a few seconds and prints encrypt and decrypt MB/s
(10^6 bytes per second) for 512..4096-byte sectors with both key sizes, the
CPU and its features, and the kernel variant dispatch picks for each size.

Each figure is the median of --runs timed runs after a warm-up, with ± half
their range. Single-core figures run one call per message, each on the next
of a ring of buffers (--in-place: one buffer, as openssl speed), on an OS
thread bound to one CPU, timed by that thread's CPU time (as openssl speed);
--threads figures go through the sector layer and are timed by the wall
clock. docs/BENCH.md describes the method and the --json schema.`,
		Example: `  xtsctl bench
  xtsctl bench --variant all --sizes ` + kernelSizes + `
  xtsctl bench --key-size 512 --baseline --peers --roofline
  xtsctl bench --threads 2 --integrity
  xtsctl bench --variant all --json > bench.json
  xtsctl bench --variant all --baseline --peers --roofline --plot bench.svg`,
		Args: argsNamed(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg := bench.Config{
				Variant: variant, Threads: threads, Time: perPoint, Runs: runs,
				Integrity: integrity, Baseline: baseline, Peers: peers, Roofline: roofline,
				InPlace: inPlace,
				Version: strings.SplitN(versionString(), " ", 2)[0],
			}
			var err error
			if cfg.Sizes, err = bench.ParseLengths(sizes); err != nil {
				return usageError(fmt.Errorf("--sizes: %w", err), "for example --sizes "+kernelSizes)
			}
			switch keySize {
			case 0:
				cfg.KeyBits = []int{256, 512}
			case 256, 512:
				cfg.KeyBits = []int{keySize}
			default:
				return usageError(fmt.Errorf("--key-size %d: want 256 (XTS-AES-128) or 512 (XTS-AES-256)", keySize))
			}
			if _, err := bench.Variants(variant); err != nil {
				return usageError(fmt.Errorf("--variant: %w", err),
					fmt.Sprintf("this CPU runs: %s, %s (dispatch), %s (each in turn)",
						strings.Join(bench.AvailableVariants(), ", "), bench.Auto, bench.All))
			}
			if threads < 0 {
				return usageError(fmt.Errorf("--threads %d: want 1 or more", threads))
			}
			if perPoint <= 0 {
				return usageError(fmt.Errorf("--time %v: want a positive duration such as 400ms", perPoint))
			}
			if runs < 1 {
				return usageError(fmt.Errorf("--runs %d: want 1 or more", runs))
			}
			plotFormat := ""
			if plotPath != "" {
				if plotFormat, err = bench.PlotFormat(plotPath); err != nil {
					return usageError(fmt.Errorf("--plot: %w", err))
				}
			}
			if err := cfg.Check(); err != nil {
				return usageError(err)
			}
			cfg.Progress = benchProgress(a)
			rep, err := bench.Run(a.ctx, cfg)
			a.clearProgressLine()
			if err != nil {
				return err
			}
			for _, n := range rep.Notes {
				a.infof("note: %s", n)
			}
			if plotPath != "" {
				if err := writePlot(rep, plotPath, plotFormat); err != nil {
					return err
				}
				a.infof("wrote plot %s", plotPath)
			}
			if asJSON {
				out, err := json.MarshalIndent(rep, "", "  ")
				if err != nil {
					return err
				}
				a.resultf("%s", out)
				return nil
			}
			var b bytes.Buffer
			if err := bench.WriteTable(&b, rep); err != nil {
				return err
			}
			a.resultf("%s", strings.TrimSuffix(b.String(), "\n"))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&sizes, "sizes", defaultBenchSizes, "message lengths in bytes, comma-separated (at least 16; k = 1024)")
	f.StringVar(&variant, "variant", bench.Auto, "kernel variant: auto (dispatch), all (each in turn), or a name such as aesni8")
	f.IntVar(&keySize, "key-size", 0, "XTS key size in bits: 256 or 512 (default both)")
	f.IntVar(&threads, "threads", 0, "also measure the sector layer with this many workers (and 1, for scaling)")
	f.DurationVar(&perPoint, "time", 200*time.Millisecond, "timed duration of each figure, split over --runs")
	f.IntVar(&runs, "runs", 5, "timed runs per figure (median and spread)")
	f.BoolVar(&integrity, "integrity", false, "add keyed BLAKE2b sector tags, as volumes do")
	f.BoolVar(&baseline, "baseline", false, "also measure golang.org/x/crypto/xts in this process")
	f.BoolVar(&peers, "peers", false, "also run openssl speed -evp aes-*-xts for the same lengths")
	f.BoolVar(&roofline, "roofline", false, "also measure raw AES rounds (the machine's limit)")
	f.BoolVar(&inPlace, "in-place", false, "convert one buffer per figure call after call, as openssl speed does (each call waits for the last)")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON (schema: docs/BENCH.md)")
	f.StringVar(&plotPath, "plot", "", "also draw throughput against length into `FILE` (.svg or .png)")
	return cmd
}

func writePlot(rep *bench.Report, path, format string) error {
	var b bytes.Buffer
	if err := bench.WritePlot(&b, rep, format); err != nil {
		return fmt.Errorf("drawing plot: %w", err)
	}
	out, err := safefile.Create(path, true, 0o644)
	if err != nil {
		return withCode(exitOutput, err)
	}
	if _, err := out.Write(b.Bytes()); err != nil {
		out.Abort()
		return withCode(exitOutput, fmt.Errorf("writing %s: %w", path, err))
	}
	return withCode(exitOutput, out.Commit())
}

// benchProgress shows which figure is being measured, on one line of a
// terminal's stderr; elsewhere it stays silent.
func benchProgress(a *app) func(done, total int, what string) {
	if a.quiet || !a.stderrIsTerminal() {
		return nil
	}
	return func(done, total int, what string) {
		a.progressLinef("measuring %d/%d: %s", done+1, total, what)
	}
}
