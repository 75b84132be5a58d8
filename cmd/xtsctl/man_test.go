package main

import (
	"go/ast"
	"go/constant"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestManPages writes the manual pages and reads every one: titled by its
// command (XTSCTL-OPEN for xtsctl-open.1), with NAME, SYNOPSIS,
// DESCRIPTION, then EXIT STATUS listing every exit code (from
// exitStatuses, which must hold every exit* constant of exitcodes.go and
// match docs/CLI.md's table), FILES, and SEE ALSO naming the parent page,
// the related pages and cryptsetup(8), in the order man-pages(7) gives.
func TestManPages(t *testing.T) {
	dir := t.TempDir()
	var stderr strings.Builder
	if code := run([]string{"man", dir}, strings.NewReader(""), io.Discard, &stderr); code != 0 {
		t.Fatalf("xtsctl man: exit %d: %s", code, stderr.String())
	}
	pages, _ := filepath.Glob(filepath.Join(dir, "*.1"))
	if len(pages) < 15 {
		t.Fatalf("%d pages: %v", len(pages), pages)
	}
	for _, name := range []string{"xtsctl.1", "xtsctl-open.1", "xtsctl-encrypt.1", "xtsctl-passphrase-add.1"} {
		if !slices.Contains(pages, filepath.Join(dir, name)) {
			t.Errorf("no page %s", name)
		}
	}
	codes := exitCodesOf(t)
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		base := strings.TrimSuffix(filepath.Base(page), ".1")
		th := regexp.MustCompile(`(?m)^\.TH "([^"]*)" "1"`).FindStringSubmatch(text)
		if th == nil || strings.ReplaceAll(th[1], `\-`, "-") != strings.ToUpper(base) {
			t.Errorf("%s: title %q, want %q", base, th, strings.ToUpper(base))
		}
		var sections []string
		for _, m := range regexp.MustCompile(`(?m)^\.SH (.*)$`).FindAllStringSubmatch(text, -1) {
			sections = append(sections, strings.Trim(m[1], `"`))
		}
		at := func(s string) int { return slices.Index(sections, s) }
		want := []string{"NAME", "SYNOPSIS", "DESCRIPTION", "EXIT STATUS", "FILES", "SEE ALSO"}
		for i, s := range want {
			if at(s) < 0 || i > 0 && at(s) < at(want[i-1]) {
				t.Errorf("%s: sections %v: want %v in this order", base, sections, want)
				break
			}
		}
		exit := section(text, "EXIT STATUS")
		var listed []int
		for _, m := range regexp.MustCompile(`(?m)^\.TP\n\\fB(\d+)\\fP\n\S`).FindAllStringSubmatch(exit, -1) {
			n, _ := strconv.Atoi(m[1])
			listed = append(listed, n)
		}
		if !slices.Equal(listed, codes) {
			t.Errorf("%s: EXIT STATUS lists %v, want %v", base, listed, codes)
		}
		if files := section(text, "FILES"); !strings.Contains(files, "/run/xtsctl/NAME") || !strings.Contains(files, `xtsctl\-journal`) {
			t.Errorf("%s: FILES:\n%s", base, files)
		}
		see := section(text, "SEE ALSO")
		if !strings.Contains(see, `\fBcryptsetup\fP(8)`) || base != "xtsctl" && !strings.Contains(see, "xtsctl") {
			t.Errorf("%s: SEE ALSO:\n%s", base, see)
		}
	}
	open, _ := os.ReadFile(filepath.Join(dir, "xtsctl-open.1"))
	if see := section(string(open), "SEE ALSO"); !strings.Contains(see, `\fBxtsctl\-close\fP(1)`) && !strings.Contains(see, `\fBxtsctl-close\fP(1)`) {
		t.Errorf("xtsctl-open's SEE ALSO does not name xtsctl-close:\n%s", see)
	}
}

// section is the text of a page's section, up to the next.
func section(page, name string) string {
	_, s, _ := strings.Cut(page, "\n.SH "+name+"\n")
	if i := strings.Index(s, "\n.SH "); i >= 0 {
		s = s[:i+1]
	}
	return s
}

// exitCodesOf returns the codes exitStatuses lists, in order, checking
// that they are exactly the exit* constants of exitcodes.go, in order of
// value, and the codes of docs/CLI.md's table.
func exitCodesOf(t *testing.T) []int {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "exitcodes.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	conf := types.Config{Importer: nil, Error: func(error) {}}
	info := &types.Info{Defs: map[*ast.Ident]types.Object{}}
	conf.Check("main", fset, []*ast.File{f}, info) // the constants check without imports
	var consts []int
	for id, obj := range info.Defs {
		if c, ok := obj.(*types.Const); ok && strings.HasPrefix(id.Name, "exit") {
			v, _ := constant.Int64Val(c.Val())
			consts = append(consts, int(v))
		}
	}
	slices.Sort(consts)
	var listed []int
	for _, e := range exitStatuses {
		listed = append(listed, e.code)
		if e.meaning == "" {
			t.Errorf("exit code %d has no meaning", e.code)
		}
	}
	if !slices.Equal(listed, consts) {
		t.Fatalf("exitStatuses lists %v; exitcodes.go defines %v", listed, consts)
	}
	doc, err := os.ReadFile("../../docs/CLI.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, _ := strings.Cut(string(doc), "\n## Exit codes\n")
	table, _, _ = strings.Cut(table, "\n## ")
	var documented []int
	for _, m := range regexp.MustCompile(`(?m)^\| (\d+) \|`).FindAllStringSubmatch(table, -1) {
		n, _ := strconv.Atoi(m[1])
		documented = append(documented, n)
	}
	if !slices.Equal(documented, consts) {
		t.Errorf("docs/CLI.md's exit codes %v, exitcodes.go's %v", documented, consts)
	}
	return listed
}
