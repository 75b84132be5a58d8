package stream

import (
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xtsctl/xtsctl/sector"
)

var measure = flag.Bool("measure", false, "run TestMeasureCores (interleaved whole-stream scaling figures for BENCHMARKS.md)")

// TestMeasureCores prints how much faster Run is on every CPU than on one
// (GOMAXPROCS 1, one worker), moving a 256 MiB file in /dev/shm the way
// xtsctl's decrypt and encrypt do (volume.scan: read and decrypt in Load;
// volume.Create: read in Load, encrypt in Work; one ordered write per chunk
// in Commit), beside three other schemes for the decryption: workers that
// write their own chunks at their offsets in no order (pwrite in Work, no
// Commit), the bound of replacing the ordered writer; each worker writing
// the chunks it loaded, in turn; and workers that fault in the output's
// pages before the ordered write, taking the page allocation out of it.
// Alongside: the share of the wall time spent in the writes, the
// committer's gaps between two commits, and context switches per chunk.
// The cases interleave round by round; figures are medians of per-round
// ratios, with quartiles. It asserts nothing about speed. Only with
// -measure:
//
//	go test -run TestMeasureCores -v ./internal/stream -args -measure
func TestMeasureCores(t *testing.T) {
	if !*measure {
		t.Skip("needs -measure")
	}
	procs := runtime.GOMAXPROCS(0)
	if procs < 2 {
		t.Skip("one CPU")
	}
	defer runtime.GOMAXPROCS(procs)
	const size = 256 << 20
	const chunks = size / ChunkSize
	const rounds = 15
	dir, err := os.MkdirTemp("/dev/shm", "stream-measure")
	if err != nil {
		t.Skip(err)
	}
	defer os.RemoveAll(dir)
	in := filepath.Join(dir, "in")
	data := make([]byte, size)
	rand.Read(data)
	if err := os.WriteFile(in, data, 0o600); err != nil {
		t.Fatal(err)
	}
	data = nil
	key := make([]byte, 64)
	rand.Read(key)
	codec, err := sector.NewCodecKey(key, sector.Params{Size: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer codec.Wipe()
	codec.SetWorkers(1) // the stream's workers are the parallelism, as in volume
	r, err := os.Open(in)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()

	type variant struct {
		decrypt   bool
		workers   int
		unordered bool // pwrite in Work, no Commit
		owners    bool // not Run: worker k loads chunks k, k+workers, ... and writes each in turn itself
		prefault  bool // Load first faults in the output's pages of its chunk (MADV_POPULATE_WRITE)
	}
	type result struct {
		wall, commits, gaps time.Duration
		switches            int64
	}
	epoch := time.Now()
	run := func(v variant) result {
		out := filepath.Join(dir, "out")
		os.Remove(out)
		w, err := os.OpenFile(out, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		var mapped []byte
		if v.prefault {
			if err := w.Truncate(size); err != nil {
				t.Fatal(err)
			}
			if mapped, err = unix.Mmap(int(w.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != nil {
				t.Fatal(err)
			}
			defer unix.Munmap(mapped)
		}
		runtime.GOMAXPROCS(v.workers)
		var commitNs atomic.Int64
		commitStart, commitEnd := make([]time.Duration, chunks), make([]time.Duration, chunks)
		st := Stages{
			Load: func(_ int, buf []byte, off int64) (int, error) {
				if v.prefault {
					if err := unix.Madvise(mapped[off:off+int64(len(buf))], unix.MADV_POPULATE_WRITE); err != nil {
						return 0, err
					}
				}
				if _, err := r.ReadAt(buf, off); err != nil {
					return 0, err
				}
				if v.decrypt {
					codec.Decrypt(buf, buf, uint64(off/4096))
				}
				return len(buf), nil
			},
			Commit: func(_ int, buf []byte, off int64) error {
				t0 := time.Now()
				commitStart[off/ChunkSize] = t0.Sub(epoch)
				var err error
				if v.decrypt {
					_, err = w.Write(buf) // volume.scan writes to an io.Writer
				} else {
					_, err = w.WriteAt(buf, 4096+off) // volume.Create, past the header
				}
				commitEnd[off/ChunkSize] = time.Since(epoch)
				commitNs.Add(int64(time.Since(t0)))
				return err
			},
		}
		if !v.decrypt {
			st.Work = func(_ int, buf []byte, off int64) error {
				codec.Encrypt(buf, buf, uint64(off/4096))
				return nil
			}
		}
		if v.unordered {
			st.Work = func(_ int, buf []byte, off int64) error {
				t0 := time.Now()
				_, err := w.WriteAt(buf, off)
				commitNs.Add(int64(time.Since(t0)))
				return err
			}
			st.Commit = func(int, []byte, int64) error { return nil }
		}
		s0, t0 := contextSwitches(t), time.Now()
		if v.owners {
			turns := make([]chan struct{}, v.workers)
			for i := range turns {
				turns[i] = make(chan struct{}, 1)
			}
			turns[0] <- struct{}{}
			var wg sync.WaitGroup
			for k := range v.workers {
				wg.Go(func() {
					buf := make([]byte, ChunkSize)
					for i := k; i < chunks; i += v.workers {
						off := int64(i) * ChunkSize
						st.Load(0, buf, off)
						<-turns[k]
						st.Commit(0, buf, off)
						turns[(k+1)%v.workers] <- struct{}{}
					}
				})
			}
			wg.Wait()
		} else if err := Run(context.Background(), size, v.workers, st); err != nil {
			t.Fatal(err)
		}
		res := result{wall: time.Since(t0), commits: time.Duration(commitNs.Load()), switches: contextSwitches(t) - s0}
		if !v.unordered {
			for i := 1; i < chunks; i++ {
				res.gaps += commitStart[i] - commitEnd[i-1]
			}
		}
		return res
	}
	variants := []variant{{true, 1, false, false, false}, {true, procs, false, false, false}, {false, 1, false, false, false}, {false, procs, false, false, false},
		{true, procs, true, false, false}, {true, procs, false, true, false}, {true, procs, false, false, true}}
	res := map[variant][]result{}
	for round := range rounds + 1 {
		for _, v := range variants {
			x := run(v)
			if round > 0 {
				res[v] = append(res[v], x)
			}
		}
	}
	quartiles := func(x []float64) (q1, m, q3 float64) {
		s := slices.Clone(x)
		slices.Sort(s)
		return s[len(s)/4], s[len(s)/2], s[3*len(s)/4]
	}
	med := func(rs []result, f func(result) float64) float64 {
		x := make([]float64, len(rs))
		for i, r := range rs {
			x[i] = f(r)
		}
		_, m, _ := quartiles(x)
		return m
	}
	t.Logf("%d MiB in /dev/shm, chunks of %d KiB, %d rounds; medians [quartiles] of per-round ratios", size>>20, ChunkSize>>10, rounds)
	for _, v := range variants[1:] {
		if v.workers == 1 {
			continue
		}
		one, many := res[variant{v.decrypt, 1, false, false, false}], res[v]
		ratio := make([]float64, len(one))
		for i := range one {
			ratio[i] = one[i].wall.Seconds() / many[i].wall.Seconds()
		}
		q1, m, q3 := quartiles(ratio)
		what := "encrypt (read in Load, encrypt in Work, pwrite in Commit)"
		if v.decrypt {
			what = "decrypt (read and decrypt in Load, write in Commit)"
		}
		if v.unordered {
			what = "decrypt, each worker pwrites its own chunks in no order (the bound)"
		}
		if v.owners {
			what = "decrypt, worker k loads chunks k, k+N, ... and writes each itself in turn"
		}
		if v.prefault {
			what = "decrypt, each Load first faults in the output's pages (MADV_POPULATE_WRITE)"
		}
		line := fmt.Sprintf("%s: %d CPUs / 1 %.3f [%.3f %.3f]; writes %.2f of the 1-CPU wall time", what, procs, m, q1, q3,
			med(one, func(r result) float64 { return r.commits.Seconds() / r.wall.Seconds() }))
		if !v.unordered {
			line += fmt.Sprintf(", %.2f of the %d-CPU one; committer idle between commits %.3f of it", med(many, func(r result) float64 { return r.commits.Seconds() / r.wall.Seconds() }),
				procs, med(many, func(r result) float64 { return r.gaps.Seconds() / r.wall.Seconds() }))
		}
		line += fmt.Sprintf("; %.2f context switches per chunk", med(many, func(r result) float64 { return float64(r.switches) / chunks }))
		t.Log(line)
	}
}

// contextSwitches is the process's voluntary and involuntary context
// switches so far.
func contextSwitches(tb testing.TB) int64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return ru.Nvcsw + ru.Nivcsw
}
