package luksimage

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/xtsctl/xtsctl/disk"
	"github.com/xtsctl/xtsctl/internal/bytesize"
	"github.com/xtsctl/xtsctl/luks"
)

// defaultSectorSize is a new LUKS2 image's sector size unless chosen, as
// for volumes (cryptsetup picks 4096 where the device allows it too).
const defaultSectorSize = 4096

// PlanCreate checks the options of a new LUKS2 image (cryptsetup's
// default layout) before any passphrase is asked for.
func (luksFormat) PlanCreate(o *disk.CreateOptions) (*disk.CreatePlan, error) {
	if o.TypeName == "luks1" {
		return nil, disk.WithKind(disk.KindUsage, errors.New("unsupported --type luks1: xtsctl reads LUKS1 images but writes only LUKS2"), "use --type luks2")
	}
	fo := luks.FormatOptions{SectorSize: o.SectorSize, Label: o.Label, UUID: o.UUID, DataOffset: luks.DefaultDataOffset}
	if fo.SectorSize == 0 {
		fo.SectorSize = defaultSectorSize
	}
	switch o.KeyBits {
	case 0, 512:
		fo.KeySize = 64
	case 256:
		fo.KeySize = 32
	default:
		return nil, disk.WithKind(disk.KindUsage, fmt.Errorf("unsupported --key-size %d (want 512 for XTS-AES-256 or 256 for XTS-AES-128)", o.KeyBits))
	}
	if err := fo.Check(); err != nil {
		return nil, disk.WithKind(disk.KindUsage, err)
	}
	if o.DataSize < 0 {
		return nil, disk.WithKind(disk.KindUsage, errors.New("encrypt --type luks2 reads IN from a file: the image's size comes from it"))
	}
	p := &disk.CreatePlan{Options: o, SectorSize: fo.SectorSize, Plan: fo,
		NeedsFile: "cannot take a LUKS image: it is written at offsets, its header last, so it must be a file",
		Need:      disk.Need{Passphrase: disk.WantRequired, KeyFile: disk.WantOptional, Confirm: true}}
	if o.DataSize > 0 && o.DataSize%int64(fo.SectorSize) == 0 {
		p.ImageSize = fo.ImageSize(o.DataSize) // below DataSize if it overflowed: the caller says so
	}
	return p, nil
}

// Create writes a LUKS2 image that cryptsetup opens: the header, the
// keyslot of the new passphrase (the whole of a key file, as cryptsetup
// takes one), the data segment encrypted from the plaintext.
func (luksFormat) Create(ctx context.Context, p *disk.CreatePlan, in *disk.CreateInput, out *disk.CreateOutput, sec *disk.Secret) (*disk.CreateResult, error) {
	fo := p.Plan.(luks.FormatOptions)
	if out.File == nil {
		return nil, disk.WithKind(disk.KindUsage, fmt.Errorf("%s %s", out.Name, p.NeedsFile))
	}
	pass, err := passphraseOf(func() (*disk.Secret, error) { return sec, nil })
	if err != nil {
		return nil, err
	}
	if fo.Keyslot.Argon2, err = NewKeyslotKDF(p.Options.KDF); err != nil {
		return nil, err
	}
	if err := out.File.Truncate(p.ImageSize); err != nil {
		return nil, disk.WithKind(disk.KindOutput, fmt.Errorf("cannot write %s: %w", out.Name, err))
	}
	var r io.Reader
	if in != nil {
		r = in.R
	}
	size := p.Options.DataSize
	h, err := luks.Create(ctx, out.File, p.ImageSize, pass, fo, r, func(n int64) {
		// The data starts after the keyslot's KDF.
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
	return &disk.CreateResult{
		UUID: h.UUID, Into: "the LUKS2 image ", Sizes: bytesize.Human(size), ImageSize: p.ImageSize, DataBytes: size,
		Summary: h.Summary(), Where: fmt.Sprintf("data at byte %d", h.Segment.Offset),
	}, nil
}
