package main

import (
	"strings"

	"github.com/spf13/cobra"
	"github.com/xtsctl/xtsctl/blockdev"
)

// Shell completion (xtsctl completion bash|zsh|fish|powershell) is
// cobra's; these add what it cannot know: the values a flag takes, and the
// NAMEs of open images for close and status.

// flagValues are the values of flags that take one of a few words.
var flagValues = map[string][]string{
	"integrity":   {"blake2b", "none"},
	"sector-size": {"512", "1024", "2048", "4096"},
	"tag-size":    {"16", "32"},
}

// registerCompletions walks the command tree once it is built.
func registerCompletions(c *cobra.Command) {
	for name, values := range flagValues {
		if c.Flags().Lookup(name) != nil {
			_ = c.RegisterFlagCompletionFunc(name, cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoFileComp))
		}
	}
	if c.Flags().Lookup("type") != nil {
		_ = c.RegisterFlagCompletionFunc("type", cobra.FixedCompletions(typeValues(c), cobra.ShellCompDirectiveNoFileComp))
	}
	if c.Flags().Lookup("backend") != nil {
		_ = c.RegisterFlagCompletionFunc("backend", cobra.FixedCompletions(strings.Split(blockdev.BackendNames(), ", "), cobra.ShellCompDirectiveNoFileComp))
	}
	if c.Flags().Lookup("key-size") != nil && c.Name() != "bench" {
		_ = c.RegisterFlagCompletionFunc("key-size", cobra.FixedCompletions([]string{"512", "256"}, cobra.ShellCompDirectiveNoFileComp))
	}
	switch c.Name() {
	case "close", "status":
		c.ValidArgsFunction = completeOpenNames
	}
	for _, sub := range c.Commands() {
		registerCompletions(sub)
	}
}

// completeOpenNames offers the names of the images open now.
func completeOpenNames(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	list, err := blockdev.List(blockdev.Options{})
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	names := make([]string, 0, len(list))
	for _, s := range list {
		names = append(names, s.Name)
	}
	return names, cobra.ShellCompDirectiveNoFileComp
}
