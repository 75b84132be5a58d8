package cpuid

import (
	"testing"
	"time"
)

// TestLookup: rows match by vendor, family and model; a row without
// models covers the whole family.
func TestLookup(t *testing.T) {
	for _, c := range []struct {
		vendor        string
		family, model uint32
		want          string // first XTS kernel, "" for no row
	}{
		{"GenuineIntel", 6, 207, "vaes512c"},
		{"GenuineIntel", 6, 167, "vaes512c"},
		{"GenuineIntel", 6, 143, ""}, // Sapphire Rapids: not measured, calibrated
		{"AuthenticAMD", 25, 17, "vaes512"},
		{"AuthenticAMD", 25, 97, "vaes512"},
		{"AuthenticAMD", 26, 2, "vaes512"},
		{"AuthenticAMD", 6, 207, ""},
		{"HygonGenuine", 24, 0, ""},
	} {
		row, ok := Lookup(c.vendor, c.family, c.model)
		if ok != (c.want != "") || (ok && row.XTS[0] != c.want) {
			t.Errorf("Lookup(%s, %d, %d) = %v, %v; want XTS %q", c.vendor, c.family, c.model, row.XTS, ok, c.want)
		}
	}
}

// TestTableRows: every row names its CPUs, its kernels and where they were
// measured, and no two rows cover the same CPU.
func TestTableRows(t *testing.T) {
	xts := map[string]bool{"aesni1": true, "aesni4": true, "aesni8": true, "vaes256": true, "vaes512": true, "vaes512c": true}
	compress := map[string]bool{"scalar": true, "avx2": true, "avx512": true}
	for i, r := range Table {
		if r.CPU == "" || r.Measured == "" || r.Vendor == "" || r.Family == 0 || len(r.XTS) == 0 || len(r.Compress) == 0 {
			t.Errorf("row %d is incomplete: %+v", i, r)
		}
		for _, k := range r.XTS {
			if !xts[k] {
				t.Errorf("row %d: unknown XTS kernel %q", i, k)
			}
		}
		for _, k := range r.Compress {
			if !compress[k] {
				t.Errorf("row %d: unknown compression function %q", i, k)
			}
		}
		for j, o := range Table[:i] {
			if o.Vendor != r.Vendor || o.Family != r.Family {
				continue
			}
			if len(o.Models) == 0 || len(r.Models) == 0 {
				t.Errorf("rows %d and %d both cover family %d", j, i, r.Family)
			}
			for _, m := range r.Models {
				for _, n := range o.Models {
					if m == n {
						t.Errorf("rows %d and %d both cover model %d", j, i, m)
					}
				}
			}
		}
	}
}

// TestFastest: the quickest turn of each candidate counts, candidate 0
// stays unless another is 1% faster, and every candidate takes ten turns
// (the first a warm-up that does not count).
func TestFastest(t *testing.T) {
	for _, c := range []struct {
		name  string
		turns [][]time.Duration // per candidate, its turns in order
		want  int
	}{
		{"clear winner", [][]time.Duration{{30}, {20}, {10}}, 2},
		{"alike", [][]time.Duration{{20}, {20}}, 0},
		{"within 1%", [][]time.Duration{{1000}, {991}}, 0},
		{"just over 1%", [][]time.Duration{{1000}, {989}}, 1},
		{"slow turns do not count", [][]time.Duration{{100, 100, 100, 100, 100, 100, 100, 100, 100, 100}, {500, 500, 500, 500, 500, 500, 500, 500, 500, 50}}, 1},
		{"the warm-up does not count", [][]time.Duration{{100}, {1, 200, 200, 200, 200, 200, 200, 200, 200, 200}}, 0},
		{"one", [][]time.Duration{{5}}, 0},
	} {
		calls := make([]int, len(c.turns))
		got := fastest(len(c.turns), func(i int) time.Duration {
			ts := c.turns[i]
			d := ts[min(calls[i], len(ts)-1)]
			calls[i]++
			return d
		})
		if got != c.want {
			t.Errorf("%s: picked %d, want %d", c.name, got, c.want)
		}
		for i, n := range calls {
			if len(c.turns) > 1 && n != 10 {
				t.Errorf("%s: candidate %d took %d turns, want 10", c.name, i, n)
			}
		}
	}
	if got := Fastest(1, func(int) { t.Error("a lone candidate was timed") }); got != 0 {
		t.Errorf("Fastest(1) = %d", got)
	}
}
