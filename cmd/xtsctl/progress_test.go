package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"regexp"
	"slices"
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
	p := newJSONProgress(&buf, "encrypting in place", phaseData, 100<<20, 1<<30, true, clock)
	for i := 1; i <= 30; i++ {
		now = now.Add(100 * time.Millisecond)
		p.update(100<<20 + int64(i)*(10<<20)) // 100 MiB/s
	}
	p.end(false)
	p.end(true)
	var lines []progressLine
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var pl progressLine
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
	if !last.Finished || last.Interrupted || !last.Resumed || last.Phase != phaseData || last.Done != 400<<20 || last.Elapsed != 3 || last.Percent != 39.1 {
		t.Fatalf("last line %+v", last)
	}
}

// parseProgress reads --progress-json lines, failing on anything else.
func parseProgress(t *testing.T, out string) []progressLine {
	t.Helper()
	var lines []progressLine
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if !strings.HasPrefix(l, "{") {
			continue // an xtsctl: message
		}
		var pl progressLine
		dec := json.NewDecoder(strings.NewReader(l))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&pl); err != nil {
			t.Fatalf("not a progress line: %q: %v", l, err)
		}
		lines = append(lines, pl)
	}
	return lines
}

// phaseRuns groups lines by phase in order: each run of lines of one
// phase must start with a line that is neither finished nor interrupted
// and end with one that is exactly one of them.
func phaseRuns(t *testing.T, lines []progressLine) (names []string, runs [][]progressLine) {
	t.Helper()
	for i, l := range lines {
		if i == 0 || l.Phase != lines[i-1].Phase || lines[i-1].Finished || lines[i-1].Interrupted {
			names = append(names, l.Phase)
			runs = append(runs, nil)
		}
		runs[len(runs)-1] = append(runs[len(runs)-1], l)
	}
	for i, run := range runs {
		for j, l := range run {
			last := j == len(run)-1
			if l.Finished && l.Interrupted || !last && (l.Finished || l.Interrupted) {
				t.Fatalf("phase %d (%s): line %d of %d is %+v", i, names[i], j, len(run), l)
			}
		}
	}
	return names, runs
}

// TestPhasesJSON: the key derivation and the data are separate phases;
// the data's clock starts when its phase does, so seconds of key
// derivation are in neither its rate nor its time left; the key
// derivation has no rate; a phase cut short says interrupted, not
// finished.
func TestPhasesJSON(t *testing.T) {
	var buf bytes.Buffer
	now := time.Unix(1000, 0)
	a := &app{progressJSON: true}
	a.stderr = &buf
	p := newPhases(a)
	p.now = func() time.Time { return now }
	p.kdf("deriving the new passphrase's key", 1<<30)
	now = now.Add(8 * time.Second) // Argon2id
	p.data(phaseData, "formatting", 0, 1<<30, false)
	for i := 1; i <= 20; i++ {
		now = now.Add(100 * time.Millisecond)
		p.update(int64(i) * (10 << 20)) // 100 MiB/s
	}
	p.end(errors.New("interrupted"))
	p.end(nil) // no second end

	names, runs := phaseRuns(t, parseProgress(t, buf.String()))
	if !slices.Equal(names, []string{phaseKDF, phaseData}) {
		t.Fatalf("phases %v:\n%s", names, buf.String())
	}
	kdf, data := runs[0], runs[1]
	if end := kdf[len(kdf)-1]; len(kdf) != 2 || !end.Finished || end.Elapsed != 8 || end.Rate != nil || end.ETA != nil {
		t.Fatalf("key derivation lines %+v", kdf)
	}
	if data[0].Done != 0 || data[0].Elapsed != 0 || data[0].Rate != nil || data[0].Resumed {
		t.Fatalf("first data line %+v", data[0])
	}
	for _, l := range data[1:] {
		// 100 MiB/s, not 200 MiB over 10 s; 1 GiB at that rate, not 394 s.
		if l.Rate == nil || *l.Rate < 99<<20 || *l.Rate > 101<<20 {
			t.Fatalf("data rate in %+v", l)
		}
		if want := float64(l.Total-l.Done) / float64(100<<20); l.ETA == nil || *l.ETA > want*1.01 || *l.ETA < want*0.99 {
			t.Fatalf("time left in %+v, want %.1f", l, want)
		}
	}
	last := data[len(data)-1]
	if !last.Interrupted || last.Finished || last.Done != 200<<20 || last.Elapsed != 2 {
		t.Fatalf("last line of an interrupted phase %+v", last)
	}
}

// TestBarDescription: only a resumed run says "resumed"; a new in-place
// run whose first report comes after some of its own work does not.
func TestBarDescription(t *testing.T) {
	if d := barDescription("encrypting in place", 4<<20, 1<<30, false); strings.Contains(d, "resumed") {
		t.Errorf("a new run: %q", d)
	}
	if d := barDescription("encrypting in place", 0, 1<<30, true); strings.Contains(d, "resumed") {
		t.Errorf("a resumed run that had done nothing: %q", d)
	}
	if d := barDescription("encrypting in place", 512<<20, 1<<30, true); !strings.HasSuffix(d, " (resumed at 50.0%)") {
		t.Errorf("a resumed run: %q", d)
	}
}
