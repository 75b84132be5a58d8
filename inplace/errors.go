package inplace

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/xtsctl/xtsctl/disk"
	"github.com/xtsctl/xtsctl/internal/bytesize"
	"github.com/xtsctl/xtsctl/volume"
)

// Error gives an error of this package its kind for the command line
// (disk.Error), names the target, and says what the user can do.
func Error(target string, err error) error {
	if err == nil {
		return nil
	}
	var (
		be  *BusyError
		fe  *FinishedError
		ce  *ConvertedError
		ne  *NeedRoomError
		me  *MismatchError
		dre *DirectionError
		ie  *InterruptedError
		re  *ReadError
		we  *WriteError
		dme *DigestMismatchError
		je  *JournalError
		nd  *NoDataError
		se  *SectorsError
		le  *LayoutError
		pe  *fs.PathError
	)
	wrap := func(k disk.Kind, hints ...string) error {
		return disk.WithKind(k, fmt.Errorf("%s: %w", target, err), hints...)
	}
	switch {
	case errors.Is(err, context.Canceled):
		return disk.WithKind(disk.KindInterrupted, fmt.Errorf("%s: interrupted: run the same command again to resume (xtsctl info %s shows how far it got)", target, target))
	case errors.As(err, &be):
		return wrap(disk.KindDevice, "unmount it, close it (xtsctl close NAME) or detach it (losetup -d) first; nothing was changed")
	case errors.Is(err, ErrReadOnly):
		return disk.WithKind(disk.KindOutput, fmt.Errorf("%s is read-only: nothing was changed", target))
	case errors.Is(err, ErrRoomOnImage):
		return disk.WithKind(disk.KindUsage, errors.New("--reduce-device-size applies to block devices: an image file grows by what it needs"))
	case errors.As(err, &ne):
		return wrap(disk.KindInput, fmt.Sprintf("a block device does not grow: shrink the filesystem on it so that its last %d bytes (%s) are free, then give --reduce-device-size %d; nothing was changed", ne.Need, bytesize.Human(ne.Need), ne.Need))
	case errors.Is(err, ErrWrongKey):
		return wrap(disk.KindKey, "give the key (or passphrase) the interrupted run was started with")
	case errors.Is(err, ErrNotThisTarget):
		return wrap(disk.KindInput, "resume the run on the target it was started on; nothing was changed")
	case errors.Is(err, ErrRolledBack):
		return wrap(disk.KindInput, "put back the newest copy of the journal (or of the image) if there is one; nothing was changed")
	case errors.As(err, &fe) && fe.OtherKey:
		return wrap(disk.KindKey, "give the key that run used; if "+target+" no longer holds what it left, move "+fe.Journal+" away first; nothing was changed")
	case errors.As(err, &fe):
		return wrap(disk.KindInput, "if "+target+" now holds other data to "+fe.Direction.Verb()+", move "+fe.Journal+" away first; nothing was changed")
	case errors.As(err, &ce):
		return wrap(disk.KindInput, fmt.Sprintf("nothing was changed; if you are sure it is not %sed, give --force", ce.Direction.Verb()))
	case errors.As(err, &me) && me.Finished:
		return wrap(disk.KindUsage, "give the options that run used (if "+target+" no longer holds what it left, move its journal away); nothing was changed")
	case errors.As(err, &me):
		return wrap(disk.KindUsage, "give the options the interrupted run was started with; nothing was changed")
	case errors.As(err, &dre):
		return wrap(disk.KindUsage, fmt.Sprintf("xtsctl info %s shows how far it got", target))
	case errors.As(err, &ie):
		return wrap(disk.KindUsage)
	case errors.Is(err, ErrAlreadyVolume):
		return wrap(disk.KindInput, "xtsctl info "+target+" describes it")
	case errors.Is(err, ErrJournalIsTarget):
		return disk.WithKind(disk.KindUsage, errors.New("--journal cannot be the target itself"))
	case errors.Is(err, ErrJournalRequired):
		return disk.WithKind(disk.KindUsage, fmt.Errorf("%s is a block device: a plain in-place run needs --journal FILE, a file on another device (it holds up to %s)", target, bytesize.Human(MaxJournalSize)),
			"the journal must survive what the device might not: keep it on another disk, and keep it until the run finishes")
	case errors.As(err, &je):
		return wrap(disk.KindInput, "if no in-place run of "+target+" was interrupted, the file is not xtsctl's: move it away")
	case errors.As(err, &nd):
		return disk.WithKind(disk.KindInput, fmt.Errorf("%s is %d bytes: nothing to convert after the offset of %d bytes", target, nd.Size, nd.Offset))
	case errors.As(err, &se) && se.Kind == KindPlain:
		return disk.WithKind(disk.KindInput, fmt.Errorf("%s holds %d bytes of data, not a whole number of %d-byte sectors", target, se.Length, se.SectorSize),
			"pad it to a multiple of the sector size, or choose a smaller --sector-size")
	case errors.As(err, &se):
		return disk.WithKind(disk.KindInput, fmt.Errorf("%s holds %d bytes of data, not a whole number of %d-byte sectors", target, se.Length, se.SectorSize),
			"choose a smaller --sector-size, or pad it to a multiple of the sector size")
	case errors.As(err, &le):
		return disk.WithKind(disk.KindUsage, le.Err)
	case errors.Is(err, ErrNotClean):
		return wrap(disk.KindInput)
	case errors.Is(err, ErrHeaderLost):
		return wrap(disk.KindIntegrity)
	case errors.As(err, &dme):
		return wrap(disk.KindIntegrity)
	case errors.As(err, &we):
		return wrap(disk.KindOutput, "the run can be resumed once the problem is fixed: run the same command again")
	case errors.As(err, &re):
		return wrap(disk.KindInput)
	case errors.As(err, &pe) && errors.Is(err, fs.ErrNotExist):
		return disk.WithKind(disk.KindInput, fmt.Errorf("%s does not exist", pe.Path))
	}
	return volume.DiskError(target, err)
}
