package words

import "testing"

func TestPlural(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		noun string
		want string
	}{
		{1, "pass", "1 pass"}, {0, "pass", "0 passes"}, {3, "bad sector", "3 bad sectors"}, {2, "thread", "2 threads"},
	} {
		if got := Plural(tc.n, tc.noun); got != tc.want {
			t.Errorf("Plural(%d, %q) = %q, want %q", tc.n, tc.noun, got, tc.want)
		}
	}
}

func TestList(t *testing.T) {
	if got := List([]int{}); got != "none" {
		t.Errorf("List() = %q", got)
	}
	if got := List([]uint64{0, 2, 5}); got != "0, 2, 5" {
		t.Errorf("List(0, 2, 5) = %q", got)
	}
}
