// Package plain is cryptsetup's plain mode (--type plain --cipher
// aes-xts-plain64) as a format of the format layer: no header, a raw key
// from a key file, the mapping given by options (cryptsetup's --offset,
// --skip, --sector-size, --iv-large-sectors).
package plain

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/xtsctl/xtsctl/disk"
	"github.com/xtsctl/xtsctl/sector"
	"github.com/xtsctl/xtsctl/volume"
)

func init() { disk.Register(Format) }

// FormatName is plain mode's --type name.
const FormatName = "plain"

// DefaultSectorSize is cryptsetup's plain-mode default.
const DefaultSectorSize = 512

// Format is cryptsetup's plain mode.
var Format disk.Format = plainFormat{}

// The options of plain mode, as cryptsetup names them. --sector-size is a
// common flag, passed in disk.Options as OptSectorSize.
const (
	OptOffset         = "offset"
	OptSkip           = "skip"
	OptIVLargeSectors = "iv-large-sectors"
	OptSectorSize     = "sector-size"
)

type plainFormat struct{}

func (plainFormat) Info() disk.FormatInfo {
	return disk.FormatInfo{
		Name: FormatName, Title: "a plain image (cryptsetup plain mode)", Signature: false,
		KeyFile: "the raw key, 32 bytes (XTS-AES-128) or 64 bytes (XTS-AES-256)",
		Options: []disk.Option{
			{Name: OptIVLargeSectors, Bool: true, Usage: "plain: count tweaks in sectors of --sector-size instead of 512-byte units (dm-crypt iv_large_sectors)"},
			{Name: OptOffset, Value: "N", Usage: "plain: start of the encrypted data in the image, in 512-byte units (cryptsetup --offset)"},
			{Name: OptSkip, Value: "N", Usage: "plain: IV offset added to every tweak, in 512-byte units (cryptsetup --skip)"},
		},
	}
}

// Probe is false: a plain image has no signature, so it is never guessed.
func (plainFormat) Probe(io.ReaderAt, int64) bool { return false }

// Params reads the mapping from the options.
func Params(opt disk.Options) (volume.Plain, error) {
	num := func(name string) (uint64, error) {
		v, ok := opt[name]
		if !ok {
			return 0, nil
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, disk.WithKind(disk.KindUsage, fmt.Errorf("--%s %q is not a number of 512-byte units", name, v))
		}
		return n, nil
	}
	ss := uint64(DefaultSectorSize)
	if _, ok := opt[OptSectorSize]; ok {
		n, err := num(OptSectorSize)
		if err != nil {
			return volume.Plain{}, disk.WithKind(disk.KindUsage, fmt.Errorf("--sector-size %q is not a number", opt[OptSectorSize]))
		}
		ss = n
	}
	offset, err := num(OptOffset)
	if err != nil {
		return volume.Plain{}, err
	}
	skip, err := num(OptSkip)
	if err != nil {
		return volume.Plain{}, err
	}
	if ss > sector.MaxSize {
		ss = 0 // Check names it
	}
	p := volume.Plain{Sector: sector.Params{Size: int(ss), IVOffset: skip}, Offset: offset}
	if opt.Bool(OptIVLargeSectors) {
		p.Sector.IVMode = sector.Plain64LargeSectors
	}
	if err := p.Check(); err != nil {
		return volume.Plain{}, disk.WithKind(disk.KindUsage, err)
	}
	return p, nil
}

func (plainFormat) Open(img *disk.Image, opt disk.Options) (disk.Header, error) {
	p, err := Params(opt)
	if err != nil {
		return nil, err
	}
	return &plainHeader{img: img, p: p}, nil
}

type plainHeader struct {
	img *disk.Image
	p   volume.Plain
}

func (h *plainHeader) Format() disk.Format { return Format }

// Mapping is the plain mapping the options gave.
func (h *plainHeader) Mapping() volume.Plain { return h.p }

func (h *plainHeader) Report(disk.ReportOptions) (*disk.Report, error) {
	return nil, disk.WithKind(disk.KindInput, fmt.Errorf("%s: a plain image has no header to show: %w", h.img.Path, disk.ErrUnsupported))
}

// Check: the data after the offset must be whole sectors, and the key
// comes from a key file.
func (h *plainHeader) Check(req *disk.Request) (*disk.Need, error) {
	if req.Slot >= 0 {
		return nil, disk.WithKind(disk.KindUsage, errors.New("--key-slot does not apply to --type plain: a plain image has no key slots"))
	}
	if req.TestOnly {
		return nil, disk.WithKind(disk.KindUsage, errors.New("--test-passphrase checks a volume's passphrase; a plain image has none"))
	}
	if h.img.File != nil {
		if _, err := h.p.DataSize(h.img.Path, h.img.Size); err != nil {
			return nil, disk.WithKind(disk.KindInput, err)
		}
	}
	return &disk.Need{Passphrase: disk.WantNone, KeyFile: disk.WantRequired}, nil
}

// Unlock takes the key file's content as the XTS key: plain mode cannot
// tell a wrong key from the right one.
func (h *plainHeader) Unlock(ctx context.Context, req *disk.Request, sec *disk.Secret) (*disk.Unlocked, error) {
	if len(sec.KeyFiles) != 1 {
		return nil, disk.WithKind(disk.KindUsage, errors.New("--type plain needs --key-file"), "make a key with: head -c 64 /dev/urandom > KEYFILE; chmod 600 KEYFILE")
	}
	key := sec.KeyFiles[0]
	if len(key) != 32 && len(key) != 64 {
		return nil, disk.WithKind(disk.KindKey, fmt.Errorf("key file holds %d bytes: an XTS key is 32 bytes (XTS-AES-128) or 64 bytes (XTS-AES-256)", len(key)))
	}
	l, err := h.Layout()
	if err != nil {
		return nil, err
	}
	l.KeyBits = 8 * len(key)
	return &disk.Unlocked{Format: FormatName, Key: append([]byte(nil), key...), Slot: -1, Layout: l}, nil
}

// Layout is the mapping the options give over the image: everything
// after the offset. Its key size is unknown until the key file is read.
func (h *plainHeader) Layout() (disk.Layout, error) {
	n, err := h.p.DataSize(h.img.Path, h.img.Size)
	if err != nil {
		return disk.Layout{}, disk.WithKind(disk.KindInput, err)
	}
	return disk.SingleExtent(h.p.OffsetBytes(), n, h.p.Sector, disk.XTSPlain64, 0), nil
}
