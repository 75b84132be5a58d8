package inplace

import (
	"errors"
	"fmt"
	"io"

	"github.com/xtsctl/xtsctl/blake2b"
	"github.com/xtsctl/xtsctl/plain"
	"github.com/xtsctl/xtsctl/sector"
	"github.com/xtsctl/xtsctl/volume"
)

// Status describes an interrupted run as far as it can be told without its
// key (for info): the anchor, and how far the newest intact record says
// the run got, which only the key can confirm.
type Status struct {
	Kind      Kind
	Direction Direction
	Length    int64 // bytes of data
	Done      int64 // bytes converted, as the newest intact record says
	Recorded  bool  // an intact record was found (Done means something)
	// Started: the run had begun converting or could have (a volume's
	// header is marked); false for a run that stopped while starting,
	// which nothing was converted by.
	Started bool
	Journal bool // plain: journal mode (the data goes through the journal)
	// Finished: a plain run's journal says the run is over (its newest
	// intact record; only the key confirms it).
	Finished bool
	// Plain parameters, as cryptsetup names them.
	SectorSize   int
	LargeSectors bool
	Skip, Offset uint64
	// Sizes of the target before and after the run.
	OrigSize, FinalSize int64
}

// Percent is Done as a percentage of Length, for messages.
func (s *Status) Percent() string {
	if s == nil || s.Length == 0 {
		return "0%"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(s.Done)/float64(s.Length))
}

func statusOf(r io.ReaderAt, a *anchor, asum [32]byte) *Status {
	st := &Status{Kind: a.Kind, Direction: a.Direction, Length: a.Length, Journal: a.Mode == modeJournal,
		SectorSize: int(a.SectorSize), LargeSectors: a.IVMode == 1, Skip: a.IVOffset, Offset: a.Offset,
		OrigSize: a.OrigSize, FinalSize: a.FinalSize}
	buf := make([]byte, 2*blockSize)
	if readAt(r, buf, a.Records) != nil {
		return st
	}
	g := geometryOf(a)
	var best uint64
	for i := range 2 {
		b := buf[i*blockSize : (i+1)*blockSize]
		sum := blake2b.Sum256(b[:rChecksum])
		if string(b[:8]) != recordMagic || string(sum[:]) != string(b[rChecksum:]) ||
			string(b[rRunID:rRunID+16]) != string(a.RunID[:]) || string(b[rAnchorSum:rAnchorSum+32]) != string(asum[:]) {
			continue
		}
		seq, next := le64(b, rSequence), int64(le64(b, rNext))
		if next < 0 || next > g.zones() || st.Recorded && seq < best {
			continue
		}
		st.Recorded, best = true, seq
		st.Done = g.length - g.remaining(next)
		st.Finished = le32(b, rFlags)&recordFinished != 0 && a.Version >= 2 && a.Kind == KindPlain
	}
	return st
}

// Probe describes the interrupted in-place run of a volume on the target
// of size bytes (the anchor at its end), or returns nil if there is none.
func Probe(r io.ReaderAt, size int64) (*Status, error) {
	a, asum, err := readAnchor(r, size)
	if errors.Is(err, errNoAnchor) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	st := statusOf(r, a, asum)
	if hs := findHeader(r, size, a); hs != nil {
		f := hs.Header.Flags & volume.FlagsInPlace
		st.Started = a.Direction == Encrypt || f != 0
		if a.Direction == Encrypt && f == 0 {
			st.Done = st.Length // finished, tidying up
		}
	}
	return st, nil
}

// ProbeJournal describes the interrupted plain run whose journal is r.
func ProbeJournal(r io.ReaderAt) (*Status, error) {
	b := make([]byte, anchorSize)
	if err := readAt(r, b, 0); err != nil {
		return nil, err
	}
	a, asum, err := parseAnchor(b)
	if errors.Is(err, errNoAnchor) {
		return nil, errors.New("not an xtsctl in-place journal")
	}
	if err != nil {
		return nil, err
	}
	st := statusOf(r, a, asum)
	st.Started = true
	return st, nil
}

// sameParams: the plain run s describes has p's parameters.
func (s *Status) sameParams(p plain.Mapping) bool {
	return s.SectorSize == p.Sector.Size && s.LargeSectors == (p.Sector.IVMode == sector.Plain64LargeSectors) &&
		s.Skip == p.Sector.IVOffset && s.Offset == p.Offset
}

// params names the parameters of the plain run s describes, as the options
// that give them.
func (s *Status) params() string {
	want := fmt.Sprintf("--sector-size %d", s.SectorSize)
	if s.LargeSectors {
		want += " --iv-large-sectors"
	}
	return want + fmt.Sprintf(" --skip %d --offset %d", s.Skip, s.Offset)
}
