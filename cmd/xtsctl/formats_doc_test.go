package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/xtsctl/xtsctl/disk"
)

// TestFormatsTable: docs/FORMATS.md's table of formats says of each
// registered format what the registry and the command line say: its
// --type names, whether it is detected, whether xtsctl writes it and
// restores its header backups, whether --in-place takes it, and the page
// that documents it exists. A format added without its row, or a row
// left behind, fails here.
func TestFormatsTable(t *testing.T) {
	doc, err := os.ReadFile("../../docs/FORMATS.md")
	if err != nil {
		t.Fatal(err)
	}
	var header []string
	rows := map[string]map[string]string{} // by --type name
	for _, line := range strings.Split(string(doc), "\n") {
		if !strings.HasPrefix(line, "| ") {
			if header != nil && len(rows) > 0 {
				break // the first table only
			}
			continue
		}
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		switch {
		case header == nil:
			header = cells
			continue
		case strings.HasPrefix(cells[0], "---"):
			continue
		}
		if len(cells) != len(header) {
			t.Fatalf("row %q has %d cells, the header %d", line, len(cells), len(header))
		}
		row := map[string]string{}
		for i, h := range header {
			row[h] = cells[i]
		}
		names := regexp.MustCompile("`([a-z0-9]+)`").FindAllStringSubmatch(row["`--type` (aliases)"], -1)
		if len(names) == 0 {
			t.Fatalf("row %q names no --type", line)
		}
		var all []string
		for _, n := range names {
			all = append(all, n[1])
		}
		row["names"] = strings.Join(all, " ")
		rows[all[0]] = row
	}
	yes := func(cell string) bool { return strings.HasPrefix(cell, "yes") }
	dir := t.TempDir()
	target := filepath.Join(dir, "img")
	if err := os.WriteFile(target, make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, f := range disk.Formats() {
		info := f.Info()
		row, ok := rows[info.Name]
		if !ok {
			t.Errorf("format %s has no row in docs/FORMATS.md", info.Name)
			continue
		}
		delete(rows, info.Name)
		if want := strings.Join(append([]string{info.Name}, info.Aliases...), " "); row["names"] != want {
			t.Errorf("%s: the table names %q, the registry %q", info.Name, row["names"], want)
		}
		if yes(row["detected"]) != info.Signature {
			t.Errorf("%s: detected %q, the registry says %v", info.Name, row["detected"], info.Signature)
		}
		_, creates := f.(disk.Creator)
		if yes(row["writes (`encrypt`, `format`)"]) != creates {
			t.Errorf("%s: writes %q, a Creator: %v", info.Name, row["writes (`encrypt`, `format`)"], creates)
		}
		_, restores := f.(disk.HeaderRestorer)
		if yes(row["`header backup` / `restore`"]) != restores {
			t.Errorf("%s: header backup/restore %q, a HeaderRestorer: %v", info.Name, row["`header backup` / `restore`"], restores)
		}
		if _, converts := disk.InPlacerOf(f); yes(row["in place"]) != converts {
			t.Errorf("%s: in place %q, an InPlacer: %v", info.Name, row["in place"], converts)
		}
		if !yes(row["in place"]) {
			xtFail(t, exitUsage, "--in-place does not apply to --type", "decrypt", "--in-place", "--type", info.Name, target)
		}
		if doc := row["documented in"]; doc != "below" {
			if _, err := os.Stat(filepath.Join("../..", doc)); err != nil {
				t.Errorf("%s: documented in %q: %v", info.Name, doc, err)
			}
		}
	}
	for name := range rows {
		t.Errorf("docs/FORMATS.md has a row for %s, which is not registered", name)
	}
}
