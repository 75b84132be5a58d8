package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"github.com/xtsctl/xtsctl/disk"
	"github.com/xtsctl/xtsctl/inplace"
	"github.com/xtsctl/xtsctl/internal/dmtable"
	"github.com/xtsctl/xtsctl/internal/safefile"
)

func init() { registerCommand(newInfoCmd) }

type infoFlags struct {
	json      bool
	dmTable   bool
	showKey   bool
	keyOutput string
	device    string
	force     bool
	journal   string
	img       imageFlags
}

func newInfoCmd(a *app) *cobra.Command {
	var f infoFlags
	cmd := &cobra.Command{
		Use:   "info IMAGE",
		Short: "Show an image's header, key slots and state, or its dm-crypt table",
		Long: `Show what the header of IMAGE says. For an xtsctl volume: UUID, label,
cipher, sector size, where the data and the tags are, the state of both
header copies, the key slots in use and their Argon2id costs, and whether
the volume was closed cleanly. For a LUKS image: what cryptsetup luksDump
shows. Other formats (--type) show their own header. It needs no
passphrase and shows no secret. --json prints the same as one JSON object.

--dm-table prints instead the device-mapper table line of the data area,
in dm-crypt's own format and units (512-byte sectors):
  0 LENGTH crypt aes-xts-plain64 KEY 0 DEVICE OFFSET [1 sector_size:N]
where KEY is the placeholder <master-key>, and DEVICE is IMAGE or --device
(dm-crypt needs a block device: attach an image file to a loop device
first). dmsetup create NAME --table "LINE" then maps the data area; writes
through it do not update a volume's integrity tags.

--show-key unlocks the image and puts the real key in the line. The key
decrypts the image whatever its passphrases, and cannot be changed:
xtsctl prints it only to a terminal, or writes it to --key-output FILE
(mode 0600), never to a pipe.`,
		Example: `  xtsctl info disk.vol
  xtsctl info --json disk.vol
  xtsctl info disk.luks
  xtsctl info --dm-table --device /dev/loop0 disk.vol
  xtsctl info --dm-table --show-key --key-output table.txt --device /dev/loop0 disk.vol`,
		Args: argsNamed("IMAGE"),
		RunE: func(cmd *cobra.Command, args []string) error { return info(a, &f, args[0]) },
	}
	fs := cmd.Flags()
	fs.BoolVar(&f.json, "json", false, "print the information as JSON")
	fs.BoolVar(&f.dmTable, "dm-table", false, "print the dm-crypt table line of the data area")
	fs.BoolVar(&f.showKey, "show-key", false, "with --dm-table: unlock and include the key")
	fs.StringVar(&f.keyOutput, "key-output", "", "with --show-key: write the line to FILE (mode 0600) instead of the terminal")
	fs.StringVar(&f.device, "device", "", "with --dm-table: the block device holding the image (default: IMAGE)")
	f.img.register(a, cmd, imgAll)
	fs.Lookup("passphrase-file").Usage = "with --show-key: read the passphrase from `FILE` instead of the terminal"
	fs.BoolVarP(&f.force, "force", "f", false, "with --key-output: overwrite FILE if it exists")
	fs.StringVar(&f.journal, "journal", "", "the journal of an interrupted plain in-place run of IMAGE (default: IMAGE.xtsctl-journal)")
	return cmd
}

func info(a *app, f *infoFlags, image string) error {
	switch {
	case f.json && f.dmTable:
		return usageError(errors.New("--json and --dm-table do not go together"))
	case !f.dmTable && (f.showKey || f.device != "" || f.keyOutput != ""):
		return usageError(errors.New("--show-key, --device and --key-output go with --dm-table"))
	case !f.showKey && f.keyOutput != "":
		return usageError(errors.New("--key-output goes with --show-key"))
	case !f.showKey && !needsSecret(f.img.typ) && (f.img.passFile != "" || len(f.img.keyFiles) > 0):
		return usageError(errors.New("--key-output, --passphrase-file and --key-file go with --show-key"))
	}
	if !f.dmTable && f.img.typ == "" && f.img.header == "" {
		in, err := openInput(image)
		if err != nil {
			return err
		}
		// An interrupted in-place run, which no format's header shows.
		rep, err := inplace.Report(in, in.Size, image, f.journal, in.Info.Mode().IsRegular())
		in.Close()
		if err != nil || rep != nil {
			return printReport(a, rep, err, f.json)
		}
	}
	o, err := openImageFor(a, &f.img, image, disk.Inspect, defaultType, false)
	if err != nil {
		return err
	}
	defer o.Close()
	headerWarnings(a, o)
	if f.dmTable {
		return dmTable(a, f, o)
	}
	var ro disk.ReportOptions
	if o.format.Info().ReportNeedsSecret {
		// The header's fields are encrypted: only the secret shows them.
		req := a.request(&f.img)
		req.ReadOnly, req.TestOnly = true, true
		u, err := unlockImage(a, &f.img, o, req)
		if err != nil {
			return err
		}
		defer u.Wipe()
		ro.Unlocked = u
	}
	rep, err := o.hdr.Report(ro)
	if err == nil {
		warnAll(a, image, rep.Warnings)
	}
	return printReport(a, rep, err, f.json)
}

// printReport prints rep (unless err): its JSON document or its lines.
func printReport(a *app, rep *disk.Report, err error, asJSON bool) error {
	switch {
	case err != nil:
		return err
	case asJSON:
		return printJSON(a.stdout, rep.Doc)
	}
	printLines(a, rep.Lines)
	return nil
}

// needsSecret reports whether info on --type typ unlocks (a header whose
// fields are encrypted).
func needsSecret(typ string) bool {
	f, ok := disk.Lookup(typ)
	return ok && f.Info().ReportNeedsSecret
}

// printJSON writes doc as indented JSON, as every --json does.
func printJSON(w io.Writer, doc any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(doc)
}

// printLines prints a report's "key: value" lines, the keys aligned.
func printLines(a *app, lines []disk.Line) {
	for _, l := range lines {
		a.resultf("%*s%-16s %s", 2*l.Indent, "", l.Key+":", l.Value)
	}
}

// dmTable is info --dm-table: the table of the data area, with the key
// only when --show-key asks for it (then only to a terminal or
// --key-output).
func dmTable(a *app, f *infoFlags, o *opened) error {
	device := f.device
	if device == "" {
		device = o.path
		if fi, err := o.img.File.Stat(); err == nil && fi.Mode().IsRegular() {
			a.hintf("%s is a file: dm-crypt needs a block device; attach it (losetup --find --show %s) and give that with --device", o.path, o.path)
		}
	}
	keyNoun := o.format.Info().KeyNoun
	if keyNoun == "" {
		keyNoun = "volume key"
	}
	if !f.showKey {
		m, ok := o.hdr.(disk.Mapper)
		if !ok {
			return usageError(fmt.Errorf("the data of %s (%s) is found only with its key", o.path, o.name()), "add --show-key")
		}
		l, err := m.Layout()
		if err != nil {
			return err
		}
		t, err := l.CryptTable()
		if err != nil {
			return err
		}
		t.Device = device
		a.resultf("%s", t.Template())
		return nil
	}
	out, err := keyTableOutput(a, f, keyNoun, func() (*safefile.Output, error) { return o.output(a, f.keyOutput, f.force) })
	if err != nil {
		return err
	}
	if out != nil {
		defer out.Abort()
	}
	u, err := unlockImage(a, &f.img, o, a.request(&f.img))
	if err != nil {
		return err
	}
	defer u.Wipe()
	t, err := u.Layout.CryptTable()
	if err != nil {
		return err
	}
	return writeKeyTable(a, t, device, u.Key, out, f.keyOutput, o.path, keyNoun)
}

// keyTableOutput checks where info --dm-table --show-key may print a line
// holding a key (a terminal, or --key-output) before anything is unlocked,
// and creates the --key-output file (nil for the terminal).
func keyTableOutput(a *app, f *infoFlags, keyName string, create func() (*safefile.Output, error)) (*safefile.Output, error) {
	if f.keyOutput == "" {
		if !a.stdoutIsTerminal() {
			return nil, usageError(fmt.Errorf("--show-key prints the %s only to a terminal; stdout is not one", keyName),
				"write it to a file instead: --key-output FILE")
		}
		return nil, nil
	}
	return create()
}

// writeKeyTable writes t with key on device to out (stdout if nil), with
// the warnings a line holding the key deserves. The line is built and
// written as bytes, and wiped; its newline is written apart, since
// appending it could copy the line (and the key) to an array nothing
// wipes. keyName is "master key" or "volume key".
func writeKeyTable(a *app, t dmtable.CryptTable, device string, key []byte, out *safefile.Output, keyOutput, image, keyName string) error {
	t.Key, t.Device = key, device
	line, err := t.AppendLine(nil)
	if err != nil {
		return withCode(exitFailure, err)
	}
	defer clear(line)
	writeLine := func(w io.Writer) error {
		if _, err := w.Write(line); err != nil {
			return withCode(exitOutput, err)
		}
		if _, err := w.Write([]byte{'\n'}); err != nil {
			return withCode(exitOutput, err)
		}
		return nil
	}
	if out == nil {
		a.warningf("the line below holds the %s of %s: it decrypts the image whatever its passphrases", keyName, image)
		return writeLine(a.stdout)
	}
	a.warningf("%s holds the %s of %s: it decrypts the image whatever its passphrases; keep it secret, delete it after use", keyOutput, keyName, image)
	if err := writeLine(out); err != nil {
		return err
	}
	if err := out.Commit(); err != nil {
		return withCode(exitOutput, err)
	}
	a.infof("wrote the dm-crypt table of %s with its %s to %s", image, keyName, keyOutput)
	return nil
}
