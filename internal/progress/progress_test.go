package progress

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestBarFirstFrame: the first frame's rate is the bytes done over the time
// since the bar was made, not over the nanoseconds since the first update
// (which showed rates like 95 GB/s).
func TestBarFirstFrame(t *testing.T) {
	var buf bytes.Buffer
	bar := newBar(&buf, "xtsctl: testing", 10<<20)
	time.Sleep(200 * time.Millisecond)
	bar.Set64(1 << 20) // 1 MiB in 0.2 s or a little more: at most 5.3 MB/s
	m := regexp.MustCompile(`\(([0-9.]+) ([kMGT]?B)/s\)`).FindStringSubmatch(buf.String())
	if m == nil {
		t.Fatalf("no rate in the first frame %q", buf.String())
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	mult := map[string]float64{"B": 1, "kB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12}[m[2]]
	if rate := v * mult; rate > 5.3e6 || rate < 0.5e6 {
		t.Fatalf("first frame shows %s %s/s for 1 MiB in 0.2 s", m[1], m[2])
	}
}

// TestJSONProgress: one line at the start, at most one a second, one at
// the end; no rate before half a second of it is measured; then the rate
// and time left of the last seconds; a resumed job counts only its own
// bytes in the rate.
func TestJSONProgress(t *testing.T) {
	var buf bytes.Buffer
	now := time.Unix(1000, 0)
	clock := func() time.Time { return now }
	p := NewJSON(&buf, "encrypting in place", PhaseData, 100<<20, 1<<30, true, clock)
	for i := 1; i <= 30; i++ {
		now = now.Add(100 * time.Millisecond)
		p.Update(100<<20 + int64(i)*(10<<20)) // 100 MiB/s
	}
	p.End(false)
	p.End(true)
	var lines []Line
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var pl Line
		if err := json.Unmarshal([]byte(l), &pl); err != nil {
			t.Fatalf("not JSON: %q", l)
		}
		lines = append(lines, pl)
	}
	// start, 1 s, 2 s, 3 s, finish
	if len(lines) != 5 {
		t.Fatalf("%d lines: %s", len(lines), buf.String())
	}
	if lines[0].Done != 100<<20 || lines[0].Rate != nil || lines[0].ETA != nil || lines[0].Op != "encrypting in place" {
		t.Fatalf("first line %+v", lines[0])
	}
	for _, l := range lines[1:] {
		if l.Rate == nil || *l.Rate < 99<<20 || *l.Rate > 101<<20 {
			t.Fatalf("rate in %+v", l)
		}
		want := float64(l.Total-l.Done) / float64(100<<20)
		if l.ETA == nil || *l.ETA < want*0.99 || *l.ETA > want*1.01 {
			t.Fatalf("time left in %+v, want %.1f", l, want)
		}
	}
	last := lines[len(lines)-1]
	if !last.Finished || last.Interrupted || !last.Resumed || last.Phase != PhaseData || last.Done != 400<<20 || last.Elapsed != 3 || last.Percent != 39.1 {
		t.Fatalf("last line %+v", last)
	}
}
