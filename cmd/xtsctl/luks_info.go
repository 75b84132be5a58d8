package main

// info on LUKS images: what the header says, as text or JSON, or the
// dm-crypt table cryptsetup would load.

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/xtsctl/xtsctl/internal/bytesize"
	"github.com/xtsctl/xtsctl/internal/safefile"
	"github.com/xtsctl/xtsctl/luks"
	"github.com/xtsctl/xtsctl/luks/luksimage"
)

// luksInfoSchema names the layout of info --json for LUKS images
// (docs/CLI.md).
const luksInfoSchema = "xtsctl-luks-info/1"

// luksInfoJSON is info --json of a LUKS image: the header as package luks
// reads it (its field names), with what the image adds. Field names are
// part of the CLI's interface.
type luksInfoJSON struct {
	Schema     string `json:"schema"` // luksInfoSchema
	Image      string `json:"image"`
	Format     string `json:"format"` // "luks1" or "luks2"
	ImageSize  int64  `json:"image_size"`
	HeaderFile string `json:"header_file,omitempty"` // --header
	// DataOffset and DataLength are where the data segment lies on the
	// data device, as decrypt and open use it; 0 when it is unusable
	// (Unsupported or DataError says why).
	DataOffset  int64  `json:"data_offset"`
	DataLength  int64  `json:"data_length"`
	DataError   string `json:"data_error,omitempty"`
	Supported   bool   `json:"supported"`
	Unsupported string `json:"unsupported,omitempty"`
	DMTable     string `json:"dm_table,omitempty"` // the dm-crypt table line, the key left out
	*luks.Header
}

// luksInfo is info for a LUKS image (cmd_info.go's hook).
func luksInfo(a *app, cmd *cobra.Command, f *infoFlags, image string) error {
	switch {
	case f.json && f.dmTable:
		return usageError(errors.New("--json and --dm-table do not go together"))
	case !f.dmTable && (f.showKey || f.device != "" || f.keyOutput != ""):
		return usageError(errors.New("--show-key, --device and --key-output go with --dm-table"))
	case !f.showKey && (f.keyOutput != "" || f.passFile != "" || flagString(cmd, "key-file") != ""):
		return usageError(errors.New("--key-output, --passphrase-file and --key-file go with --show-key"))
	}
	li, err := openLUKS(cmd, image, luksimage.Inspect)
	if err != nil {
		return err
	}
	defer li.Close()
	if f.dmTable {
		return luksDMTable(a, cmd, f, li)
	}
	h := li.Header
	j := luksInfoJSON{Schema: luksInfoSchema, Image: image, Format: fmt.Sprintf("luks%d", h.Version), ImageSize: li.DataSize, Header: h}
	if li.Detached {
		j.HeaderFile = li.HeaderPath
	}
	if err := h.Supported(); err != nil {
		j.Unsupported = err.Error()
	} else {
		j.Supported = true
	}
	if off, n, err := h.DataRange(li.DataSize); err == nil {
		j.DataOffset, j.DataLength = off, n
		if t, err := h.DMTable(li.DataSize); err == nil {
			j.DMTable = dmTemplate(t, image)
		}
	} else if j.Supported {
		j.DataError = err.Error()
	}
	if f.json {
		enc := json.NewEncoder(a.stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		return enc.Encode(j)
	}
	printLUKSInfo(a, &j)
	return nil
}

func printLUKSInfo(a *app, j *luksInfoJSON) {
	h := j.Header
	row := func(k, format string, args ...any) { a.resultf("%-16s "+format, append([]any{k + ":"}, args...)...) }
	row("image", "%s (%d bytes)", j.Image, j.ImageSize)
	if j.HeaderFile != "" {
		row("header", "%s (detached)", j.HeaderFile)
	}
	if h.Version == 2 {
		row("format", "LUKS2, header sequence %d, %s of metadata per copy, %s of keyslots", h.SeqID, bytesize.Human(int64(h.MetadataSize)), bytesize.Human(int64(h.KeyslotsSize)))
	} else {
		row("format", "LUKS1, hash %s", h.Hash)
	}
	row("uuid", "%s", h.UUID)
	if h.Version == 2 {
		label := h.Label
		if label == "" {
			label = "(none)"
		}
		row("label", "%s", label)
		if h.Subsystem != "" {
			row("subsystem", "%s", h.Subsystem)
		}
	}
	row("cipher", "%s, %d-bit key", h.Cipher, 8*h.KeySize)
	row("sector size", "%d", h.Segment.SectorSize)
	seg := h.Segment
	size := "to the end of the device"
	if !seg.Dynamic {
		size = fmt.Sprintf("%d bytes", seg.Size)
	}
	switch {
	case j.DataLength > 0:
		row("data", "%s (%d sectors) at byte %d (%s)", bytesize.Human(j.DataLength), j.DataLength/int64(seg.SectorSize), j.DataOffset, size)
	case j.DataError != "":
		row("data", "at byte %d (%s): %s", seg.Offset, size, j.DataError)
	default:
		row("data", "at byte %d (%s)", seg.Offset, size)
	}
	if seg.IVTweak != 0 {
		row("iv_tweak", "%d (not applied: cryptsetup maps the segment with IV offset 0)", seg.IVTweak)
	}
	if h.Version == 2 {
		var copies []string
		for _, c := range h.Copies {
			s := fmt.Sprintf("%s at byte %d %s", c.Name, c.Offset, c.State)
			switch {
			case c.State == luks.CopyDamaged || c.State == luks.CopyMissing:
				s = fmt.Sprintf("%s at byte %d %s", c.Name, c.Offset, strings.ToUpper(string(c.State)))
				if c.Err != nil {
					s += fmt.Sprintf(" (%v)", c.Err)
				}
			case c.State == luks.CopyStale:
				s += fmt.Sprintf(" (sequence %d)", c.SeqID)
			}
			if c.Used {
				s += ", in use"
			}
			copies = append(copies, s)
		}
		row("header copies", "%s", strings.Join(copies, "; "))
	} else {
		row("header", "one copy at byte 0 (LUKS1 has no second)")
	}
	if len(h.Keyslots) == 0 {
		row("keyslots", "none")
	}
	for _, k := range h.Keyslots {
		s := k.KDF.String()
		if h.Version == 2 && k.Priority != luks.PriorityNormal {
			s += ", " + k.Priority.String()
		}
		if k.Err != nil {
			s += "; UNUSABLE: " + k.Err.Error()
		}
		row(fmt.Sprintf("keyslot %d", k.ID), "%s", s)
	}
	for _, t := range h.Tokens {
		row(fmt.Sprintf("token %d", t.ID), "%s, keyslots %s (not run by xtsctl)", t.Type, intList(t.Keyslots))
	}
	if len(h.Flags) > 0 {
		row("flags", "%s", strings.Join(h.Flags, ", "))
	}
	if len(h.Requirements) > 0 {
		row("requirements", "%s", strings.Join(h.Requirements, ", "))
	}
	if j.Supported {
		row("supported", "yes")
	} else {
		row("supported", "no: %s", j.Unsupported)
	}
}

// luksDMTable is info --dm-table of a LUKS image: the table cryptsetup
// loads, with the key only when --show-key asks for it (then only to a
// terminal or --key-output).
func luksDMTable(a *app, cmd *cobra.Command, f *infoFlags, li *luksimage.Image) error {
	device := f.device
	if device == "" {
		device = li.Path
		if li.DataInfo != nil && li.DataInfo.Mode().IsRegular() {
			a.hintf("%s is a file: dm-crypt needs a block device; attach it (losetup --find --show %s) and give that with --device", li.Path, li.Path)
		}
	}
	t, err := li.Header.DMTable(li.DataSize)
	if err != nil {
		return luksError(li.Path, err)
	}
	if !f.showKey {
		a.resultf("%s", dmTemplate(t, device))
		return nil
	}
	out, err := keyTableOutput(a, f, "volume key", func() (*safefile.Output, error) { return luksOutput(f.keyOutput, li, f.force) })
	if err != nil {
		return err
	}
	if out != nil {
		defer out.Abort()
	}
	key, _, err := luksUnlock(a, cmd, li)
	if err != nil {
		return err
	}
	defer clear(key)
	return writeKeyTable(a, t, device, key, out, f.keyOutput, li.Path, "volume key", "image")
}

// luksVerify answers verify on a LUKS image (cmd_verify.go's hook): LUKS
// has no integrity tags or digest to check.
func luksVerify(image string) error {
	return withCode(exitInput, fmt.Errorf("%s is a LUKS image: it has no integrity tags or digest to verify", image),
		"xtsctl info "+image+" checks its header copies; xtsctl decrypt reads all of its data")
}
