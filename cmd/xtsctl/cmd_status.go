package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/xtsctl/xtsctl/blockdev"
	"github.com/xtsctl/xtsctl/internal/bytesize"
	"github.com/xtsctl/xtsctl/internal/words"
)

func init() { registerCommand(newStatusCmd) }

func newStatusCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status [NAME|DEVICE|MOUNTPOINT]",
		Short: "List open volumes, their devices, mountpoints and I/O counters",
		Long: `Show each open volume (or only NAME): image, device, mountpoint, backend,
and the I/O counters of its server: requests and bytes read and written,
syncs, I/O errors, and integrity errors with the sectors that failed.
Volumes served by the dm backend have no server and no counters: status
shows their loop device and the device-mapper table the kernel holds, with
the key masked as zeros (as dmsetup table shows it).

A volume whose server died, or whose device-mapper device was removed
without xtsctl, is shown as "dead"; 'xtsctl close NAME' or the next open
cleans it up.`,
		Example: `  xtsctl status
  xtsctl status --json secret`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return status(a, args, asJSON)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON (one object per volume, in an array)")
	return cmd
}

func status(a *app, args []string, asJSON bool) error {
	var out []blockdev.Status
	if len(args) == 1 {
		name, err := blockdev.NameOf(args[0])
		if err != nil {
			return err
		}
		st, err := blockdev.StatusOf(name, a.blockdevOptions())
		if errors.Is(err, blockdev.ErrNotOpen) {
			return withCode(exitUsage, fmt.Errorf("%s is not open", args[0]), "'xtsctl status' lists open volumes")
		}
		if err != nil {
			return err
		}
		out = append(out, st)
	} else {
		var err error
		if out, err = blockdev.List(a.blockdevOptions()); err != nil {
			return err
		}
	}
	if asJSON {
		doc := statusDoc{Schema: statusSchema, Volumes: make([]statusJSON, 0, len(out))}
		for i := range out {
			doc.Volumes = append(doc.Volumes, statusOfOpen(&out[i]))
		}
		b, err := json.MarshalIndent(doc, "", "  ")
		if err != nil {
			return err
		}
		a.resultf("%s", b)
		return nil
	}
	if len(out) == 0 {
		a.infof("no volumes are open")
		return nil
	}
	for i, vs := range out {
		if i > 0 {
			a.resultf("")
		}
		printStatus(a, &vs)
	}
	return nil
}

func printStatus(a *app, vs *blockdev.Status) {
	st := &vs.State
	if st.Device == "" {
		a.resultf("%s: %s", vs.Name, vs.Condition)
		return
	}
	mode := "read-write"
	if st.ReadOnly {
		mode = "read-only"
	}
	a.resultf("%s: %s", vs.Name, vs.Condition)
	a.resultf("  image:      %s (%s: %s)", st.Image, st.Type, st.Cipher)
	a.resultf("  device:     %s, %s, %s backend", st.Device, mode, st.Backend)
	if st.Link != "" {
		a.resultf("  link:       %s -> %s", st.Link, st.Device)
	}
	if st.Loop != "" {
		a.resultf("  loop:       %s", st.Loop)
	}
	if vs.DM != nil {
		for i, line := range strings.Split(vs.DM.Table, "\n") {
			label := "  dm table:   "
			if i > 0 {
				label = "              "
			}
			a.resultf("%s%s", label, line)
		}
	}
	if st.Mountpoint != "" {
		a.resultf("  mounted on: %s (%s)", st.Mountpoint, st.FSType)
	}
	if st.PID != 0 {
		a.resultf("  server:     pid %d, since %s", st.PID, st.Opened.Local().Format("2006-01-02 15:04:05"))
	}
	if r := st.Recovered; r != nil {
		what := words.Plural(int64(r.DirtyRegions), "dirty region")
		if r.AllRegions {
			what = "every region"
		}
		switch {
		case r.Mismatched == 0:
			a.resultf("  recovered:  at open, after an unclean shutdown: checked %s (%d sectors), every tag matched", what, r.Sectors)
		case r.Repaired:
			a.resultf("  recovered:  at open, after an unclean shutdown: checked %s (%d sectors), re-tagged %s (--recover): %s", what, r.Sectors, words.Plural(int64(r.Mismatched), "mismatched sector"), words.List(r.BadSectors))
		default:
			a.resultf("  recovered:  at open, after an unclean shutdown: checked %s (%d sectors), %s read as I/O errors: %s", what, r.Sectors, words.Plural(int64(r.Mismatched), "mismatched sector"), words.List(r.BadSectors))
		}
	}
	if s := vs.Stats; s != nil {
		if s.Transport != "" {
			a.resultf("  FUSE:       %s", s.Transport)
		}
		a.resultf("  reads:      %d (%s)", s.Reads, bytesize.Human(int64(s.ReadBytes)))
		a.resultf("  writes:     %d (%s)", s.Writes, bytesize.Human(int64(s.WriteBytes)))
		a.resultf("  syncs:      %d", s.Syncs)
		a.resultf("  I/O errors: %d read, %d write", s.ReadErrors, s.WriteErrors)
		line := fmt.Sprintf("  integrity errors: %d", s.IntegrityErrors)
		if len(s.BadSectors) > 0 {
			line += " (sectors " + words.List(s.BadSectors)
			if s.MoreBadSectors {
				line += ", ..."
			}
			line += ")"
		}
		a.resultf("%s", line)
	}
}

// statusSchema names the layout of status --json (docs/CLI.md); it changes
// when a field changes meaning or goes, not when one is added.
const statusSchema = "xtsctl-status/1"

// statusDoc is status --json: what scripts read, spelled out here rather
// than the run directory's records, which are internal.
type statusDoc struct {
	Schema  string       `json:"schema"`
	Volumes []statusJSON `json:"volumes"`
}

type statusJSON struct {
	Name       string             `json:"name"`
	State      string             `json:"state"` // open, opening, dead, unreachable
	Backend    string             `json:"backend,omitempty"`
	Image      string             `json:"image,omitempty"`
	Type       string             `json:"type,omitempty"`
	Cipher     *blockdev.Cipher   `json:"cipher,omitempty"`
	Device     string             `json:"device,omitempty"`
	Link       string             `json:"link,omitempty"` // /dev/xtsctl/NAME, the device's stable name
	Loop       string             `json:"loop,omitempty"`
	Mountpoint string             `json:"mountpoint,omitempty"`
	FSType     string             `json:"fstype,omitempty"`
	ReadOnly   bool               `json:"read_only"`
	PID        int                `json:"pid,omitempty"`
	Opened     *time.Time         `json:"opened,omitempty"`
	Recovered  *blockdev.Recovery `json:"recovered,omitempty"`
	Upgraded   bool               `json:"upgraded,omitempty"`
	Stats      *blockdev.Stats    `json:"stats,omitempty"`
	DM         *blockdev.DMStatus `json:"dm,omitempty"`
}

func statusOfOpen(vs *blockdev.Status) statusJSON {
	st := &vs.State
	j := statusJSON{
		Name: vs.Name, State: vs.Condition, Backend: st.Backend, Image: st.Image, Type: st.Type,
		Device: st.Device, Link: st.Link, Loop: st.Loop, Mountpoint: st.Mountpoint, FSType: st.FSType, ReadOnly: st.ReadOnly,
		PID: st.PID, Recovered: st.Recovered, Upgraded: st.Upgraded, Stats: vs.Stats, DM: vs.DM,
	}
	if st.Cipher != (blockdev.Cipher{}) {
		j.Cipher = &st.Cipher
	}
	if !st.Opened.IsZero() {
		j.Opened = &st.Opened
	}
	return j
}
