package main

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// TestCryptsetupSpellings: every cryptsetup spelling maps to a flag that
// exists, no verb has a flag of that spelling itself, and the short flags
// are cryptsetup's letters wherever the flag is (building the tree
// panics on a letter taken twice in one verb).
func TestCryptsetupSpellings(t *testing.T) {
	a := &app{ui: ui{stdout: &resultWriter{w: io.Discard}, stderr: io.Discard}, keySlot: -1, tries: defaultTries}
	root := newRootCmd(a)
	targets := map[string]bool{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(fl *pflag.Flag) {
			targets[fl.Name] = true
			if want, ok := cryptsetupShort[fl.Name]; ok && fl.Shorthand != want && !(c.Name() == "bench" && fl.Name == "key-size") {
				t.Errorf("%s --%s: short flag %q, want cryptsetup's -%s", c.CommandPath(), fl.Name, fl.Shorthand, want)
			}
		})
		for alias := range flagAliases {
			// Lookup normalizes; the flag's own name must be ours.
			if fl := c.Flags().Lookup(alias); fl != nil && fl.Name == alias {
				t.Errorf("%s has a flag --%s of its own and the alias to --%s", c.CommandPath(), alias, flagAliases[alias])
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	for alias, ours := range flagAliases {
		if !targets[ours] {
			t.Errorf("--%s maps to --%s, which no verb has", alias, ours)
		}
	}
	for name := range cryptsetupShort {
		if !targets[name] {
			t.Errorf("short flag for --%s, which no verb has", name)
		}
	}
}

// TestKDFTimeMilliseconds: --kdf-time (and --iter-time) takes a duration,
// or a plain number of milliseconds as cryptsetup's --iter-time does.
func TestKDFTimeMilliseconds(t *testing.T) {
	for in, want := range map[string]time.Duration{"2000": 2 * time.Second, "2s": 2 * time.Second, "500ms": 500 * time.Millisecond, "1": time.Millisecond} {
		var d time.Duration
		if err := (msDuration{&d}).Set(in); err != nil || d != want {
			t.Errorf("%q: %v %v, want %v", in, d, err, want)
		}
	}
	for _, in := range []string{"", "soon", "-5", "1.5"} {
		var d time.Duration
		if err := (msDuration{&d}).Set(in); err == nil || !strings.Contains(err.Error(), "number of milliseconds") {
			t.Errorf("%q: accepted (%v) or unclear error %v", in, d, err)
		}
	}
}
