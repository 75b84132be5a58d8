package disk

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"
)

// A Format is one on-disk encryption format. Its package registers it
// (Register) in an init function.
type Format interface {
	// Info describes the format: its names, what it can do, its options.
	Info() FormatInfo
	// Probe reports whether the image (size bytes of r) carries the
	// format's signature. A format without one (plain, VeraCrypt) is never
	// guessed: its Probe returns false and it is used only when asked for
	// by name. Probe reads a bounded amount and never fails: an unreadable
	// image has no signature.
	Probe(r io.ReaderAt, size int64) bool
	// Open reads and checks the format's header(s) from img: nothing is
	// unlocked and no secret is needed. It fails with ErrNotFormat (kind
	// KindInput) when img does not hold the format.
	Open(img *Image, opt Options) (Header, error)
}

// FormatInfo describes a Format.
type FormatInfo struct {
	Name    string   // the --type name: "plain", "volume", "luks", "tcrypt", ...
	Aliases []string // other --type names for it ("luks1", "luks2", "veracrypt")
	Title   string   // for people: "LUKS1/LUKS2", "VeraCrypt/TrueCrypt"
	// Signature is true when Probe can recognise the format; false means
	// the format must be named with --type.
	Signature bool
	// Options are the format's own flags; the command line offers them on
	// the verbs that open images and passes their values in Options.
	Options []Option
	// KeyFile says what --key-file holds for this format, for help texts
	// ("the key", "the passphrase (the whole file)", "a keyfile; repeat
	// for several"); "" when the format takes no key file.
	KeyFile string
	// MultiKeyFile allows --key-file more than once.
	MultiKeyFile bool
	// KeyFileLimit bounds what is read of a key file (0: 8 MiB, as
	// cryptsetup reads at most). A larger file is refused, unless
	// KeyFilePrefix says that only its first KeyFileLimit bytes count
	// (VeraCrypt's keyfiles).
	KeyFileLimit  int
	KeyFilePrefix bool
	// KeyFileTooLarge, if set, is the error for a key file above the
	// limit, naming the file; else a general one.
	KeyFileTooLarge func(path string) error
	// SlotNoun is what the format calls a key slot: "key slot",
	// "keyslot", "protector".
	SlotNoun string
	// ReportNeedsSecret: the header is encrypted (VeraCrypt), so info
	// unlocks before it reports.
	ReportNeedsSecret bool
	// Refer names the format's images in messages about what their
	// header records: "volumes", "LUKS images"; "" for a format without a
	// header in clear.
	Refer string
	// Takes lists the command line's flags that apply to some formats
	// only and that this one takes: "sector-size" (read from the flag,
	// not the header), "digest", "recover", "header".
	Takes []string
	// WrongKeyHint, for a format that cannot tell a wrong key from the
	// right one (plain mode), says what to check when the plaintext holds
	// no filesystem.
	WrongKeyHint string
	// WriteName is the --type that writes the format where it differs
	// from Name ("luks2": LUKS1 is read, not written).
	WriteName string
	// CreateTakes lists the command line's flags that a new image of the
	// format takes (a Creator's): "sector-size", "key-size", "label",
	// "passphrase-file", ...
	CreateTakes []string
	// KeyNoun is what the format calls the data key, for warnings about
	// showing it: "master key", "volume key" (the default).
	KeyNoun string
	// InPlaceElsewhere, for a format xtsctl does not convert in place,
	// says what does, for a hint ("cryptsetup reencrypt converts LUKS
	// devices in place").
	InPlaceElsewhere string
	// Passphrases, for a format whose passphrases xtsctl adds, removes
	// and changes (a KeySlots header), says which, for help texts: "key
	// slots", "LUKS2 keyslots"; "" for the others.
	Passphrases string
}

// An Option is a flag of one format (--tcrypt-hidden, --veracrypt-pim N).
type Option struct {
	Name  string // the flag's name, without dashes
	Usage string // its help line
	Bool  bool   // a switch; otherwise it takes a value
	Value string // the name of the value in help ("N", "GUID")
	// Number: the value is a whole number (refused on the command line
	// otherwise, as a number flag's is).
	Number bool
}

// Options are the values of the formats' options, by flag name, as the
// user gave them (a switch that is set has the value "true").
type Options map[string]string

// Bool reports whether the switch name is set.
func (o Options) Bool(name string) bool { return o[name] == "true" }

// Has reports whether option name was given.
func (o Options) Has(name string) bool { _, ok := o[name]; return ok }

var registry struct {
	sync.RWMutex
	formats []Format
	byName  map[string]Format
}

// Register adds f to the formats xtsctl knows. It panics if a name of f
// is taken (two formats cannot answer to one --type) or if one of its
// options has the name of another format's option: the command line
// offers each option once, and a value meant for one format would
// silently reach the other.
func Register(f Format) {
	registry.Lock()
	defer registry.Unlock()
	if registry.byName == nil {
		registry.byName = map[string]Format{}
	}
	info := f.Info()
	names := append([]string{info.Name}, info.Aliases...)
	for i, n := range names {
		if n == "" || registry.byName[n] != nil || slices.Contains(names[:i], n) {
			panic(fmt.Sprintf("disk: format name %q registered twice (or empty)", n))
		}
	}
	for i, o := range info.Options {
		if o.Name == "" || slices.ContainsFunc(info.Options[:i], func(p Option) bool { return p.Name == o.Name }) {
			panic(fmt.Sprintf("disk: format %s declares option %q twice (or empty)", info.Name, o.Name))
		}
		for _, other := range registry.formats {
			if slices.ContainsFunc(other.Info().Options, func(p Option) bool { return p.Name == o.Name }) {
				panic(fmt.Sprintf("disk: option --%s of format %s is already an option of format %s", o.Name, info.Name, other.Info().Name))
			}
		}
	}
	for _, n := range names {
		registry.byName[n] = f
	}
	registry.formats = append(registry.formats, f)
	sort.SliceStable(registry.formats, func(i, j int) bool {
		return registry.formats[i].Info().Name < registry.formats[j].Info().Name
	})
}

// Lookup returns the format named name (a --type value or an alias).
func Lookup(name string) (Format, bool) {
	registry.RLock()
	defer registry.RUnlock()
	f, ok := registry.byName[name]
	return f, ok
}

// Formats returns every registered format, sorted by name.
func Formats() []Format {
	registry.RLock()
	defer registry.RUnlock()
	return slices.Clone(registry.formats)
}

// Detect returns the formats whose signature r carries, in registry
// order: usually none or one. Formats without a signature are never
// returned.
func Detect(r io.ReaderAt, size int64) []Format {
	var found []Format
	for _, f := range Formats() {
		if f.Info().Signature && f.Probe(r, size) {
			found = append(found, f)
		}
	}
	return found
}

// Describe names formats for messages: "an xtsctl volume", "LUKS1/LUKS2".
func Describe(fs []Format) string {
	var s []string
	for _, f := range fs {
		s = append(s, f.Info().Title)
	}
	return strings.Join(s, " and ")
}

// A Describer is a Format that names what it found in one image more
// precisely than its Title: "a LUKS2 image (cryptsetup)", "a LUKS image
// (cryptsetup) whose header is damaged".
type Describer interface {
	Describe(r io.ReaderAt, size int64) string
}

// DescribeImage names what format f finds in the image.
func DescribeImage(f Format, r io.ReaderAt, size int64) string {
	if d, ok := f.(Describer); ok {
		if s := d.Describe(r, size); s != "" {
			return s
		}
	}
	return f.Info().Title
}

// A Guard refuses an image before its header is used, for a reason a
// package's own state gives (an interrupted in-place run beside a plain
// image, which only that package can tell). Packages register guards in
// their init functions.
type Guard func(img *Image, f Format) error

var guards []Guard

// RegisterGuard adds g to the guards CheckGuards runs.
func RegisterGuard(g Guard) {
	registry.Lock()
	defer registry.Unlock()
	guards = append(guards, g)
}

// CheckGuards runs every guard on img read as f; the first refusal wins.
func CheckGuards(img *Image, f Format) error {
	registry.RLock()
	gs := slices.Clone(guards)
	registry.RUnlock()
	for _, g := range gs {
		if err := g(img, f); err != nil {
			return err
		}
	}
	return nil
}

// PickOptions say how Pick chooses an image's format.
type PickOptions struct {
	// Type is the format asked for (a --type name or alias); "" goes by
	// the image's header.
	Type string
	// Fallback is the format of an image whose header no format
	// recognises, when Type is "".
	Fallback string
	// Force reads the image as Type even where its header is another
	// format's.
	Force bool
}

// Pick is the format to read img as: o.Type, or what its header says
// (Detect), or o.Fallback when nothing is recognised; a detached header
// is read as the format that keeps them. A Type that names another
// format than the header's is refused, naming what the image is, unless
// o.Force: a wrong --type must never read (or write) through the wrong
// format.
func Pick(img *Image, o PickOptions) (Format, error) {
	r, size := img.HeaderReader()
	found := Detect(r, size)
	if len(found) > 1 {
		return nil, WithKind(KindInput, fmt.Errorf("%s carries the headers of %s", img.Path, Describe(found)), "say which with --type")
	}
	if o.Type == "" {
		switch {
		case len(found) == 1:
			return found[0], nil
		case img.HeaderFile != nil:
			for _, f := range Formats() {
				if f.Info().Signature && slices.Contains(f.Info().Takes, "header") {
					return f, nil
				}
			}
		}
		if o.Type = o.Fallback; o.Type == "" {
			return nil, NotFormat("%s: no format recognises its header", img.Path)
		}
	}
	want, ok := Lookup(o.Type)
	if !ok {
		var names []string
		for _, f := range Formats() {
			names = append(names, f.Info().Name)
		}
		return nil, WithKind(KindUsage, fmt.Errorf("unknown --type %q (want %s)", o.Type, strings.Join(names, ", ")))
	}
	if len(found) == 1 && found[0] != want && !o.Force {
		return nil, WithKind(KindInput, fmt.Errorf("%s is %s, not %s", img.Path, DescribeImage(found[0], r, size), want.Info().Title),
			ReadsAsItIs(found[0]),
			"if you are sure the header is stale and the image is "+want.Info().Title+", --force reads it that way")
	}
	return want, nil
}

// ReadsAsItIs is the hint for a --type that is not what the image's
// header (format f) says.
func ReadsAsItIs(f Format) string {
	what := f.Info().Refer
	if what == "" {
		what = f.Info().Name + " images"
	}
	return fmt.Sprintf("xtsctl reads %s as they are: leave --type out (or give --type %s)", what, f.Info().Name)
}
