package disk

import (
	"io"
	"strings"
	"testing"
)

type namedFormat struct{ info FormatInfo }

func (f namedFormat) Info() FormatInfo                   { return f.info }
func (namedFormat) Probe(io.ReaderAt, int64) bool        { return false }
func (namedFormat) Open(*Image, Options) (Header, error) { return nil, ErrNotFormat }

// registerPanics registers f into an empty registry holding only the
// formats before, and returns the panic's message ("" if none).
func registerPanics(t *testing.T, before []Format, f Format) (msg string) {
	t.Helper()
	saved := registry.formats
	savedNames := registry.byName
	registry.formats, registry.byName = nil, nil
	defer func() {
		registry.formats, registry.byName = saved, savedNames
		if r := recover(); r != nil {
			msg = r.(string)
		}
	}()
	for _, b := range before {
		Register(b)
	}
	Register(f)
	return ""
}

// TestRegisterRefusesClashes: a format whose name, alias or option is
// another's is refused when it registers, not discovered as a flag that
// went to the wrong format.
func TestRegisterRefusesClashes(t *testing.T) {
	a := namedFormat{FormatInfo{Name: "a", Aliases: []string{"aa"}, Options: []Option{{Name: "a-pim", Value: "N"}}}}
	for _, c := range []struct {
		name string
		f    FormatInfo
		want string // "" for accepted
	}{
		{"distinct", FormatInfo{Name: "b", Aliases: []string{"bb"}, Options: []Option{{Name: "b-pim"}}}, ""},
		{"name taken", FormatInfo{Name: "a"}, `"a" registered twice`},
		{"alias is a name", FormatInfo{Name: "b", Aliases: []string{"a"}}, `"a" registered twice`},
		{"name is an alias", FormatInfo{Name: "aa"}, `"aa" registered twice`},
		{"alias twice", FormatInfo{Name: "b", Aliases: []string{"b"}}, `"b" registered twice`},
		{"empty name", FormatInfo{Name: ""}, `"" registered twice (or empty)`},
		{"option of another", FormatInfo{Name: "b", Options: []Option{{Name: "a-pim", Value: "N"}}}, "option --a-pim of format b is already an option of format a"},
		{"option twice", FormatInfo{Name: "b", Options: []Option{{Name: "x", Bool: true}, {Name: "x"}}}, `declares option "x" twice`},
	} {
		got := registerPanics(t, []Format{a}, namedFormat{c.f})
		if c.want == "" && got != "" || !strings.Contains(got, c.want) || c.want != "" && got == "" {
			t.Errorf("%s: panic %q, want %q", c.name, got, c.want)
		}
	}
	// The real registry is untouched by the test.
	if _, ok := Lookup("a"); ok {
		t.Error("the test's format leaked into the registry")
	}
}
