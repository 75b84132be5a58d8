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
	"github.com/xtsctl/xtsctl/internal/bytesize"
	"github.com/xtsctl/xtsctl/sector"
	"github.com/xtsctl/xtsctl/volume"
	"github.com/xtsctl/xtsctl/xts"
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
		Takes:        []string{"sector-size"},
		CreateTakes:  []string{"sector-size", "key-file", OptOffset, OptSkip, OptIVLargeSectors},
		WrongKeyHint: "a wrong key or wrong options (--sector-size, --offset, --skip, --iv-large-sectors) decrypt a plain image to noise: check them first",
		KeyFile:      "the raw key, 32 bytes (XTS-AES-128) or 64 bytes (XTS-AES-256)",
		KeyFileLimit: 64,
		KeyFileTooLarge: func(path string) error {
			return disk.WithKind(disk.KindKey, fmt.Errorf("key file %s holds more than 64 bytes; want exactly 32 (XTS-AES-128) or 64 (XTS-AES-256) raw bytes", path),
				"if the key is a part of the file, say which: --keyfile-offset BYTES --keyfile-size 64 (or 32)")
		},
		Options: []disk.Option{
			{Name: OptIVLargeSectors, Bool: true, Usage: "plain: count tweaks in sectors of --sector-size instead of 512-byte units (dm-crypt iv_large_sectors)"},
			{Name: OptOffset, Value: "N", Number: true, Usage: "plain: start of the encrypted data in the image, in 512-byte units (cryptsetup --offset)"},
			{Name: OptSkip, Value: "N", Number: true, Usage: "plain: IV offset added to every tweak, in 512-byte units (cryptsetup --skip)"},
		},
	}
}

// Probe is false: a plain image has no signature, so it is never guessed.
func (plainFormat) Probe(io.ReaderAt, int64) bool { return false }

// ParamsOf reads the mapping from the options.
func ParamsOf(opt disk.Options) (Mapping, error) {
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
	ss := DefaultSectorSize
	if v, ok := opt[OptSectorSize]; ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			return Mapping{}, disk.WithKind(disk.KindUsage, fmt.Errorf("--sector-size %q is not a number", v))
		}
		ss = n
	}
	offset, err := num(OptOffset)
	if err != nil {
		return Mapping{}, err
	}
	skip, err := num(OptSkip)
	if err != nil {
		return Mapping{}, err
	}
	p := Mapping{Sector: sector.Params{Size: ss, IVOffset: skip}, Offset: offset}
	if opt.Bool(OptIVLargeSectors) {
		p.Sector.IVMode = sector.Plain64LargeSectors
	}
	if err := p.Check(); err != nil {
		return Mapping{}, disk.WithKind(disk.KindUsage, err)
	}
	return p, nil
}

func (plainFormat) Open(img *disk.Image, opt disk.Options) (disk.Header, error) {
	p, err := ParamsOf(opt)
	if err != nil {
		return nil, err
	}
	return &plainHeader{img: img, p: p}, nil
}

type plainHeader struct {
	img *disk.Image
	p   Mapping
}

func (h *plainHeader) Format() disk.Format { return Format }

// Mapping is the plain mapping the options gave.
func (h *plainHeader) Mapping() Mapping { return h.p }

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

// CheckKey judges the key file's content as the XTS key (the xts package
// refuses equal halves), naming the file.
func CheckKey(key []byte, path string) error {
	if len(key) != 32 && len(key) != 64 {
		return disk.WithKind(disk.KindKey, fmt.Errorf("key file %s holds %d bytes; want exactly 32 (XTS-AES-128) or 64 (XTS-AES-256) raw bytes", path, len(key)),
			"make one with: head -c 64 /dev/urandom > KEYFILE")
	}
	c, err := xts.NewCipher(key)
	if errors.Is(err, xts.ErrEqualKeyHalves) {
		return disk.WithKind(disk.KindKey, fmt.Errorf("key file %s has two equal halves; XTS needs two independent AES keys", path))
	}
	if err != nil {
		return disk.WithKind(disk.KindKey, fmt.Errorf("key file %s: %w", path, err))
	}
	c.Wipe()
	return nil
}

// Unlock takes the key file's content as the XTS key: plain mode cannot
// tell a wrong key from the right one.
func (h *plainHeader) Unlock(ctx context.Context, req *disk.Request, sec *disk.Secret) (*disk.Unlocked, error) {
	if len(sec.KeyFiles) != 1 {
		return nil, disk.WithKind(disk.KindUsage, errors.New("--type plain needs --key-file"), "make a key with: head -c 64 /dev/urandom > KEYFILE; chmod 600 KEYFILE")
	}
	key, name := sec.KeyFiles[0], "(unnamed)"
	if len(sec.KeyFileNames) > 0 {
		name = sec.KeyFileNames[0]
	}
	if err := CheckKey(key, name); err != nil {
		return nil, err
	}
	u := &disk.Unlocked{Format: FormatName, Key: append([]byte(nil), key...), Slot: -1}
	if h.img.File == nil {
		// A stream: its length is known only at its end.
		u.Layout = disk.Layout{SectorSize: h.p.Sector.Size, Cipher: disk.XTSPlain64, KeyBits: 8 * len(key)}
		u.Unservable = "a stream cannot be served"
		return u, nil
	}
	l, err := h.Layout()
	if err != nil {
		clear(u.Key)
		return nil, err
	}
	l.KeyBits = 8 * len(key)
	u.Layout = l
	return u, nil
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

// Decrypt writes the plaintext of the image, which may be a stream read
// to its end (standard input, a pipe), as cryptsetup's plain mapping reads
// it.
func (h *plainHeader) Decrypt(ctx context.Context, u *disk.Unlocked, w io.Writer, opt disk.DecryptOptions) (*disk.DecryptResult, error) {
	var r io.Reader = h.img.Stream
	size := int64(-1)
	if h.img.File != nil {
		r = h.img.File
		var err error
		if size, err = h.p.DataSize(h.img.Path, h.img.Size); err != nil {
			return nil, disk.WithKind(disk.KindInput, err)
		}
	}
	if err := h.p.SkipOffset(r); err != nil {
		return nil, disk.WithKind(disk.KindInput, fmt.Errorf("cannot read input: %w", err))
	}
	if opt.Total != nil {
		opt.Total(size)
	}
	codec, err := sector.NewCodecKey(u.Key, h.p.Sector)
	if err != nil {
		return nil, disk.WithKind(disk.KindKey, err)
	}
	defer codec.Wipe()
	n, err := Decrypt(ctx, w, r, size, h.p, codec, opt.Progress)
	if err == nil && n == 0 { // an empty stream, refused as an empty file is
		err = &volume.ReadError{Err: fmt.Errorf("input %s is empty", h.img.Path)}
	}
	if err != nil {
		return nil, err
	}
	return &disk.DecryptResult{Bytes: n}, nil
}

// Summary describes a plain mapping for people, as cryptsetup's options
// set it: "aes-xts-plain64, 512-bit key, 4096-byte sectors,
// iv_large_sectors, skip 16, offset 8".
func Summary(p Mapping, keyBits int) string {
	s := fmt.Sprintf("%s, %d-bit key, %d-byte sectors", disk.XTSPlain64, keyBits, p.Sector.Size)
	if p.Sector.IVMode == sector.Plain64LargeSectors {
		s += ", iv_large_sectors"
	}
	if p.Sector.IVOffset != 0 {
		s += fmt.Sprintf(", skip %d", p.Sector.IVOffset)
	}
	if p.Offset != 0 {
		s += fmt.Sprintf(", offset %d", p.Offset)
	}
	return s
}

// PlanCreate checks the mapping of a new plain image; its key comes from
// a key file, and it streams: written in order, nothing after the data.
func (plainFormat) PlanCreate(o *disk.CreateOptions) (*disk.CreatePlan, error) {
	p, err := ParamsOf(o.Options)
	if err != nil {
		return nil, err
	}
	plan := &disk.CreatePlan{Options: o, SectorSize: p.Sector.Size, Plan: p, ImageSize: -1,
		Need: disk.Need{KeyFile: disk.WantRequired}}
	if o.DataSize >= 0 {
		plan.ImageSize = p.OffsetBytes() + o.DataSize
	}
	return plan, nil
}

// Create writes what the device holds after the plaintext was written
// through cryptsetup's plain mapping: the offset's zeros, then the
// ciphertext, as it comes (a stream is read to its end).
func (plainFormat) Create(ctx context.Context, plan *disk.CreatePlan, in *disk.CreateInput, out *disk.CreateOutput, sec *disk.Secret) (*disk.CreateResult, error) {
	p := plan.Plan.(Mapping)
	if len(sec.KeyFiles) != 1 {
		return nil, disk.WithKind(disk.KindUsage, errors.New("--type plain needs --key-file"))
	}
	name := "(unnamed)"
	if len(sec.KeyFileNames) > 0 {
		name = sec.KeyFileNames[0]
	}
	key := sec.KeyFiles[0]
	if err := CheckKey(key, name); err != nil {
		return nil, err
	}
	codec, err := sector.NewCodecKey(key, p.Sector)
	if err != nil {
		return nil, disk.WithKind(disk.KindKey, err)
	}
	defer codec.Wipe()
	size := plan.Options.DataSize
	if plan.Options.Total != nil {
		plan.Options.Total(size)
	}
	var r io.Reader = zeros{}
	if in != nil {
		r = in.R
	} else {
		r = io.LimitReader(r, size)
	}
	n, err := Encrypt(ctx, out.W, r, size, p, codec, plan.Options.Progress)
	if err == nil && n == 0 { // an empty stream, refused as an empty file is
		err = &volume.ReadError{Err: fmt.Errorf("input %s is empty", in.Name)}
	}
	if err != nil {
		return nil, err
	}
	return &disk.CreateResult{
		Sizes:   fmt.Sprintf("%s, %d sectors", bytesize.Human(n), n/int64(p.Sector.Size)),
		Summary: Summary(p, 8*len(key)), ImageSize: p.OffsetBytes() + n, DataBytes: n,
	}, nil
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
