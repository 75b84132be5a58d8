package impl

import (
	"slices"
	"testing"
)

func TestRegistry(t *testing.T) {
	forced := -2
	Register("test-pkg", []string{"slow", "fast", "absent"}, []bool{true, true, false}, func(i int) { forced = i })
	if got := List("test-pkg"); !slices.Equal(got, []string{"slow", "fast", "absent"}) {
		t.Fatalf("List = %v", got)
	}
	if List("no-such-pkg") != nil || Available("no-such-pkg", "slow") {
		t.Fatal("an unknown package lists implementations")
	}
	if !Available("test-pkg", "fast") || Available("test-pkg", "absent") || Available("test-pkg", "nope") {
		t.Fatal("Available disagrees with the registration")
	}
	if err := Select("test-pkg", "fast"); err != nil || forced != 1 {
		t.Fatalf("Select(fast): err %v, forced %d", err, forced)
	}
	for _, name := range []string{"absent", "nope"} {
		if err := Select("test-pkg", name); err == nil || forced != 1 {
			t.Fatalf("Select(%s): err %v, forced %d (want an error and no change)", name, err, forced)
		}
	}
	if err := Select("no-such-pkg", "fast"); err == nil {
		t.Fatal("Select on an unknown package succeeded")
	}
	Reset("test-pkg")
	if forced != -1 {
		t.Fatalf("after Reset, forced = %d", forced)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("registering a package twice did not panic")
		}
	}()
	Register("test-pkg", nil, nil, func(int) {})
}
