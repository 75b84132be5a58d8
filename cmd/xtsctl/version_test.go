package main

import (
	"runtime/debug"
	"testing"
)

// TestVCSVersion: a development build names the revision it was built
// from, whether the tree had changes, and the commit's date.
func TestVCSVersion(t *testing.T) {
	for _, c := range []struct {
		settings []debug.BuildSetting
		want     string
	}{
		{nil, "(devel)"},
		{[]debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.time", Value: "2026-12-01T10:00:00Z"}, {Key: "vcs.modified", Value: "false"}},
			"devel-0123456789ab (2026-12-01T10:00:00Z)"},
		{[]debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "true"}},
			"devel-0123456789ab+dirty"},
	} {
		if got := vcsVersion(c.settings); got != c.want {
			t.Errorf("%v: %q, want %q", c.settings, got, c.want)
		}
	}
}
