package aesni

import (
	"encoding/binary"
	"flag"
	"fmt"
	"github.com/xtsctl/xtsctl/internal/testutil"
	"runtime"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

var measure = flag.Bool("measure", false, "run TestMeasureInterleaved (paired kernel timings for BENCHMARKS.md)")

// TestMeasureInterleaved times every kernel and the dispatched choice
// ("auto") at every size in short interleaved rounds, in thread CPU time,
// and prints the medians as MB/s with the ratio of the dispatched choice
// to the best kernel. Sequential benchmarks on a shared machine see
// different neighbours; interleaving (and rotating the order each round)
// gives every kernel and size the same ones, which is what comparisons
// within a few percent need. Only with -measure:
//
//	go test -run TestMeasureInterleaved -v ./aesni -args -measure
func TestMeasureInterleaved(t *testing.T) {
	if !*measure {
		t.Skip("needs -measure")
	}
	names := []string{"auto"}
	for _, i := range impls() {
		if i != Generic && isAvailable(i) {
			names = append(names, i.String())
		}
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	lockMemory(t)
	const rounds = 150
	throughput := []int{16, 32, 48, 64, 127, 128, 512, 1408, 1420, 4096, 16384}
	for _, m := range []struct {
		what             string
		keyLen           int
		decrypt, latency bool
		sizes            []int
	}{
		{"throughput, XTS-AES-256 encryption", 64, false, false, throughput},
		{"throughput, XTS-AES-256 decryption", 64, true, false, throughput},
		{"throughput, XTS-AES-128 encryption", 32, false, false, throughput},
		{"latency (each tweak from the previous output), XTS-AES-256 encryption", 64, false, true,
			[]int{16, 17, 32, 48, 63, 64, 80, 128, 256, 1408, 1420}},
	} {
		med := measureAll(t, names, m.keyLen, m.sizes, rounds, m.decrypt, m.latency)
		var out strings.Builder
		fmt.Fprintf(&out, "\n%s, MB/s (median of %d interleaved rounds):\n\n", m.what, rounds)
		fmt.Fprintf(&out, "| bytes | %s | auto / best |\n|---:|%s---:|\n", strings.Join(names, " | "), strings.Repeat("---:|", len(names)))
		for _, size := range m.sizes {
			best := 0.0
			for _, n := range names[1:] {
				best = max(best, med[n][size])
			}
			fmt.Fprintf(&out, "| %d |", size)
			for _, n := range names {
				if n != "auto" && med[n][size] == best {
					fmt.Fprintf(&out, " **%.0f** |", med[n][size])
				} else {
					fmt.Fprintf(&out, " %.0f |", med[n][size])
				}
			}
			fmt.Fprintf(&out, " %.3f |\n", med["auto"][size]/best)
		}
		if slices.Contains(m.sizes, 1420) {
			fmt.Fprintf(&out, "\nauto: 1420 / 1408 bytes = %.3f\n", med["auto"][1420]/med["auto"][1408])
		}
		t.Log(out.String())
	}
}

// measureAll returns the median MB/s of each kernel at each size, from
// rounds in which every (kernel, size) pair runs about 100 µs, in an order
// rotated from round to round.
func measureAll(t *testing.T, names []string, keyLen int, sizes []int, rounds int, decrypt, latency bool) map[string]map[int]float64 {
	c := new(Cipher)
	if err := c.Init(make([]byte, keyLen)); err != nil {
		t.Fatal(err)
	}
	type job struct {
		name  string
		size  int
		calls int
		buf   []byte
	}
	var tw [16]byte
	run := func(j *job) int64 {
		resetImpl()
		if j.name != "auto" {
			i, _ := parseImpl(j.name)
			if err := selectImpl(i); err != nil {
				t.Fatal(err)
			}
		}
		buf := j.buf
		start := testutil.ThreadCPUNanos(t)
		for i := 0; i < j.calls; i++ {
			if latency {
				binary.LittleEndian.PutUint64(tw[:8], binary.LittleEndian.Uint64(buf[len(buf)-8:]))
			} else {
				binary.LittleEndian.PutUint64(tw[:8], uint64(i))
			}
			if decrypt {
				c.Decrypt(buf, buf, &tw)
			} else {
				c.Encrypt(buf, buf, &tw)
			}
		}
		ns := testutil.ThreadCPUNanos(t) - start
		resetImpl()
		return ns
	}
	var jobs []*job
	for _, size := range sizes {
		for _, n := range names {
			j := &job{name: n, size: size, calls: 1, buf: make([]byte, size)}
			for run(j) < 100_000 && j.calls < 1<<20 {
				j.calls *= 2
			}
			jobs = append(jobs, j)
		}
	}
	samples := make(map[*job][]float64)
	for r := 0; r < rounds; r++ {
		for k := range jobs {
			j := jobs[(r+k)%len(jobs)]
			ns := run(j)
			samples[j] = append(samples[j], float64(j.size)*float64(j.calls)*1e3/float64(ns))
		}
	}
	med := make(map[string]map[int]float64)
	for j, s := range samples {
		slices.Sort(s)
		if med[j.name] == nil {
			med[j.name] = make(map[int]float64)
		}
		med[j.name][j.size] = s[len(s)/2]
	}
	return med
}

// lockMemory keeps the process's pages resident for the measurement. This
// VM runs DAMON with a pageout scheme: a buffer left idle for a few
// milliseconds between rounds can be paged out, and the refault then
// costs microseconds per call (medians 25 times too slow were seen).
func lockMemory(tb testing.TB) {
	if err := unix.Mlockall(unix.MCL_CURRENT | unix.MCL_FUTURE); err != nil {
		tb.Logf("mlockall: %v (pages may be reclaimed mid-measurement)", err)
	}
}
