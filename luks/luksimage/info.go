package luksimage

import (
	"fmt"
	"strings"

	"github.com/xtsctl/xtsctl/disk"
	"github.com/xtsctl/xtsctl/internal/bytesize"
	"github.com/xtsctl/xtsctl/internal/words"
	"github.com/xtsctl/xtsctl/luks"
)

// InfoSchema names the layout of info --json for LUKS images
// (docs/CLI.md).
const InfoSchema = "xtsctl-luks-info/1"

// InfoDoc is info --json of a LUKS image: the header as package luks
// reads it (its field names), with what the image adds. Field names are
// part of the CLI's interface.
type InfoDoc struct {
	Schema     string `json:"schema"` // InfoSchema
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

// Report is what info shows of the LUKS header.
func (h *luksHeader) Report(opt disk.ReportOptions) (*disk.Report, error) {
	hd := h.h
	j := &InfoDoc{Schema: InfoSchema, Image: h.img.Path, Format: fmt.Sprintf("luks%d", hd.Version), ImageSize: h.img.Size, Header: hd}
	if h.img.HeaderFile != nil {
		j.HeaderFile = h.img.HeaderPath
	}
	if err := hd.Supported(); err != nil {
		j.Unsupported = err.Error()
	} else {
		j.Supported = true
	}
	if off, n, err := hd.DataRange(h.img.Size); err == nil {
		j.DataOffset, j.DataLength = off, n
		if t, err := hd.DMTable(h.img.Size); err == nil {
			t.Device = h.img.Path
			j.DMTable = t.Template()
		}
	} else if j.Supported {
		j.DataError = err.Error()
	}
	return &disk.Report{Lines: j.Lines(), Doc: j}, nil
}

// Lines is the report of j for people.
func (j *InfoDoc) Lines() []disk.Line {
	h := j.Header
	var r disk.Report
	row := func(k, format string, args ...any) { r.Add(0, k, fmt.Sprintf(format, args...)) }
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
		if h.Version == 1 {
			// As luksDump shows them.
			s += fmt.Sprintf(", %d stripes, key material at sector %d", k.AF.Stripes, k.Area.Offset/512)
		}
		if h.Version == 2 && k.Priority != luks.PriorityNormal {
			s += ", " + k.Priority.String()
		}
		if k.Unbound {
			s += ", unbound (its key opens no data segment)"
		}
		if k.Err != nil {
			s += "; UNUSABLE: " + k.Err.Error()
		}
		row(fmt.Sprintf("keyslot %d", k.ID), "%s", s)
	}
	for _, t := range h.Tokens {
		run := ""
		if !t.Runnable {
			run = " (not run by xtsctl)"
		}
		row(fmt.Sprintf("token %d", t.ID), "%s, keyslots %s%s", t.Type, words.List(t.Keyslots), run)
	}
	for _, sg := range h.OtherSegments {
		row(fmt.Sprintf("segment %d", sg.ID), "%s at byte %d (not served)", sg.Type, sg.Offset)
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
	return r.Lines
}
