package volume

import (
	"context"
	"errors"
	"fmt"

	"github.com/xtsctl/xtsctl/disk"
)

// DiskError gives an error of this package its kind for the command line
// (disk.Error), names the image, and adds what the user can do.
func DiskError(image string, err error) error {
	if err == nil {
		return nil
	}
	var (
		de  *disk.Error
		ve  *VersionError
		fe  *FeatureError
		te  *TruncatedError
		hd  *HeadersDamagedError
		sd  *SlotsDamagedError
		tc  *SlotsTooCostlyError
		ie  *IntegrityError
		dm  *DigestMismatchError
		re  *ReadError
		we  *WriteError
		rse *RestoreError
		ipe *InPlaceError
		se  *SlotStateError
	)
	wrap := func(k disk.Kind, hints ...string) error {
		return disk.WithKind(k, fmt.Errorf("%s: %w", image, err), hints...)
	}
	switch {
	case errors.As(err, &de):
		return err
	case errors.Is(err, context.Canceled):
		return disk.WithKind(disk.KindInterrupted, fmt.Errorf("%s: %w", image, err))
	case errors.Is(err, ErrInUse):
		return wrap(disk.KindDevice, "it is open read-write (xtsctl status lists open volumes); close it first")
	case errors.Is(err, ErrNotVolume):
		return disk.NotFormat("%s is not an xtsctl volume (no volume header at its start or end)", image)
	case errors.As(err, &ipe):
		verb := "decrypt"
		if ipe.Encrypting {
			verb = "encrypt"
		}
		return wrap(disk.KindInput, fmt.Sprintf("run xtsctl %s --in-place %s again to finish it; xtsctl info %s shows how far it got", verb, image, image))
	case errors.As(err, &ve), errors.As(err, &fe):
		return wrap(disk.KindInput, "it was made by a newer xtsctl: use that version")
	case errors.As(err, &te):
		return wrap(disk.KindInput, "the image was cut short (an incomplete copy?); copy it again from its source")
	case errors.As(err, &hd):
		return wrap(disk.KindIntegrity, "restore a header backup: xtsctl header restore "+image+" BACKUP")
	case errors.Is(err, ErrWrongPassphrase):
		return disk.WithKind(disk.KindKey, fmt.Errorf("%s: %w", image, wrongSecret{err}))
	case errors.As(err, &tc) && tc.Slots[0].OverTotal():
		return wrap(disk.KindKey, fmt.Sprintf("--key-slot %d tries that slot alone; if you trust this image, --allow-expensive-kdf tries every slot (it may take very long)", tc.Slots[0].Slot))
	case errors.As(err, &tc):
		return wrap(disk.KindKey, "xtsctl made no such slot unless told to; if you trust this image, --allow-expensive-kdf tries it (it may take very long and much memory)")
	case errors.Is(err, ErrNoKeySlots):
		return wrap(disk.KindKey, "restore a header backup taken before the last passphrase was removed")
	case errors.As(err, &sd):
		return wrap(disk.KindIntegrity, "if you have a header backup: xtsctl header restore "+image+" BACKUP")
	case errors.Is(err, ErrHeaderMAC):
		return wrap(disk.KindIntegrity)
	case errors.As(err, &ie):
		return wrap(disk.KindIntegrity, "xtsctl verify "+image+" lists every bad sector")
	case errors.As(err, &dm):
		return wrap(disk.KindIntegrity)
	case errors.As(err, &rse) && rse.OtherVolume:
		return wrap(disk.KindUsage, "if you are sure, --force restores it all the same")
	case errors.As(err, &rse):
		return wrap(disk.KindUsage)
	case errors.As(err, &se) && se.InUse:
		return disk.WithKind(disk.KindUsage, fmt.Errorf("key slot %d of %s is in use", se.Slot, image), "choose a free one: xtsctl info "+image)
	case errors.As(err, &se):
		return disk.WithKind(disk.KindUsage, fmt.Errorf("key slot %d of %s is empty", se.Slot, image), "xtsctl info "+image+" lists the slots in use")
	case errors.Is(err, ErrSlotsFull):
		return wrap(disk.KindUsage, "remove one first: xtsctl passphrase remove "+image)
	case errors.As(err, &re):
		return disk.WithKind(disk.KindInput, err)
	case errors.As(err, &we):
		return disk.WithKind(disk.KindOutput, err)
	}
	return wrap(disk.KindFailure)
}

// wrongSecret keeps the volume's own message for a wrong passphrase while
// making it disk.ErrWrongSecret to callers that test for any format's.
type wrongSecret struct{ err error }

func (w wrongSecret) Error() string { return w.err.Error() }
func (w wrongSecret) Unwrap() []error {
	return []error{w.err, disk.ErrWrongSecret}
}
