package volume

import (
	"errors"
	"testing"
)

// TestCheckNewKDF: the format's bounds, the work limit unlocking applies,
// and the memory floor unless the memory was chosen.
func TestCheckNewKDF(t *testing.T) {
	var ke *NewKDFError
	for _, tc := range []struct {
		name   string
		p      KDFParams
		chosen bool
		want   func(error) bool
	}{
		{"default", KDFParams{Time: 4, MemoryKiB: 1 << 20, Threads: 4}, false, func(err error) bool { return err == nil }},
		{"at the floor", KDFParams{Time: 1, MemoryKiB: MinKDFMemoryKiB, Threads: 4}, false, func(err error) bool { return err == nil }},
		{"at the work limit", KDFParams{Time: MaxKDFWork / (1 << 20), MemoryKiB: 1 << 20, Threads: 4}, false, func(err error) bool { return err == nil }},
		{"above the work limit", KDFParams{Time: MaxKDFWork/(1<<20) + 1, MemoryKiB: 1 << 20, Threads: 4}, true,
			func(err error) bool { return errors.As(err, &ke) && ke.TooCostly }},
		{"below the floor", KDFParams{Time: 3, MemoryKiB: MinKDFMemoryKiB - 1, Threads: 4}, false,
			func(err error) bool { return errors.As(err, &ke) && !ke.TooCostly }},
		{"below the floor, chosen", KDFParams{Time: 3, MemoryKiB: 256, Threads: 4}, true, func(err error) bool { return err == nil }},
		{"outside the format", KDFParams{Time: 0, MemoryKiB: 1 << 20, Threads: 4}, true,
			func(err error) bool { return err != nil && !errors.As(err, &ke) }},
		{"8 KiB per thread", KDFParams{Time: 1, MemoryKiB: 24, Threads: 4}, true,
			func(err error) bool { return err != nil && !errors.As(err, &ke) }},
	} {
		if err := CheckNewKDF(tc.p, tc.chosen); !tc.want(err) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	if !(KDFParams{MemoryKiB: MinKDFMemoryKiB - 1}).Weak() || (KDFParams{MemoryKiB: MinKDFMemoryKiB}).Weak() {
		t.Error("Weak does not follow MinKDFMemoryKiB")
	}
}

// TestFixedKDF: one thread per 8 KiB up to 4, so that every result passes
// the format's check; no memory given means the default.
func TestFixedKDF(t *testing.T) {
	for _, tc := range []struct {
		mem, threads uint32
	}{{8, 1}, {16, 2}, {31, 3}, {64, 4}, {1 << 20, 4}} {
		p := FixedKDF(3, tc.mem)
		if p.Time != 3 || p.MemoryKiB != tc.mem || uint32(p.Threads) != tc.threads || p.Check() != nil {
			t.Errorf("FixedKDF(3, %d) = %+v (check: %v)", tc.mem, p, p.Check())
		}
	}
	if p := FixedKDF(1, 0); p.MemoryKiB != DefaultKDFMemory() {
		t.Errorf("FixedKDF(1, 0) = %+v, want the default memory %d KiB", p, DefaultKDFMemory())
	}
}
