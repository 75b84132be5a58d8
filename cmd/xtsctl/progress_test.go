package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xtsctl/xtsctl/internal/progress"
)

// progressLine is one line of --progress-json.
type progressLine = progress.Line

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
