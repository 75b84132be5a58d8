package inplace

import (
	"errors"
	"fmt"

	"github.com/xtsctl/xtsctl/disk"
)

// A plain image carries no marker of its own: reading or writing it as a
// whole while an in-place run of it is unfinished would serve or write
// data half of which is the wrong way round. Every command that reads an
// image through the format layer asks this guard first.
func init() { disk.RegisterGuard(guardUnfinishedPlain) }

// guardUnfinishedPlain refuses a plain image file with the journal of an unfinished
// in-place run beside it (CheckPlainImage), naming the command that
// finishes the run.
func guardUnfinishedPlain(img *disk.Image, f disk.Format) error {
	if f.Info().Name != "plain" || img.File == nil {
		return nil
	}
	if fi, err := img.File.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil
	}
	err := CheckPlainImage(img.Path)
	var ue *UnfinishedError
	if !errors.As(err, &ue) {
		return err
	}
	if ue.Status == nil {
		return disk.WithKind(disk.KindInput, fmt.Errorf("%s: %w", img.Path, err), "if no in-place run of "+img.Path+" was interrupted, the file is not xtsctl's: move it away")
	}
	return disk.WithKind(disk.KindInput, fmt.Errorf("%s: %w", img.Path, err), "finish it first: "+ue.ResumeCommand(img.Path),
		"xtsctl info "+img.Path+" shows how far it got")
}

// ResumeCommand is the command that resumes the run found on image.
func (st *Found) ResumeCommand(image string) string {
	resume := fmt.Sprintf("xtsctl %s --in-place", st.Direction.Verb())
	if st.Kind == KindPlain {
		resume += " --type plain --key-file KEYFILE"
		if st.Journal != DefaultJournal(image) {
			resume += " --journal " + st.Journal
		}
		if st.SectorSize != 512 {
			resume += fmt.Sprintf(" --sector-size %d", st.SectorSize)
		}
		if st.LargeSectors {
			resume += " --iv-large-sectors"
		}
		if st.Skip != 0 {
			resume += fmt.Sprintf(" --skip %d", st.Skip)
		}
		if st.Offset != 0 {
			resume += fmt.Sprintf(" --offset %d", st.Offset)
		}
	}
	return resume + " " + image
}
