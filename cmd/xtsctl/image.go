package main

// The one path every verb takes to an image, whatever its format (package
// disk): the flags that say which image and how to unlock it, detection
// (or --type), the header opened and checked, the unlock request checked
// before anyone is asked for a secret, then the secret asked for as the
// format says, and one unlock.

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/xtsctl/xtsctl/aesni"
	"github.com/xtsctl/xtsctl/disk"
	"github.com/xtsctl/xtsctl/internal/keyfile"
	"github.com/xtsctl/xtsctl/internal/safefile"
)

// imageFlags are the flags of the verbs that open an image.
type imageFlags struct {
	typ      string   // --type; "" detects
	header   string   // --header: a detached header
	keyFiles []string // --key-file, what the format takes it for
	passFile string   // --passphrase-file
	cmd      *cobra.Command
}

// Which flags a verb's imageFlags register.
const (
	imgType     = 1 << iota // --type
	imgHeader               // --header
	imgKeyFile              // --key-file
	imgPassFile             // --passphrase-file
	imgUnlock               // --key-slot, --allow-expensive-kdf, --keyfile-offset/-size
	imgOptions              // the formats' own options (disk.FormatInfo.Options)
	imgAll      = imgType | imgHeader | imgKeyFile | imgPassFile | imgUnlock | imgOptions
)

func (f *imageFlags) register(a *app, cmd *cobra.Command, which int) {
	f.cmd = cmd
	fs := cmd.Flags()
	if which&imgType != 0 {
		fs.StringVarP(&f.typ, "type", cryptsetupShort["type"], "", "the image's format: "+typeNames()+" (default: recognised by its header, else volume)")
	}
	if which&imgHeader != 0 {
		fs.StringVar(&f.header, "header", "", "read the header from `FILE` (a detached header, cryptsetup --header); IMAGE holds the data")
	}
	if which&imgKeyFile != 0 {
		fs.StringArrayVarP(&f.keyFiles, "key-file", "d", nil, keyFileUsage())
	}
	if which&imgPassFile != 0 {
		fs.StringVar(&f.passFile, "passphrase-file", "", "read the passphrase from `FILE` (one trailing newline is removed) instead of the terminal")
	}
	if which&imgUnlock != 0 {
		registerUnlockFlags(a, fs)
	}
	if which&imgOptions != 0 {
		registerFormatOptions(fs)
	}
}

// typeNames lists the --type values.
func typeNames() string {
	var names []string
	for _, f := range disk.Formats() {
		names = append(names, f.Info().Name)
	}
	return strings.Join(names, ", ")
}

// keyFileUsage says what --key-file is for each format.
func keyFileUsage() string {
	var s []string
	for _, f := range disk.Formats() {
		if k := f.Info().KeyFile; k != "" {
			s = append(s, f.Info().Name+": "+k)
		}
	}
	return "`FILE` holding the key: " + strings.Join(s, "; ")
}

// registerFormatOptions adds every format's own options as flags, once.
// disk.Register keeps the formats' option names apart; one that is a
// flag of the verb itself would take the verb's value silently, so it
// stops the program at start-up, where every test sees it.
func registerFormatOptions(fs *pflag.FlagSet) {
	for _, f := range disk.Formats() {
		for _, o := range f.Info().Options {
			if fl := fs.Lookup(o.Name); fl != nil {
				if fl.Usage == o.Usage {
					continue
				}
				panic(fmt.Sprintf("option --%s of format %s is already a flag of the command", o.Name, f.Info().Name))
			}
			if o.Bool {
				fs.BoolP(o.Name, cryptsetupShort[o.Name], false, o.Usage)
			} else {
				fs.VarP(&optionValue{name: cmp.Or(o.Value, "string"), number: o.Number}, o.Name, cryptsetupShort[o.Name], o.Usage)
			}
		}
	}
}

// optionValue is a format option's value, named in help as the format
// names it ("N", "NAME").
type optionValue struct {
	v, name string
	number  bool
}

func (o *optionValue) String() string { return o.v }
func (o *optionValue) Set(v string) error {
	if o.number {
		if _, err := strconv.ParseUint(v, 10, 64); err != nil {
			return err
		}
	}
	o.v = v
	return nil
}
func (o *optionValue) Type() string { return o.name }

// options are the values of the formats' options given on the command
// line, and --sector-size, which several formats read.
func (f *imageFlags) options() disk.Options {
	opts := disk.Options{}
	fs := f.cmd.Flags()
	for _, format := range disk.Formats() {
		for _, o := range format.Info().Options {
			if fl := fs.Lookup(o.Name); fl != nil && fl.Changed {
				opts[o.Name] = fl.Value.String()
			}
		}
	}
	if fl := fs.Lookup("sector-size"); fl != nil && fl.Changed {
		opts["sector-size"] = fl.Value.String()
	}
	return opts
}

// formatDependent are the flags of the verbs that apply to some formats
// only; each format says which it takes (disk.FormatInfo.Takes).
var formatDependent = []string{"sector-size", "digest", "recover", "header", "new-key-file", "uuid"}

// checkFlags refuses what the command line gives that format does not
// take: another format's options, and the flags it does not take.
func (f *imageFlags) checkFlags(format disk.Format) error {
	info := format.Info()
	own := map[string]bool{}
	for _, o := range info.Options {
		own[o.Name] = true
	}
	for _, t := range info.Takes {
		own[t] = true
	}
	var wrong []string
	for _, fo := range disk.Formats() {
		for _, o := range fo.Info().Options {
			wrong = append(wrong, o.Name)
		}
	}
	wrong = append(wrong, formatDependent...)
	sort.Strings(wrong)
	for _, name := range wrong {
		fl := f.cmd.Flags().Lookup(name)
		if own[name] || fl == nil || !fl.Changed {
			continue
		}
		if info.Refer != "" && (name == "sector-size" || !slices.Contains(formatDependent, name)) {
			return usageError(fmt.Errorf("--%s does not apply to %s: the header records it", name, info.Refer))
		}
		if takers := formatsTaking(name); len(takers) == 1 && takers[0].Info().Refer != "" && f.typ == "" {
			// No --type: the flag may say what the user meant.
			return usageError(fmt.Errorf("--%s applies to %s only", name, takers[0].Info().Refer))
		}
		return usageError(fmt.Errorf("--%s does not apply to --type %s", name, info.Name), rejectHints[info.Name+" "+name]...)
	}
	return nil
}

// checkType checks --type, and the flags against it, before anything is
// opened.
func (f *imageFlags) checkType() error {
	if f.typ == "" {
		return nil
	}
	format, ok := disk.Lookup(f.typ)
	if !ok {
		return usageError(fmt.Errorf("unknown --type %q (want %s)", f.typ, typeNames()))
	}
	return f.checkFlags(format)
}

// formatsTaking lists the formats that take the flag name.
func formatsTaking(name string) []disk.Format {
	var fs []disk.Format
	for _, f := range disk.Formats() {
		if slices.Contains(f.Info().Takes, name) {
			fs = append(fs, f)
		}
	}
	return fs
}

// opened is an image with its header read.
type opened struct {
	path   string
	img    *disk.Image
	format disk.Format
	hdr    disk.Header
	stream *safefile.Input // the input, when it is a stream
}

func (o *opened) Close() {
	o.img.Close()
	if o.stream != nil {
		o.stream.Close()
	}
}

// name is the format's name.
func (o *opened) name() string { return o.format.Info().Name }

// openImageFor opens the image at path as access says, picks its format
// and reads its header.
func openImageFor(a *app, f *imageFlags, path string, access disk.Access, defaultType string, force bool) (*opened, error) {
	if path == "-" {
		return nil, usageError(errors.New("this needs its input as a file or block device, not standard input"),
			"only --type plain encrypts and decrypts standard input (a volume's size is fixed in its header)")
	}
	if err := f.checkType(); err != nil {
		return nil, err
	}
	img, err := disk.OpenImage(path, disk.ImageOptions{Access: access, HeaderPath: f.header})
	if err != nil {
		return nil, err
	}
	o, err := openHeader(a, f, img, defaultType, force)
	if err != nil {
		img.Close()
		return nil, err
	}
	return o, nil
}

// openImageOrStream is openImageFor (to read), or for standard input ("-")
// and named pipes a stream, which only a format without a header reads.
func openImageOrStream(a *app, f *imageFlags, path string, force bool) (*opened, error) {
	if fi, err := os.Stat(path); path != "-" && (err != nil || fi.Mode()&os.ModeNamedPipe == 0) {
		return openImageFor(a, f, path, disk.Read, defaultType, force)
	}
	format, ok := disk.Lookup(f.typ)
	if !ok || format.Info().Signature {
		return nil, usageError(errors.New("this needs its input as a file or block device, not standard input"),
			"only --type plain encrypts and decrypts standard input (a volume's size is fixed in its header)")
	}
	in, err := openStreamInput(a, path)
	if err != nil {
		return nil, err
	}
	img := &disk.Image{Path: in.Name, Stream: in, Size: -1}
	if err := f.checkFlags(format); err != nil {
		in.Close()
		return nil, err
	}
	h, err := format.Open(img, f.options())
	if err != nil {
		in.Close()
		return nil, err
	}
	return &opened{path: in.Name, img: img, format: format, hdr: h, stream: in}, nil
}

// detectAt names the format whose header the image at path carries, and
// describes it ("a LUKS2 image (cryptsetup)"); nil if none (or the path
// cannot be read: the command says so later).
func detectAt(path string) (disk.Format, string) {
	f, err := os.Open(path)
	if err != nil {
		return nil, ""
	}
	defer f.Close()
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return nil, ""
	}
	found := disk.Detect(f, size)
	if len(found) != 1 {
		return nil, ""
	}
	return found[0], disk.DescribeImage(found[0], f, size)
}

// openHeader picks img's format and reads its header.
func openHeader(a *app, f *imageFlags, img *disk.Image, defaultType string, force bool) (*opened, error) {
	format, err := disk.Pick(img, disk.PickOptions{Type: f.typ, Fallback: defaultType, Force: force})
	if err != nil {
		return nil, err
	}
	if err := f.checkFlags(format); err != nil {
		return nil, err
	}
	if err := disk.CheckGuards(img, format); err != nil {
		return nil, err
	}
	h, err := format.Open(img, f.options())
	if err != nil {
		return nil, notFormat(img, err)
	}
	return &opened{path: img.Path, img: img, format: format, hdr: h}, nil
}

// output starts writing path (createOutput), refusing the image and its
// detached header as outputs: either would be replaced.
func (o *opened) output(a *app, path string, force bool) (*safefile.Output, error) {
	if fi, err := os.Stat(path); err == nil && o.img.HeaderFile != nil {
		if hi, err := o.img.HeaderFile.Stat(); err == nil && os.SameFile(fi, hi) {
			return nil, usageError(fmt.Errorf("the output is the header file (%s)", path), "write the output to a new file")
		}
	}
	in := &safefile.Input{Name: o.path, Size: o.img.Size}
	switch {
	case o.stream != nil:
		in = o.stream
	case o.img.File != nil:
		in.File = o.img.File
		in.Info, _ = o.img.File.Stat()
	default:
		in.Info, _ = o.img.HeaderFile.Stat()
	}
	return createOutput(a, path, in, force)
}

// defaultType is the format of an image whose header no format
// recognises, and of a new image without --type: our volume.
const defaultType = "volume"

// notFormat adds to a format's "not this format" what the image is, if
// another format recognises it, or what the verb could take instead.
func notFormat(img *disk.Image, err error) error {
	if !errors.Is(err, disk.ErrNotFormat) {
		return err
	}
	r, size := img.HeaderReader()
	if found := disk.Detect(r, size); len(found) == 1 {
		return withCode(exitInput, fmt.Errorf("%s is %s, not an xtsctl volume", img.Path, disk.DescribeImage(found[0], r, size)),
			disk.ReadsAsItIs(found[0]))
	}
	if currentVerb.hasType {
		return disk.WithHints(err, "if it is a cryptsetup plain-mode image, give --type plain and its --key-file; plain mode cannot tell a wrong key or wrong options, so check what comes out")
	}
	return disk.WithHints(err, "a cryptsetup plain-mode image has no header: "+currentVerb.name+" has nothing to read in it (decrypt and open take --type plain)")
}

// request is the unlock request of the command line's flags.
func (a *app) request(f *imageFlags) *disk.Request {
	req := &disk.Request{Slot: a.keySlot, AllowExpensiveKDF: a.allowExpensiveKDF, Options: f.options(), KeyFiles: len(f.keyFiles)}
	req.Progress = func(format string, args ...any) { a.infof(format, args...) }
	req.Verbose = func(format string, args ...any) { a.verbosef(format, args...) }
	return req
}

// check runs the format's checks of req before any secret is asked for,
// and checks the secrets' flags against what the format needs.
func check(f *imageFlags, o *opened, req *disk.Request) (*disk.Need, error) {
	need, err := o.hdr.Check(req)
	if err != nil {
		return nil, err
	}
	return need, checkSecretFlags(f, o.format.Info(), need)
}

// checkSecretFlags checks the secrets' flags (--key-file,
// --passphrase-file) against what a format's unlock needs.
func checkSecretFlags(f *imageFlags, info disk.FormatInfo, need *disk.Need) error {
	switch {
	case len(f.keyFiles) > 0 && need.KeyFile == disk.WantNone:
		return usageError(fmt.Errorf("--key-file does not apply to --type %s", info.Name), rejectHints[info.Name+" key-file"]...)
	case len(f.keyFiles) > 1 && !info.MultiKeyFile:
		return usageError(fmt.Errorf("--type %s takes one --key-file", info.Name))
	case len(f.keyFiles) == 0 && need.KeyFile == disk.WantRequired:
		return usageError(fmt.Errorf("--type %s needs --key-file", info.Name), "make a key with: head -c 64 /dev/urandom > KEYFILE; chmod 600 KEYFILE")
	case len(f.keyFiles) > 0 && f.passFile != "" && need.Passphrase != disk.WantNone && !info.MultiKeyFile:
		return usageError(errors.New("--key-file and --passphrase-file do not go together"),
			"--key-file takes the whole file as the passphrase, --passphrase-file drops one trailing newline")
	case need.Passphrase == disk.WantNone && f.passFile != "":
		return usageError(fmt.Errorf("--passphrase-file does not apply to --type %s", info.Name), rejectHints[info.Name+" passphrase-file"]...)
	}
	return nil
}

// readSecrets reads what need asks for: the key files (as the format
// takes them) and the passphrase (--passphrase-file or the terminal).
func readSecrets(a *app, f *imageFlags, o *opened, need *disk.Need) (*disk.Secret, error) {
	sec, err := readKeyFiles(a, f, o)
	if err != nil {
		return nil, err
	}
	if err := readPassphraseFor(a, f, o, need, sec, ""); err != nil {
		sec.Wipe()
		return nil, err
	}
	return sec, nil
}

// readKeyFiles reads the key files (--key-file), as the format takes them.
func readKeyFiles(a *app, f *imageFlags, o *opened) (*disk.Secret, error) {
	sec := &disk.Secret{}
	for i, path := range f.keyFiles {
		var win keyfile.Window
		if i == 0 {
			win = a.keyWindow // cryptsetup's --keyfile-* select the bytes of the (first) key file
		}
		k, err := readKeyFile(a, o.format.Info(), path, win)
		if err != nil {
			sec.Wipe()
			return nil, err
		}
		sec.KeyFiles = append(sec.KeyFiles, k)
		sec.KeyFileNames = append(sec.KeyFileNames, path)
	}
	return sec, nil
}

// readKeyFile reads one key file as the format (info) takes them
// (win: the bytes --keyfile-offset and --keyfile-size select).
func readKeyFile(a *app, info disk.FormatInfo, path string, win keyfile.Window) ([]byte, error) {
	limit := cmp.Or(info.KeyFileLimit, maxKeyFile)
	k, err := readSecret(a, path, keyfile.Options{Name: "key file", Limit: limit, Window: win, Prefix: info.KeyFilePrefix})
	switch {
	case errors.Is(err, keyfile.ErrTooLarge) && info.KeyFileTooLarge != nil:
		return nil, info.KeyFileTooLarge(path)
	case errors.Is(err, keyfile.ErrTooLarge):
		return nil, withCode(exitKey, fmt.Errorf("key file %s is larger than %s, the most --type %s reads from a key file", path, sizeWords(limit), info.Name))
	case err == nil && len(k) == 0:
		return nil, withCode(exitKey, fmt.Errorf("key file %s is empty", path))
	}
	return k, err
}

// asksTerminal reports whether the passphrase need asks for comes from
// the terminal: only then is a wrong one asked for again (--tries).
func asksTerminal(f *imageFlags, o *opened, need *disk.Need) bool {
	return wantsPassphrase(f, o, need) != disk.WantNone && f.passFile == ""
}

// wantsPassphrase is need's passphrase, given the key files: a format
// whose key file is its secret (LUKS's whole-file passphrase) asks for
// nothing more.
func wantsPassphrase(f *imageFlags, o *opened, need *disk.Need) disk.Want {
	if len(f.keyFiles) > 0 && !o.format.Info().MultiKeyFile {
		return disk.WantNone
	}
	return need.Passphrase
}

// readPassphraseFor reads the passphrase need asks for into sec, if it
// asks for one; notice is said on the terminal before the prompt.
func readPassphraseFor(a *app, f *imageFlags, o *opened, need *disk.Need, sec *disk.Secret, notice string) error {
	want := wantsPassphrase(f, o, need)
	if want == disk.WantNone {
		return nil
	}
	prompt := need.Prompt
	if prompt == "" {
		prompt = "the passphrase for " + o.path
	}
	p, err := readPassphrase(a, passphraseRequest{file: f.passFile, flag: "passphrase-file", prompt: prompt,
		optional: want == disk.WantOptional, confirm: need.Confirm, notice: notice})
	if err != nil {
		return err
	}
	sec.Passphrase = p
	return nil
}

// retryNotice is what the terminal says before asking again after the
// wrong secret err, for the try-th try of a.tries.
func retryNotice(a *app, err error, try int) string {
	return fmt.Sprintf("%v (try %d of %d)", err, try, a.tries)
}

// sizeWords is a limit for messages: "8 MiB", "64 bytes".
func sizeWords(n int) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

// unlockImage checks req, asks for the secrets and unlocks: the one
// unlock of every verb. The caller wipes the result.
func unlockImage(a *app, f *imageFlags, o *opened, req *disk.Request) (*disk.Unlocked, error) {
	need, err := check(f, o, req)
	if err != nil {
		return nil, err
	}
	return unlockChecked(a, f, o, req, need)
}

// unlockChecked is unlockImage after check: what a verb does between the
// two (create its output) needs no secret. A wrong passphrase typed at
// the terminal is asked for again, up to --tries times in all (as
// cryptsetup does); each try runs the unlock, and its KDFs, once. The
// format's check is not run again, nor are key files read again.
func unlockChecked(a *app, f *imageFlags, o *opened, req *disk.Request, need *disk.Need) (*disk.Unlocked, error) {
	sec, err := readKeyFiles(a, f, o)
	if err != nil {
		return nil, err
	}
	defer sec.Wipe()
	retry := asksTerminal(f, o, need)
	notice := ""
	for try := 1; ; try++ {
		if err := readPassphraseFor(a, f, o, need, sec, notice); err != nil {
			return nil, err
		}
		u, err := o.hdr.Unlock(a.ctx, req, sec)
		clear(sec.Passphrase)
		sec.Passphrase = nil
		if err != nil {
			if retry && try < a.tries && errors.Is(err, disk.ErrWrongSecret) && a.ctx.Err() == nil {
				notice = retryNotice(a, err, try+1)
				continue
			}
			return nil, err
		}
		warnAll(a, o.path, u.Warnings)
		if u.SlotName != "" {
			a.verbosef("%s: unlocked with %s; AES-XTS kernel for %d-byte sectors: %s", o.path, u.SlotName, u.Layout.SectorSize, aesni.Pick(max(u.Layout.SectorSize, 512)))
		}
		return u, nil
	}
}

// headerWarnings prints what reading the header found wrong, where the
// format says.
func headerWarnings(a *app, o *opened) {
	if w, ok := o.hdr.(interface{ Warnings() []string }); ok {
		warnAll(a, o.path, w.Warnings())
	}
}

// rejectHints say what a flag of the other type is called here.
var rejectHints = map[string][]string{
	"volume key-file":       {"a volume is unlocked with a passphrase: --passphrase-file FILE, or the terminal (a plain image's key file is its key)"},
	"plain passphrase-file": {"a plain image takes its raw key: --key-file FILE (32 or 64 bytes)"},
}
