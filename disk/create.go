package disk

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/xtsctl/xtsctl/internal/fsblock"
)

// A Creator is a Format that writes new images: from a plaintext
// (encrypt) or holding zeros (format).
type Creator interface {
	// PlanCreate checks what the new image asks for before anyone is
	// asked for a secret or anything is written, and says what it needs.
	PlanCreate(o *CreateOptions) (*CreatePlan, error)
	// Create writes the image to out, the plaintext read from in (nil:
	// zeros of o.DataSize), with the secret p.Need asked for.
	Create(ctx context.Context, p *CreatePlan, in *CreateInput, out *CreateOutput, sec *Secret) (*CreateResult, error)
}

// CreateOptions describe a new image, as the command line gave them.
type CreateOptions struct {
	// Name names the new image in messages.
	Name string
	// TypeName is the --type given ("luks2"): a format may write only
	// some of what it reads ("luks1" is read, not written).
	TypeName string
	// DataSize is the plaintext's size in bytes, -1 for a stream read to
	// its end (formats that stream only).
	DataSize   int64
	SectorSize int // 0: the format's default
	KeyBits    int // 0: the format's default
	Label      string
	UUID       string
	// Integrity ("blake2b", "none"; "" for the default) and TagSize
	// (0: the default) of formats with integrity tags.
	Integrity string
	TagSize   int
	// Digest records an end-to-end digest where the format keeps one.
	Digest bool
	// Options are the format's own options (plain: offset, skip, ...).
	Options Options
	// KDF are the costs asked for the new key slot.
	KDF NewKDF
	// Total and Progress follow the data written, as for DecryptOptions
	// (Total is told once the slow key derivation is done).
	Total    func(int64)
	Progress func(int64)
	// Warn receives warnings for the user.
	Warn func(format string, args ...any)
}

// A CreatePlan is what PlanCreate found: what Create will need, and the
// format's own plan.
type CreatePlan struct {
	Options *CreateOptions
	// Need is the secret to ask for: a new passphrase (asked twice), or a
	// key file.
	Need Need
	// SectorSize is the new image's sector size: the data must be whole
	// sectors of it.
	SectorSize int
	// ImageSize is the size of the image Create writes, -1 when it writes
	// a stream as the plaintext comes, 0 while the data does not fill
	// whole sectors.
	ImageSize int64
	// NeedsFile, when not empty, says why the image cannot be written to
	// a stream ("cannot take a volume: its header is written at its start
	// after the data, so it must be a file"); "" for a format written in
	// order, nothing after the data.
	NeedsFile string
	// Plan is the format's own.
	Plan any
}

// CreateInput is the plaintext of a new image.
type CreateInput struct {
	Name string
	R    io.Reader   // read in order
	RA   io.ReaderAt // the same, where it is a file (nil for a stream)
}

// CreateOutput is where a new image is written: a file, or a stream for
// a plan that allows one.
type CreateOutput struct {
	Name string
	File *os.File  // nil for a stream
	W    io.Writer // the stream, or File
}

// CreateResult says what Create wrote.
type CreateResult struct {
	// Digest is the plaintext's end-to-end digest, where recorded.
	Digest []byte
	UUID   string
	// Into names the new image's kind for people ("the volume ", "the
	// LUKS2 image "; "" for plain mode), Sizes the plaintext ("16.0 KiB",
	// "8.0 KiB, 16 sectors"), Summary the encryption, Where where the data
	// lies ("data at byte 16777216"; "" where it says nothing).
	Into, Sizes, Summary, Where string
	// Notes are further lines for the user.
	Notes []string
	// ImageSize and DataBytes are the image's size and the plaintext's.
	ImageSize, DataBytes int64
}

// FitSectorSize is the sector size of a new image whose plaintext (size
// bytes of r) will be served as a device: a device whose sectors are
// larger than the smallest I/O of the filesystem in it cannot mount it.
// explicit (0: none asked for) is refused if the filesystem could not be
// mounted from sectors that large; otherwise def, lowered to the largest
// size the filesystem allows, which note is told.
func FitSectorSize(image string, r io.ReaderAt, size int64, explicit, def int, note func(format string, args ...any)) (int, error) {
	fs, err := fsblock.Probe(r, size)
	if err != nil {
		return 0, WithKind(KindInput, fmt.Errorf("%s: %w", image, err))
	}
	ss, lowered, err := fsblock.ChooseSectorSize(fs, explicit, def)
	if err != nil {
		return 0, WithKind(KindUsage, fmt.Errorf("--sector-size %d is too large for %s: %w", explicit, image, err),
			fmt.Sprintf("give --sector-size %d, or leave it out (xtsctl then picks the largest the filesystem allows)", fs.IOSize))
	}
	if lowered && note != nil {
		note("%s holds %s: using %d-byte sectors (a device with %d-byte sectors could not mount it)", image, fs, ss, def)
	}
	return ss, nil
}
