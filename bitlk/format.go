package bitlk

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/xtsctl/xtsctl/disk"
)

func init() { disk.Register(Format{}) }

// Name is the format's --type name.
const Name = "bitlk"

// Option names (the command line's --recovery and --protector).
const (
	OptRecovery  = "recovery"
	OptProtector = "protector"
)

// Format is BitLocker (and BitLocker To Go) as a format of the disk layer.
type Format struct{}

var _ disk.Format = Format{}

func (Format) Info() disk.FormatInfo {
	return disk.FormatInfo{
		Name:      Name,
		Aliases:   []string{"bitlocker"},
		Title:     "BitLocker",
		Signature: true,
		Options: []disk.Option{
			{Name: OptRecovery, Bool: true, Usage: "the passphrase is the 48-digit recovery password (one with its shape is recognised without this)"},
			{Name: OptProtector, Value: "GUID|TYPE", Usage: "the BitLocker protector to unlock with: its GUID, or password, recovery, startup-key, clear-key"},
		},
		KeyFile: "a startup key (.BEK file)",
	}
}

// Probe recognises the first sector of a BitLocker volume: boot code and
// -FVE-FS-, or BitLocker To Go's FAT-looking sector with BitLocker's
// information GUID. Windows Vista's volumes are recognised too, so that
// they are refused by name rather than taken for something else.
func (Format) Probe(r io.ReaderAt, size int64) bool {
	_, err := readBoot(r, size)
	return err == nil
}

// Open reads the boot sector and the three FVE metadata copies and keeps
// the first valid one. What xtsctl cannot serve (Vista's version 1, a
// volume being encrypted, an unknown method) opens all the same, for
// info; Check refuses it.
func (Format) Open(img *disk.Image, opt disk.Options) (disk.Header, error) {
	if img.HeaderFile != nil {
		return nil, disk.Errorf(disk.KindUsage, "BitLocker keeps its metadata inside the volume: a detached header (%s) is not used", img.HeaderPath)
	}
	boot, err := readBoot(img.File, img.Size)
	if errors.Is(err, errNotBitLocker) {
		return nil, disk.Errorf(disk.KindInput, "%s: %v: %w", img.Path, err, disk.ErrNotFormat)
	}
	if err != nil {
		return nil, disk.WithKind(disk.KindInput, fmt.Errorf("%s: %w", img.Path, err))
	}
	h := &Header{path: img.Path, size: img.Size, boot: boot, used: -1}
	if boot.version == 1 {
		return h, nil
	}
	var why []string
	for i := range boot.offsets {
		c := readCopy(img.File, img.Size, boot, i)
		h.copies = append(h.copies, c)
		if c.err != nil {
			why = append(why, fmt.Sprintf("copy %d at byte %d: %v", i, uint64(c.offset), c.err))
		} else if h.used < 0 {
			h.used = i
			h.meta = c.meta
		}
	}
	if h.used < 0 {
		return nil, disk.WithKind(disk.KindIntegrity, fmt.Errorf("%s: no valid BitLocker metadata (%s)", img.Path, strings.Join(why, "; ")))
	}
	return h, nil
}
