package inplace

import (
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/xtsctl/xtsctl/disk"
	"github.com/xtsctl/xtsctl/internal/bytesize"
	"github.com/xtsctl/xtsctl/volume"
)

// RunDoc describes an interrupted in-place run in info --json.
type RunDoc struct {
	Kind       string  `json:"kind"`      // "volume" or "plain"
	Direction  string  `json:"direction"` // "encrypt" or "decrypt"
	DataLength int64   `json:"data_length"`
	Done       int64   `json:"done"`
	Percent    float64 `json:"percent"`
	// Recorded: an intact record says Done; not authenticated without
	// the key.
	Recorded bool `json:"recorded"`
	// Started: false for a run that stopped while starting (nothing was
	// converted).
	Started bool `json:"started"`
	// Finished: a plain run's journal says it finished (which only the
	// key authenticates); Resume is then "".
	Finished bool   `json:"finished,omitempty"`
	Journal  string `json:"journal,omitempty"`
	Resume   string `json:"resume"`
}

// Report is what info shows of an interrupted in-place run of image (r,
// size bytes): a volume's, whose run area is at its end, or a plain
// run's, found by its journal (journal, or "" for the default beside an
// image file, which regular says image is); the volume's header too,
// where it can be read. It returns nil when there is no run.
func Report(r io.ReaderAt, size int64, image, journal string, regular bool) (*disk.Report, error) {
	st, err := FindRun(r, size, image, journal, regular)
	switch {
	case errors.Is(err, ErrJournalInTarget):
		return nil, disk.WithKind(disk.KindUsage, fmt.Errorf("%s is a volume being converted in place: its journal is in it, --journal does not apply", image))
	case err != nil:
		return nil, disk.WithKind(disk.KindInput, err)
	case st == nil:
		return nil, nil
	}
	resume := st.ResumeCommand(image)
	if st.Finished {
		resume = ""
	}
	j := &RunDoc{Kind: st.Kind.String(), Direction: st.Direction.Verb(), DataLength: st.Length, Done: st.Done,
		Recorded: st.Recorded, Started: st.Started, Finished: st.Finished, Journal: st.Journal, Resume: resume}
	if st.Length > 0 {
		j.Percent = math.Round(1000*float64(st.Done)/float64(st.Length)) / 10
	}
	rep := &disk.Report{}
	if hs := st.Headers; hs != nil {
		// A volume's header, where it can be read, says the rest.
		v := volume.Info(image, size, hs, st.State)
		// The run moves the data over the primary copy and the state
		// area: say so rather than call them damaged.
		for i := range v.HeaderCopies {
			if c := &v.HeaderCopies[i]; c.Name == "primary" && !c.OK {
				c.Error = "its place holds data during the in-place " + st.Direction.String()
			}
		}
		if st.Direction == Encrypt && hs.Header.Flags&volume.FlagDigest != 0 {
			v.Digest = "recorded"
		}
		v.InPlace = j
		rep.Doc, rep.Lines = v, v.Lines()
	} else {
		rep.Doc = struct {
			Image   string  `json:"image"`
			Format  string  `json:"format"`
			InPlace *RunDoc `json:"in_place"`
		}{image, map[Kind]string{KindPlain: "plain", KindVolume: "xtsctl-volume"}[st.Kind], j}
		rep.Add(0, "image", fmt.Sprintf("%s (%d bytes)", image, size))
	}
	what := "an xtsctl volume"
	if st.Kind == KindPlain {
		what = "plain (cryptsetup plain mode)"
	}
	progress := fmt.Sprintf("%s of %s (%.1f%%) converted, as its last record says (which only the key authenticates)", bytesize.Human(st.Done), bytesize.Human(st.Length), j.Percent)
	switch {
	case st.Finished:
		rep.Add(0, "in-place run", fmt.Sprintf("%s %s, finished, as its journal says (which only the key authenticates): running it again converts nothing", what, st.Direction))
		rep.Add(0, "journal", st.Journal)
		return rep, nil
	case !st.Started:
		progress = "stopped while starting: nothing was converted"
	case !st.Recorded:
		progress = "how far it got is unknown (no intact record)"
	}
	rep.Add(0, "in-place run", fmt.Sprintf("%s %s, interrupted: %s", what, st.Direction, progress))
	if st.Journal != "" {
		rep.Add(0, "journal", st.Journal)
	}
	rep.Add(0, "resume with", resume)
	return rep, nil
}
