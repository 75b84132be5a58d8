package blockdev

import (
	"fmt"
	"strings"
	"time"

	"github.com/xtsctl/xtsctl/internal/bytesize"
	"github.com/xtsctl/xtsctl/internal/words"
)

// What xtsctl status shows of an open image, for people and for scripts.

// Lines describe vs for people, as xtsctl status prints it: a line with
// its name and condition, then what it serves, indented.
func (vs *Status) Lines() []string {
	var lines []string
	add := func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) }
	st := &vs.State
	if st.Device == "" {
		add("%s: %s", vs.Name, vs.Condition)
		return lines
	}
	mode := "read-write"
	if st.ReadOnly {
		mode = "read-only"
	}
	add("%s: %s", vs.Name, vs.Condition)
	add("  image:      %s (%s: %s)", st.Image, st.Type, st.Cipher)
	add("  device:     %s, %s, %s backend", st.Device, mode, st.Backend)
	if st.Link != "" {
		add("  link:       %s -> %s", st.Link, st.Device)
	}
	if st.Loop != "" {
		add("  loop:       %s", st.Loop)
	}
	if vs.DM != nil {
		for i, line := range strings.Split(vs.DM.Table, "\n") {
			label := "  dm table:   "
			if i > 0 {
				label = "              "
			}
			add("%s%s", label, line)
		}
	}
	if st.Mountpoint != "" {
		add("  mounted on: %s (%s)", st.Mountpoint, st.FSType)
	}
	if st.PID != 0 {
		add("  server:     pid %d, since %s", st.PID, st.Opened.Local().Format("2006-01-02 15:04:05"))
	}
	if r := st.Recovered; r != nil {
		what := words.Plural(int64(r.DirtyRegions), "dirty region")
		if r.AllRegions {
			what = "every region"
		}
		switch {
		case r.Mismatched == 0:
			add("  recovered:  at open, after an unclean shutdown: checked %s (%d sectors), every tag matched", what, r.Sectors)
		case r.Repaired:
			add("  recovered:  at open, after an unclean shutdown: checked %s (%d sectors), re-tagged %s (--recover): %s", what, r.Sectors, words.Plural(int64(r.Mismatched), "mismatched sector"), words.List(r.BadSectors))
		default:
			add("  recovered:  at open, after an unclean shutdown: checked %s (%d sectors), %s read as I/O errors: %s", what, r.Sectors, words.Plural(int64(r.Mismatched), "mismatched sector"), words.List(r.BadSectors))
		}
	}
	if s := vs.Stats; s != nil {
		if s.Transport != "" {
			add("  FUSE:       %s", s.Transport)
		}
		add("  reads:      %d (%s)", s.Reads, bytesize.Human(int64(s.ReadBytes)))
		add("  writes:     %d (%s)", s.Writes, bytesize.Human(int64(s.WriteBytes)))
		add("  syncs:      %d", s.Syncs)
		add("  I/O errors: %d read, %d write", s.ReadErrors, s.WriteErrors)
		line := fmt.Sprintf("  integrity errors: %d", s.IntegrityErrors)
		if len(s.BadSectors) > 0 {
			line += " (sectors " + words.List(s.BadSectors)
			if s.MoreBadSectors {
				line += ", ..."
			}
			line += ")"
		}
		add("%s", line)
	}
	return lines
}

// StatusSchema names the layout of status --json (docs/CLI.md); it changes
// when a field changes meaning or goes, not when one is added.
const StatusSchema = "xtsctl-status/1"

// StatusDoc is status --json: what scripts read, spelled out here rather
// than the run directory's records, which are internal.
type StatusDoc struct {
	Schema  string      `json:"schema"`
	Volumes []VolumeDoc `json:"volumes"`
}

// NewStatusDoc is the document of the volumes out.
func NewStatusDoc(out []Status) StatusDoc {
	doc := StatusDoc{Schema: StatusSchema, Volumes: make([]VolumeDoc, 0, len(out))}
	for i := range out {
		doc.Volumes = append(doc.Volumes, out[i].Doc())
	}
	return doc
}

// VolumeDoc is one volume in StatusDoc.
type VolumeDoc struct {
	Name       string     `json:"name"`
	State      string     `json:"state"` // open, opening, dead, unreachable
	Backend    string     `json:"backend,omitempty"`
	Image      string     `json:"image,omitempty"`
	Type       string     `json:"type,omitempty"`
	Cipher     *Cipher    `json:"cipher,omitempty"`
	Device     string     `json:"device,omitempty"`
	Link       string     `json:"link,omitempty"` // /dev/xtsctl/NAME, the device's stable name
	Loop       string     `json:"loop,omitempty"`
	Mountpoint string     `json:"mountpoint,omitempty"`
	FSType     string     `json:"fstype,omitempty"`
	ReadOnly   bool       `json:"read_only"`
	PID        int        `json:"pid,omitempty"`
	Opened     *time.Time `json:"opened,omitempty"`
	Recovered  *Recovery  `json:"recovered,omitempty"`
	Upgraded   bool       `json:"upgraded,omitempty"`
	Stats      *Stats     `json:"stats,omitempty"`
	DM         *DMStatus  `json:"dm,omitempty"`
}

// Doc is vs in status --json.
func (vs *Status) Doc() VolumeDoc {
	st := &vs.State
	j := VolumeDoc{
		Name: vs.Name, State: vs.Condition, Backend: st.Backend, Image: st.Image, Type: st.Type,
		Device: st.Device, Link: st.Link, Loop: st.Loop, Mountpoint: st.Mountpoint, FSType: st.FSType, ReadOnly: st.ReadOnly,
		PID: st.PID, Recovered: st.Recovered, Upgraded: st.Upgraded, Stats: vs.Stats, DM: vs.DM,
	}
	if st.Cipher != (Cipher{}) {
		j.Cipher = &st.Cipher
	}
	if !st.Opened.IsZero() {
		j.Opened = &st.Opened
	}
	return j
}
