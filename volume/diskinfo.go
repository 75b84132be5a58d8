package volume

import (
	"fmt"
	"strings"

	"github.com/xtsctl/xtsctl/disk"
	"github.com/xtsctl/xtsctl/internal/bytesize"
	"github.com/xtsctl/xtsctl/internal/words"
)

// InfoSchema names the layout of info --json for volumes (docs/CLI.md);
// it changes when a field changes meaning or goes, not when one is added.
const InfoSchema = "xtsctl-info/1"

// InfoDoc is info --json of a volume; its field names are part of the
// CLI's interface.
type InfoDoc struct {
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
	HeaderCopies    []InfoCopy `json:"header_copies"`
	KeySlots        []InfoSlot `json:"key_slots"`
	State           InfoState  `json:"state"`
	Digest          string     `json:"digest"`
	DMTable         string     `json:"dm_table"`
	InPlace         any        `json:"in_place,omitempty"` // an interrupted in-place run (package inplace's)
}

// InfoCopy is one header copy in InfoDoc.
type InfoCopy struct {
	Name       string `json:"name"`
	Offset     int64  `json:"offset"`
	OK         bool   `json:"ok"`
	Generation uint64 `json:"generation,omitempty"`
	Error      string `json:"error,omitempty"`
}

// InfoSlot is one key slot in InfoDoc.
type InfoSlot struct {
	Slot      int    `json:"slot"`
	Active    bool   `json:"active"`
	KDF       string `json:"kdf,omitempty"`
	Time      uint32 `json:"time,omitempty"`
	MemoryKiB uint32 `json:"memory_kib,omitempty"`
	Threads   uint8  `json:"threads,omitempty"`
}

// InfoState is the state area in InfoDoc.
type InfoState struct {
	Known       bool `json:"known"`
	Clean       bool `json:"clean"`
	DigestStale bool `json:"digest_stale"`
	// Authenticated is false here: info reads the state records without
	// the key, so it can only tell they are intact (verify authenticates
	// them).
	Authenticated bool `json:"authenticated"`
}

// Info is what info shows of the volume image (size bytes) whose
// headers are hs and state st.
func Info(image string, size int64, hs *Headers, st State) *InfoDoc {
	h := hs.Header
	t := h.CryptTable()
	t.Device = image
	j := &InfoDoc{
		Schema: InfoSchema,
		Image:  image, Format: "xtsctl-volume", Version: int(h.Version), Generation: h.Generation,
		UUID: h.UUIDString(), Label: h.Label, Cipher: CipherName, KeyBits: 8 * h.KeySize,
		SectorSize: h.SectorSize, DataOffset: h.DataOffset, DataLength: h.DataLength, Sectors: h.Sectors(),
		Integrity: h.Integrity.String(), TagSize: h.TagSize, TagOffset: h.TagOffset, TagLength: h.TagLength,
		StateOffset: StateOffset, StateLength: h.StateLength, RegionSize: h.RegionSize, Regions: h.Regions(),
		SecondaryOffset: h.SecondaryOffset, VolumeSize: h.Size, ImageSize: size,
		State:   InfoState{Known: st.Valid, Clean: st.Valid && !st.Dirty, DigestStale: st.DigestStale || !st.Valid, Authenticated: st.Authenticated},
		DMTable: t.Template(),
		Digest:  "none",
	}
	if h.Flags&FlagDigest != 0 {
		j.Digest = "recorded"
		if j.State.DigestStale {
			j.Digest = "stale"
		}
	}
	for _, c := range []CopyStatus{hs.Primary, hs.Secondary} {
		cj := InfoCopy{Name: c.Name, Offset: c.Offset, OK: c.Err == nil}
		if c.Parsed {
			cj.Generation = c.Generation
		}
		if c.Err != nil {
			cj.Error = c.Err.Error()
		}
		j.HeaderCopies = append(j.HeaderCopies, cj)
	}
	for i, s := range h.Slots {
		sj := InfoSlot{Slot: i, Active: s.Active}
		if s.Active {
			sj.KDF, sj.Time, sj.MemoryKiB, sj.Threads = "argon2id", s.KDF.Time, s.KDF.MemoryKiB, s.KDF.Threads
		}
		j.KeySlots = append(j.KeySlots, sj)
	}
	return j
}

// Lines is the report of j for people, one "key: value" line each.
func (j *InfoDoc) Lines() []disk.Line {
	var r disk.Report
	row := func(k, format string, args ...any) { r.Add(0, k, fmt.Sprintf(format, args...)) }
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
			row(fmt.Sprintf("key slot %d", s.Slot), "argon2id, %s, %s, %s", words.Plural(int64(s.Time), "pass"), bytesize.Human(int64(s.MemoryKiB)*1024), words.Plural(int64(s.Threads), "thread"))
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
	row("write tracking", "%s of %s", words.Plural(j.Regions, "region"), bytesize.Human(j.RegionSize))
	switch j.Digest {
	case "recorded":
		row("digest", "BLAKE2b-512 of the plaintext, recorded (encrypted)")
	case "stale":
		row("digest", "recorded, but the volume was written since")
	default:
		if j.Integrity == IntegrityNone.String() {
			row("digest", "none (made with --digest none; without tags either, nothing checks the data)")
		} else {
			row("digest", "none (made with --digest none: verify and decrypt check the tags only)")
		}
	}
	row("volume size", "%d bytes (secondary header at byte %d)", j.VolumeSize, j.SecondaryOffset)
	return r.Lines
}

// Report is what info shows of the volume: the header and the state
// area, read without the key.
func (h *volumeHeader) Report(opt disk.ReportOptions) (*disk.Report, error) {
	st, warnings := ReadState(h.img.File, h.hs.Header)
	doc := Info(h.img.Path, h.img.Size, h.hs, st)
	return &disk.Report{Lines: doc.Lines(), Doc: doc, Warnings: warnings}, nil
}
