package main

// The formats xtsctl reads and writes: each registers itself with package
// disk; a new format is one package and one line here. Package inplace
// registers the in-place conversions of the formats it converts.
import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	_ "github.com/xtsctl/xtsctl/bitlk"
	"github.com/xtsctl/xtsctl/disk"
	_ "github.com/xtsctl/xtsctl/fvault2"
	_ "github.com/xtsctl/xtsctl/inplace"
	_ "github.com/xtsctl/xtsctl/luks/luksimage"
	_ "github.com/xtsctl/xtsctl/plain"
	_ "github.com/xtsctl/xtsctl/tcrypt"
	_ "github.com/xtsctl/xtsctl/volume"
)

// Each verb's help names the formats it takes, from the registry, so a
// format added later appears in every help that applies to it.

// formatUse says what a verb does with a format, by the verb's command
// path: for help, the formats it takes and what of each ("" if it does
// not take it).
var formatUse = map[string]func(f disk.Format) string{
	"open":       readUse,
	"decrypt":    readUse,
	"info":       readUse,
	"encrypt":    writeUse,
	"format":     writeUse,
	"passphrase": passphraseUse, "passphrase add": passphraseUse, "passphrase remove": passphraseUse, "passphrase change": passphraseUse,
	"header": headerUse, "header backup": headerUse, "header restore": headerUse,
	"verify": verifyUse,
}

// readUse: every format is read (opened, decrypted, shown).
func readUse(f disk.Format) string {
	info := f.Info()
	s := info.Title
	if len(info.Aliases) > 0 {
		s += " (also --type " + strings.Join(info.Aliases, ", ") + ")"
	}
	if !info.Signature {
		s += "; not recognised by itself: give --type " + info.Name
	}
	return s
}

// rootUse: every format, and whether xtsctl writes it.
func rootUse(f disk.Format) string {
	if _, ok := f.(disk.Creator); ok {
		return readUse(f) + "; written with --type " + cmp.Or(f.Info().WriteName, f.Info().Name)
	}
	return readUse(f)
}

// writeUse: the formats a new image is made in.
func writeUse(f disk.Format) string {
	if _, ok := f.(disk.Creator); !ok {
		return ""
	}
	return f.Info().Title
}

// passphraseUse: the formats whose passphrases xtsctl manages.
func passphraseUse(f disk.Format) string {
	if p := f.Info().Passphrases; p != "" {
		return f.Info().Title + ": its " + p
	}
	return ""
}

// headerUse: the formats whose headers are backed up and restored.
func headerUse(f disk.Format) string {
	if _, ok := f.(disk.HeaderRestorer); !ok {
		return ""
	}
	return f.Info().Title + ", with its " + f.Info().SlotNoun + "s"
}

// verifyUse: the formats with integrity tags to check.
func verifyUse(f disk.Format) string {
	if !slices.Contains(f.Info().Takes, "digest") {
		return ""
	}
	return f.Info().Title + ": headers, every sector's tag, the end-to-end digest"
}

// formatsParagraph lists the --type names of the formats use takes, with
// what of each, as a help paragraph.
func formatsParagraph(use func(disk.Format) string, write bool) string {
	var b strings.Builder
	b.WriteString("Formats (--type):\n")
	for _, f := range disk.Formats() {
		what := use(f)
		if what == "" {
			continue
		}
		name := f.Info().Name
		if write {
			name = cmp.Or(f.Info().WriteName, name)
		}
		fmt.Fprintf(&b, "  %-9s %s\n", name, what)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// addFormatHelp appends to each verb's help the formats it takes.
func addFormatHelp(c *cobra.Command) {
	path := strings.TrimPrefix(strings.TrimPrefix(c.CommandPath(), c.Root().Name()), " ")
	if use, ok := formatUse[path]; ok {
		c.Long += "\n\n" + formatsParagraph(use, path == "encrypt" || path == "format")
	}
	for _, sub := range c.Commands() {
		addFormatHelp(sub)
	}
}

// typeValues are the --type values that verb takes, for completion:
// every name and alias of the formats it takes.
func typeValues(c *cobra.Command) []string {
	path := strings.TrimPrefix(strings.TrimPrefix(c.CommandPath(), c.Root().Name()), " ")
	use, ok := formatUse[path]
	if !ok {
		use = readUse
	}
	write := path == "encrypt" || path == "format"
	var names []string
	for _, f := range disk.Formats() {
		if use(f) == "" {
			continue
		}
		info := f.Info()
		if write {
			names = append(names, cmp.Or(info.WriteName, info.Name))
			continue
		}
		names = append(names, info.Name)
		names = append(names, info.Aliases...)
	}
	return names
}
