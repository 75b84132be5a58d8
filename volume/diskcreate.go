package volume

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/xtsctl/xtsctl/disk"
	"github.com/xtsctl/xtsctl/internal/bytesize"
)

// DefaultSectorSize is a new volume's sector size unless one is chosen:
// 4096-byte sectors halve nothing of dm-crypt's speed and cut the tag
// area and the tag work by 8 compared with 512.
const DefaultSectorSize = 4096

// PlanCreate checks the options of a new volume (key size, integrity,
// label, sector size, the size of the data) before any passphrase is
// asked for.
func (volumeFormat) PlanCreate(o *disk.CreateOptions) (*disk.CreatePlan, error) {
	usage := func(format string, args ...any) error {
		return disk.WithKind(disk.KindUsage, fmt.Errorf(format, args...))
	}
	co := CreateOptions{SectorSize: o.SectorSize, Label: o.Label, NoDigest: !o.Digest}
	if co.SectorSize == 0 {
		co.SectorSize = DefaultSectorSize
	}
	switch o.KeyBits {
	case 0, 512:
		co.KeySize = 64
	case 256:
		co.KeySize = 32
	default:
		return nil, usage("unsupported --key-size %d (want 512 for XTS-AES-256 or 256 for XTS-AES-128)", o.KeyBits)
	}
	switch o.Integrity {
	case "", "blake2b":
		co.TagSize = o.TagSize
		if co.TagSize == 0 {
			co.TagSize = 32
		}
		if co.TagSize != 16 && co.TagSize != 32 {
			return nil, usage("unsupported --tag-size %d (want 16 or 32)", o.TagSize)
		}
	case "none":
		if o.TagSize != 0 {
			return nil, usage("--tag-size does not apply to --integrity none")
		}
	default:
		return nil, usage("unknown --integrity %q (want blake2b or none)", o.Integrity)
	}
	if len(o.Label) > MaxLabel {
		return nil, usage("--label is %d bytes, longer than %d", len(o.Label), MaxLabel)
	}
	if strings.IndexByte(o.Label, 0) >= 0 || !utf8.ValidString(o.Label) {
		return nil, usage("--label must be UTF-8 text without NUL bytes")
	}
	if o.UUID != "" {
		return nil, usage("--uuid applies to LUKS images only")
	}
	if o.DataSize < 0 {
		return nil, usage("this needs its input as a file or block device, not standard input")
	}
	if co.NoDigest && co.TagSize == 0 && o.Warn != nil {
		o.Warn("with --integrity none and --digest none nothing will detect a change to the data of %s", o.Name)
	}
	p := &disk.CreatePlan{Options: o, Need: disk.Need{Passphrase: disk.WantRequired, Confirm: true}, SectorSize: co.SectorSize, Plan: co,
		NeedsFile: "cannot take a volume: its header is written at its start after the data, so it must be a file"}
	if o.DataSize > 0 && o.DataSize%int64(co.SectorSize) == 0 {
		// The size must fit the format before anyone is asked for a
		// passphrase and seconds go on calibrating its hashing.
		l, err := NewLayout(o.DataSize, co.SectorSize, co.TagSize)
		if err != nil {
			return nil, disk.WithKind(disk.KindUsage, err)
		}
		p.ImageSize = l.Size
	}
	return p, nil
}

// Create writes the volume: the new passphrase's key slot, the data
// encrypted and tagged, the end-to-end digest of the plaintext.
func (volumeFormat) Create(ctx context.Context, p *disk.CreatePlan, in *disk.CreateInput, out *disk.CreateOutput, sec *disk.Secret) (*disk.CreateResult, error) {
	co := p.Plan.(CreateOptions)
	if out.File == nil {
		return nil, disk.WithKind(disk.KindUsage, fmt.Errorf("%s %s", out.Name, p.NeedsFile), "write the volume to a file; --type plain streams")
	}
	if len(sec.KeyFiles) > 0 {
		return nil, disk.WithKind(disk.KindUsage, errors.New("--key-file does not apply to --type volume"))
	}
	kdf, err := NewSlotKDF(p.Options.KDF)
	if err != nil {
		return nil, err
	}
	co.Passphrase, co.KDF = sec.Passphrase, kdf
	var r io.ReaderAt = zeros{}
	if in != nil {
		r = in.RA
	}
	size := p.Options.DataSize
	h, digest, err := Create(ctx, out.File, r, size, co, func(n int64) {
		// The data starts after the key slot's derivation: Total then,
		// so that the data's clock does not count the derivation.
		if n == 0 && p.Options.Total != nil {
			p.Options.Total(size)
		}
		if p.Options.Progress != nil {
			p.Options.Progress(n)
		}
	})
	if err != nil {
		return nil, DiskError(out.Name, err)
	}
	res := &disk.CreateResult{
		UUID: h.UUIDString(), Into: "the volume ", Sizes: bytesize.Human(size), ImageSize: h.Size, DataBytes: size,
		Summary: h.Summary(),
	}
	if !co.NoDigest {
		res.Digest = digest[:]
	} else {
		res.Notes = append(res.Notes, out.Name+" records no end-to-end digest (--digest none)")
	}
	return res, nil
}

// zeros reads as zeros: the plaintext of an empty volume (format).
type zeros struct{}

func (zeros) ReadAt(p []byte, _ int64) (int, error) {
	clear(p)
	return len(p), nil
}

// Summary describes the volume's encryption for people: "aes-xts-plain64,
// 512-bit key, 4096-byte sectors, blake2b 32-byte tags".
func (h *Header) Summary() string {
	s := fmt.Sprintf("%s, %d-bit key, %d-byte sectors", CipherName, 8*h.KeySize, h.SectorSize)
	if h.Integrity == IntegrityNone {
		return s + ", no integrity tags"
	}
	return s + fmt.Sprintf(", %s %d-byte tags", h.Integrity, h.TagSize)
}
