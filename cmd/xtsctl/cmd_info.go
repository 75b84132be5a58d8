package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/xtsctl/xtsctl/internal/bytesize"
	"github.com/xtsctl/xtsctl/internal/devmapper"
	"github.com/xtsctl/xtsctl/internal/safefile"

	"github.com/spf13/cobra"
	"github.com/xtsctl/xtsctl/volume"
)

func init() { registerCommand(newInfoCmd) }

type infoFlags struct {
	json      bool
	dmTable   bool
	showKey   bool
	keyOutput string
	device    string
	passFile  string
	force     bool
	journal   string
}

func newInfoCmd(a *app) *cobra.Command {
	var f infoFlags
	cmd := &cobra.Command{
		Use:   "info IMAGE",
		Short: "Show a volume's header, key slots and state, or its dm-crypt table",
		Long: `Show what the header of the xtsctl volume IMAGE says: UUID, label, cipher,
sector size, where the data and the tags are, the state of both header
copies, the key slots in use and their Argon2id costs, and whether the
volume was closed cleanly. It needs no passphrase and shows no secret.
--json prints the same as one JSON object.

--dm-table prints instead the device-mapper table line of the data area,
in dm-crypt's own format and units (512-byte sectors):
  0 LENGTH crypt aes-xts-plain64 KEY 0 DEVICE OFFSET [1 sector_size:N]
where KEY is the placeholder <master-key>, and DEVICE is IMAGE or --device
(dm-crypt needs a block device: attach an image file to a loop device
first). dmsetup create NAME --table "LINE" then maps the data area; writes
through it do not update the integrity tags.

--show-key unlocks the volume and puts the real master key in the line. The
master key decrypts the volume whatever its passphrases, and cannot be
changed: xtsctl prints it only to a terminal, or writes it to --key-output
FILE (mode 0600), never to a pipe.`,
		Example: `  xtsctl info disk.vol
  xtsctl info --json disk.vol
  xtsctl info --dm-table --device /dev/loop0 disk.vol
  xtsctl info --dm-table --show-key --key-output table.txt --device /dev/loop0 disk.vol`,
		Args: argsNamed("IMAGE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if wantsLUKS(cmd, args[0]) {
				return luksInfo(a, cmd, &f, args[0])
			}
			if err := notLUKS(cmd); err != nil {
				return err
			}
			return info(a, cmd, &f, args[0])
		},
	}
	fs := cmd.Flags()
	fs.BoolVar(&f.json, "json", false, "print the information as JSON")
	fs.BoolVar(&f.dmTable, "dm-table", false, "print the dm-crypt table line of the data area")
	fs.BoolVar(&f.showKey, "show-key", false, "with --dm-table: unlock and include the master key")
	fs.StringVar(&f.keyOutput, "key-output", "", "with --show-key: write the line to FILE (mode 0600) instead of the terminal")
	fs.StringVar(&f.device, "device", "", "with --dm-table: the block device holding the volume (default: IMAGE)")
	fs.StringVar(&f.passFile, "passphrase-file", "", "with --show-key: read the passphrase from FILE instead of the terminal")
	registerUnlockFlags(a, fs)
	fs.BoolVarP(&f.force, "force", "f", false, "with --key-output: overwrite FILE if it exists")
	addLUKSFlags(cmd, luksHeaderFlag|luksUnlockFlags)
	fs.StringVar(&f.journal, "journal", "", "the journal of an interrupted plain in-place run of IMAGE (default: IMAGE.xtsctl-journal)")
	return cmd
}

func info(a *app, cmd *cobra.Command, f *infoFlags, image string) error {
	switch {
	case f.json && f.dmTable:
		return usageError(errors.New("--json and --dm-table do not go together"))
	case !f.dmTable && (f.showKey || f.device != "" || f.keyOutput != ""):
		return usageError(errors.New("--show-key, --device and --key-output go with --dm-table"))
	case !f.showKey && (f.keyOutput != "" || f.passFile != ""):
		return usageError(errors.New("--key-output and --passphrase-file go with --show-key"))
	}
	in, err := openInput(image)
	if err != nil {
		return err
	}
	defer in.Close()
	if !f.dmTable {
		if shown, err := infoInPlace(a, f, image, in); shown {
			return err
		}
	}
	hs, err := volume.ReadHeaders(in, in.Size)
	var te *volume.TruncatedError
	switch {
	case errors.As(err, &te) && !f.dmTable:
		a.warningf("%s: %v", image, err) // show what the header says all the same
	case err != nil:
		return volumeError(image, err)
	}
	warnAll(a, image, hs.Warnings)
	if f.dmTable {
		return dmTable(a, f, image, in, hs)
	}
	h := hs.Header
	st, warnings := volume.ReadState(in, h)
	warnAll(a, image, warnings)
	j := infoOf(image, in.Size, hs, st)
	if f.json {
		enc := json.NewEncoder(a.stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		return enc.Encode(j)
	}
	printInfo(a, j)
	return nil
}

// infoJSON is the output of info --json; its field names are part of the
// CLI's interface.
// infoSchema names the layout of info --json (docs/CLI.md); it changes
// when a field changes meaning or goes, not when one is added.
const infoSchema = "xtsctl-info/1"

type infoJSON struct {
	Schema          string     `json:"schema"`
	Image           string     `json:"image"`
	Format          string     `json:"format"`
	Version         int        `json:"version"`
	Generation      uint64     `json:"generation"`
	UUID            string     `json:"uuid"`
	Label           string     `json:"label"`
	Cipher          string     `json:"cipher"`
	KeyBits         int        `json:"key_bits"`
	SectorSize      int        `json:"sector_size"`
	DataOffset      int64      `json:"data_offset"`
	DataLength      int64      `json:"data_length"`
	Sectors         int64      `json:"sectors"`
	Integrity       string     `json:"integrity"`
	TagSize         int        `json:"tag_size"`
	TagOffset       int64      `json:"tag_offset"`
	TagLength       int64      `json:"tag_length"`
	StateOffset     int64      `json:"state_offset"`
	StateLength     int64      `json:"state_length"`
	RegionSize      int64      `json:"region_size"`
	Regions         int64      `json:"regions"`
	SecondaryOffset int64      `json:"secondary_header_offset"`
	VolumeSize      int64      `json:"volume_size"`
	ImageSize       int64      `json:"image_size"`
	HeaderCopies    []copyJSON `json:"header_copies"`
	KeySlots        []slotJSON `json:"key_slots"`
	State           stateJSON  `json:"state"`
	Digest          string     `json:"digest"`
	DMTable         string     `json:"dm_table"`
	// InPlace describes an interrupted in-place run (cmd_inplace.go).
	InPlace *inPlaceJSON `json:"in_place,omitempty"`
}

type copyJSON struct {
	Name       string `json:"name"`
	Offset     int64  `json:"offset"`
	OK         bool   `json:"ok"`
	Generation uint64 `json:"generation,omitempty"`
	Error      string `json:"error,omitempty"`
}

type slotJSON struct {
	Slot      int    `json:"slot"`
	Active    bool   `json:"active"`
	KDF       string `json:"kdf,omitempty"`
	Time      uint32 `json:"time,omitempty"`
	MemoryKiB uint32 `json:"memory_kib,omitempty"`
	Threads   uint8  `json:"threads,omitempty"`
}

type stateJSON struct {
	Known       bool `json:"known"`
	Clean       bool `json:"clean"`
	DigestStale bool `json:"digest_stale"`
	// Authenticated is false here: info reads the state records without
	// the key, so it can only tell they are intact (verify authenticates
	// them).
	Authenticated bool `json:"authenticated"`
}

func infoOf(image string, size int64, hs *volume.Headers, st volume.State) infoJSON {
	h := hs.Header
	j := infoJSON{
		Schema: infoSchema,
		Image:  image, Format: "xtsctl-volume", Version: int(h.Version), Generation: h.Generation,
		UUID: h.UUIDString(), Label: h.Label, Cipher: volume.CipherName, KeyBits: 8 * h.KeySize,
		SectorSize: h.SectorSize, DataOffset: h.DataOffset, DataLength: h.DataLength, Sectors: h.Sectors(),
		Integrity: h.Integrity.String(), TagSize: h.TagSize, TagOffset: h.TagOffset, TagLength: h.TagLength,
		StateOffset: volume.StateOffset, StateLength: h.StateLength, RegionSize: h.RegionSize, Regions: h.Regions(),
		SecondaryOffset: h.SecondaryOffset, VolumeSize: h.Size, ImageSize: size,
		State:   stateJSON{Known: st.Valid, Clean: st.Valid && !st.Dirty, DigestStale: st.DigestStale || !st.Valid, Authenticated: st.Authenticated},
		DMTable: dmTemplate(h.CryptTable(), image),
		Digest:  "none",
	}
	if h.Flags&volume.FlagDigest != 0 {
		j.Digest = "recorded"
		if j.State.DigestStale {
			j.Digest = "stale"
		}
	}
	for _, c := range []volume.CopyStatus{hs.Primary, hs.Secondary} {
		cj := copyJSON{Name: c.Name, Offset: c.Offset, OK: c.Err == nil}
		if c.Parsed {
			cj.Generation = c.Generation
		}
		if c.Err != nil {
			cj.Error = c.Err.Error()
		}
		j.HeaderCopies = append(j.HeaderCopies, cj)
	}
	for i, s := range h.Slots {
		sj := slotJSON{Slot: i, Active: s.Active}
		if s.Active {
			sj.KDF, sj.Time, sj.MemoryKiB, sj.Threads = "argon2id", s.KDF.Time, s.KDF.MemoryKiB, s.KDF.Threads
		}
		j.KeySlots = append(j.KeySlots, sj)
	}
	return j
}

func printInfo(a *app, j infoJSON) {
	row := func(k, format string, args ...any) { a.resultf("%-16s "+format, append([]any{k + ":"}, args...)...) }
	row("image", "%s (%d bytes)", j.Image, j.ImageSize)
	row("format", "xtsctl volume, version %d, header generation %d", j.Version, j.Generation)
	row("uuid", "%s", j.UUID)
	if j.Label == "" {
		row("label", "(none)")
	} else {
		row("label", "%s", j.Label)
	}
	row("cipher", "%s, %d-bit key", j.Cipher, j.KeyBits)
	row("sector size", "%d", j.SectorSize)
	row("data", "%s (%d sectors) at byte %d", bytesize.Human(j.DataLength), j.Sectors, j.DataOffset)
	if j.Integrity == "none" {
		row("integrity", "none")
	} else {
		row("integrity", "%s, %d-byte tags at byte %d (%s)", j.Integrity, j.TagSize, j.TagOffset, bytesize.Human(j.TagLength))
	}
	var copies []string
	for _, c := range j.HeaderCopies {
		if c.OK {
			copies = append(copies, fmt.Sprintf("%s at byte %d ok", c.Name, c.Offset))
		} else {
			copies = append(copies, fmt.Sprintf("%s at byte %d DAMAGED (%s)", c.Name, c.Offset, c.Error))
		}
	}
	row("header copies", "%s", strings.Join(copies, "; "))
	for _, s := range j.KeySlots {
		if s.Active {
			row(fmt.Sprintf("key slot %d", s.Slot), "argon2id, %s, %s, %s", plural(int64(s.Time), "pass"), bytesize.Human(int64(s.MemoryKiB)*1024), plural(int64(s.Threads), "thread"))
		}
	}
	switch {
	case !j.State.Known:
		row("state", "unknown (no intact state record)")
	case j.State.Clean:
		row("state", "closed cleanly")
	default:
		row("state", "not closed cleanly")
	}
	row("write tracking", "%s of %s", plural(j.Regions, "region"), bytesize.Human(j.RegionSize))
	switch j.Digest {
	case "recorded":
		row("digest", "BLAKE2b-512 of the plaintext, recorded (encrypted)")
	case "stale":
		row("digest", "recorded, but the volume was written since")
	default:
		if j.Integrity == volume.IntegrityNone.String() {
			row("digest", "none (made with --digest none; without tags either, nothing checks the data)")
		} else {
			row("digest", "none (made with --digest none: verify and decrypt check the tags only)")
		}
	}
	row("volume size", "%d bytes (secondary header at byte %d)", j.VolumeSize, j.SecondaryOffset)
}

func dmTable(a *app, f *infoFlags, image string, in *safefile.Input, hs *volume.Headers) error {
	device := f.device
	if device == "" {
		device = image
		if in.Info.Mode().IsRegular() {
			a.hintf("%s is a file: dm-crypt needs a block device; attach it (losetup --find --show %s) and give that with --device", image, image)
		}
	}
	t := hs.Header.CryptTable()
	if !f.showKey {
		a.resultf("%s", dmTemplate(t, device))
		return nil
	}
	out, err := keyTableOutput(a, f, "master key", func() (*safefile.Output, error) { return createOutput(f.keyOutput, in, f.force) })
	if err != nil {
		return err
	}
	if out != nil {
		defer out.Abort()
	}
	v, err := unlockVolume(a, image, f.passFile, true)
	if err != nil {
		return err
	}
	key := v.MasterKey()
	v.Close()
	defer clear(key)
	return writeKeyTable(a, t, device, key, out, f.keyOutput, image, "master key", "volume")
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
// wipes. keyName is "master key" or "volume key", of what ("volume",
// "image").
func writeKeyTable(a *app, t devmapper.CryptTable, device string, key []byte, out *safefile.Output, keyOutput, image, keyName, what string) error {
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
		a.warningf("the line below holds the %s of %s: it decrypts the %s whatever its passphrases", keyName, image, what)
		return writeLine(a.stdout)
	}
	a.warningf("%s holds the %s of %s: it decrypts the %s whatever its passphrases; keep it secret, delete it after use", keyOutput, keyName, image, what)
	if err := writeLine(out); err != nil {
		return err
	}
	if err := out.Commit(); err != nil {
		return withCode(exitOutput, err)
	}
	a.infof("wrote the dm-crypt table of %s with its %s to %s", image, keyName, keyOutput)
	return nil
}

// dmTemplate is the table line of t on device, the key left out.
func dmTemplate(t devmapper.CryptTable, device string) string {
	t.Device = device
	return t.Template()
}
