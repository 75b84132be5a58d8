package sector

import (
	"bufio"
	"bytes"
	"cmp"
	"flag"
	"fmt"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	measure       = flag.Bool("measure", false, "run TestMeasureWorkers (interleaved scaling figures for BENCHMARKS.md)")
	measureRounds = flag.Int("measure-rounds", 9, "TestMeasureWorkers: rounds")
)

// TestMeasureWorkers prints how much faster GOMAXPROCS workers run than
// one, encrypting and decrypting 1 MiB calls in place over 512- and
// 4096-byte sectors (XTS-AES-256), beside two bounds measured in the same
// rounds: as many goroutines each calling a one-worker codec on its own
// buffer (nothing shared, no hand-off), and `openssl speed -elapsed -multi
// N` against one process (if openssl is on the PATH). Every case runs once
// per round, the rounds interleave them, and each figure is the median of
// the per-round ratios with its quartiles: on a shared machine the
// neighbours move single figures by tens of percent, a ratio of two cases
// timed a moment apart much less. It asserts nothing about speed. Only
// with -measure (-measure-rounds sets the rounds, 9 by default):
//
//	go test -run TestMeasureWorkers -v ./sector -args -measure
func TestMeasureWorkers(t *testing.T) {
	if !*measure {
		t.Skip("needs -measure")
	}
	workers := runtime.GOMAXPROCS(0)
	if workers < 2 {
		t.Skip("one core")
	}
	const call = 1 << 20
	rounds := max(1, *measureRounds)
	const perCase = 100 * time.Millisecond
	openssl, _ := exec.LookPath("openssl")
	key := make([]byte, 64)
	for i := range key {
		key[i] = byte(7*i + 3)
	}
	type point struct {
		size    int
		decrypt bool
	}
	// The cases of a point: one worker, all workers, independent callers.
	type tcase struct {
		w     int
		indep bool // w goroutines, each calling its own one-worker codec on its own buffer
		codec *Codec
		buf   []byte
		mbps  []float64
		// perCall is each round's median call time in ns: calls that
		// a neighbour's process preempted fall outside the median.
		perCall []float64
	}
	type group struct {
		p            point
		cases        [3]*tcase
		ossl1, osslN []float64
		osslMsg      string
		helperShare  []float64
	}
	var groups []*group
	for _, size := range []int{512, 4096} {
		for _, dec := range []bool{false, true} {
			g := &group{p: point{size, dec}}
			for i, c := range []struct {
				w     int
				indep bool
			}{{1, false}, {workers, false}, {workers, true}} {
				codec, err := NewCodecKey(key, Params{Size: size})
				if err != nil {
					t.Fatal(err)
				}
				defer codec.Wipe()
				bufLen := call
				if c.indep {
					bufLen = c.w * call
					codec.SetWorkers(1)
				} else {
					codec.SetWorkers(c.w)
				}
				g.cases[i] = &tcase{w: c.w, indep: c.indep, codec: codec, buf: make([]byte, bufLen)}
			}
			groups = append(groups, g)
		}
	}
	timeCase := func(p point, c *tcase) (mbps, share, perCall float64) {
		sectors := uint64(call / p.size)
		loop := func(buf []byte, deadline time.Time, calls []time.Duration) ([]time.Duration, int) {
			n := 0
			for t := time.Now(); t.Before(deadline); n++ {
				if p.decrypt {
					c.codec.Decrypt(buf, buf, uint64(n)*sectors)
				} else {
					c.codec.Encrypt(buf, buf, uint64(n)*sectors)
				}
				next := time.Now()
				calls = append(calls, next.Sub(t))
				t = next
			}
			return calls, n
		}
		h0 := helperBytes()
		start := time.Now()
		n := 0
		var calls []time.Duration
		if c.indep {
			var wg sync.WaitGroup
			counts := make([]int, c.w)
			each := make([][]time.Duration, c.w)
			for i := range c.w {
				wg.Go(func() { each[i], counts[i] = loop(c.buf[i*call:(i+1)*call], start.Add(perCase), nil) })
			}
			wg.Wait()
			for i, k := range counts {
				n += k
				calls = append(calls, each[i]...)
			}
		} else {
			calls, n = loop(c.buf, start.Add(perCase), nil)
		}
		d := time.Since(start)
		slices.Sort(calls)
		perCall = float64(calls[len(calls)/2])
		if c.indep {
			perCall /= float64(c.w) // c.w calls at a time
		}
		return float64(n) * call / d.Seconds() / 1e6, float64(helperBytes()-h0) / float64(n*call), perCall
	}
	for r := range rounds + 1 {
		for _, g := range groups {
			for i, c := range g.cases {
				mbps, share, perCall := timeCase(g.p, c)
				if r == 0 {
					continue // warm-up
				}
				c.mbps = append(c.mbps, mbps)
				c.perCall = append(c.perCall, perCall)
				if i == 1 {
					g.helperShare = append(g.helperShare, share)
				}
			}
			if openssl == "" || r == 0 || g.osslMsg != "" {
				continue
			}
			one, err1 := opensslSpeed(openssl, g.p.size, g.p.decrypt, 1)
			many, errN := opensslSpeed(openssl, g.p.size, g.p.decrypt, workers)
			if err := cmp.Or(err1, errN); err != nil {
				g.osslMsg = err.Error()
				continue
			}
			g.ossl1, g.osslN = append(g.ossl1, one), append(g.osslN, many)
		}
	}
	quartiles := func(x []float64) (q1, m, q3 float64) {
		s := slices.Clone(x)
		slices.Sort(s)
		return s[len(s)/4], s[len(s)/2], s[3*len(s)/4]
	}
	ratios := func(a, b []float64) []float64 {
		r := make([]float64, min(len(a), len(b)))
		for i := range r {
			r[i] = a[i] / b[i]
		}
		return r
	}
	t.Logf("1 MiB calls in place, XTS-AES-256, %d rounds (%v per codec case, 1 s per openssl run); medians [quartiles] of per-round ratios", rounds, perCase)
	for i := 0; i+1 < len(groups); i += 2 {
		enc, dec := groups[i], groups[i+1]
		q1, m, q3 := quartiles(ratios(ratios(dec.cases[1].mbps, dec.cases[0].mbps), ratios(enc.cases[1].mbps, enc.cases[0].mbps)))
		pq1, pm, pq3 := quartiles(ratios(ratios(dec.cases[0].perCall, dec.cases[1].perCall), ratios(enc.cases[0].perCall, enc.cases[1].perCall)))
		t.Logf("%4d-byte sectors: decryption's %d/1 over encryption's, round by round: %.3f [%.3f %.3f]; by median call times %.3f [%.3f %.3f]", enc.p.size, workers, m, q1, q3, pm, pq1, pq3)
	}
	for _, g := range groups {
		op := "encrypt"
		if g.p.decrypt {
			op = "decrypt"
		}
		one, many, indep := g.cases[0], g.cases[1], g.cases[2]
		_, m1, _ := quartiles(one.mbps)
		_, mn, _ := quartiles(many.mbps)
		_, sh, _ := quartiles(g.helperShare)
		codec := ratios(many.mbps, one.mbps)
		q1, m, q3 := quartiles(codec)
		iq1, im, iq3 := quartiles(ratios(indep.mbps, one.mbps))
		cq1, cm, cq3 := quartiles(ratios(one.perCall, many.perCall))
		jq1, jm, jq3 := quartiles(ratios(one.perCall, indep.perCall))
		line := fmt.Sprintf("%4d-byte sectors, %s: 1 worker %.0f MB/s, %d workers %.0f MB/s (helpers did %.2f): %d/1 %.3f [%.3f %.3f] (by median call times %.3f [%.3f %.3f]); %d independent callers / 1 %.3f [%.3f %.3f] (%.3f [%.3f %.3f])",
			g.p.size, op, m1, workers, mn, sh, workers, m, q1, q3, cm, cq1, cq3, workers, im, iq1, iq3, jm, jq1, jq3)
		switch {
		case openssl == "":
			line += "; no openssl"
		case g.osslMsg != "":
			line += "; openssl: " + g.osslMsg
		default:
			oss := ratios(g.osslN, g.ossl1)
			oq1, om, oq3 := quartiles(oss)
			gq1, gm, gq3 := quartiles(ratios(codec, oss))
			line += fmt.Sprintf("; openssl -multi %d / 1 %.3f [%.3f %.3f]; of openssl's gain %.3f [%.3f %.3f]", workers, om, oq1, oq3, gm, gq1, gq3)
		}
		t.Log(line)
	}
}

// opensslSpeed runs `openssl speed -elapsed` for one second of XTS-AES-256
// on units of size bytes in procs processes (-multi) and returns their
// total MB/s, from the machine-readable result line (+F:n:AES-256-XTS:bytes/s).
func opensslSpeed(path string, size int, decrypt bool, procs int) (float64, error) {
	args := []string{"speed", "-elapsed", "-mr", "-seconds", "1", "-bytes", strconv.Itoa(size), "-evp", "aes-256-xts"}
	if decrypt {
		args = append(args, "-decrypt")
	}
	if procs > 1 {
		args = append(args, "-multi", strconv.Itoa(procs))
	}
	out, err := exec.Command(path, args...).Output()
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w", path, strings.Join(args, " "), err)
	}
	var bps float64
	found := false
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Split(sc.Text(), ":")
		if len(f) == 4 && f[0] == "+F" && strings.EqualFold(f[2], "aes-256-xts") {
			if bps, err = strconv.ParseFloat(f[3], 64); err == nil {
				found = true // with -multi the parent's total comes last
			}
		}
	}
	if !found {
		return 0, fmt.Errorf("%s %s: no result line", path, strings.Join(args, " "))
	}
	return bps / 1e6, nil
}
