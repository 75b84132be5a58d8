package main

// decrypt of LUKS images, and encrypt and format --type luks2: the data
// segment to and from a plaintext file.

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"github.com/xtsctl/xtsctl/internal/bytesize"
	"github.com/xtsctl/xtsctl/internal/safefile"
	"github.com/xtsctl/xtsctl/luks"
)

// luksDataOnly lists the flags of encrypt and decrypt that LUKS images do
// not take: the header records them.
var luksDataOnly = []string{"offset", "skip", "iv-large-sectors", "integrity", "tag-size", "recover"}

// luksFormatOptions reads the options of a new LUKS2 image from the flags
// of encrypt and format: --key-size, --sector-size (4096 unless given),
// --label, --uuid.
func luksFormatOptions(cmd *cobra.Command) (luks.FormatOptions, error) {
	if err := luksRejectFlags(cmd, luksDataOnly...); err != nil {
		return luks.FormatOptions{}, err
	}
	fs := cmd.Flags()
	var o luks.FormatOptions
	switch bits, _ := fs.GetInt("key-size"); bits {
	case 256, 512:
		o.KeySize = bits / 8
	default:
		return o, usageError(fmt.Errorf("unsupported --key-size %d (want 512 for XTS-AES-256 or 256 for XTS-AES-128)", bits))
	}
	ss, err := volumeSectorSize(cmd)
	if err != nil {
		return o, err
	}
	o.SectorSize = ss
	o.Label = flagString(cmd, "label")
	o.UUID = flagString(cmd, "uuid")
	o.DataOffset = luks.DefaultDataOffset // cryptsetup's layout, said here for the progress total
	o.DigestIterations = testOnlyLUKSDigest
	if err := o.Check(); err != nil {
		return o, usageError(err)
	}
	return o, nil
}

// luksCreate asks for the passphrase and makes out (size bytes) a LUKS2
// image whose data segment holds the plaintext of r (nil: zeros).
func luksCreate(a *app, cmd *cobra.Command, o luks.FormatOptions, out *safefile.Output, size int64, r io.Reader, image, what string) (*luks.Header, error) {
	pass, err := luksNewPassphrase(a, cmd, "key-file", "passphrase-file", image)
	if err != nil {
		return nil, err
	}
	defer clear(pass)
	if o.Keyslot.Argon2, err = luksKDF(a, cmd); err != nil {
		return nil, err
	}
	if err := out.Truncate(size); err != nil {
		return nil, withCode(exitOutput, fmt.Errorf("cannot write %s: %w", image, err))
	}
	// The bar starts with the encryption, after the keyslot's KDF.
	var update func(int64)
	done := func() {}
	defer func() { done() }()
	return luks.Create(a.ctx, out.File, size, pass, o, r, func(n int64) {
		if n == 0 {
			update, done = newProgress(a, what, size-int64(o.DataOffset))
		}
		if update != nil {
			update(n)
		}
	})
}

// luksEncrypt is encrypt --type luks2 (cmd_encrypt.go's hook): IN becomes
// the data segment of a new LUKS2 image OUT with cryptsetup's default
// layout.
func luksEncrypt(a *app, cmd *cobra.Command, typ, inPath, outPath string, force bool) error {
	if err := luksWriteType(typ); err != nil {
		return err
	}
	o, err := luksFormatOptions(cmd)
	if err != nil {
		return err
	}
	if inPath == "-" {
		return usageError(errors.New("encrypt --type luks2 reads IN from a file: the image's size comes from it"))
	}
	in, err := openInput(inPath)
	if err != nil {
		return err
	}
	defer in.Close()
	if in.Size%int64(o.SectorSize) != 0 {
		return withCode(exitInput, fmt.Errorf("input %s is %d bytes, not a whole number of %d-byte sectors", inPath, in.Size, o.SectorSize),
			fmt.Sprintf("pad it (truncate -s %d %s), or choose a smaller --sector-size", roundUp(in.Size, int64(o.SectorSize)), inPath))
	}
	out, err := createOutput(outPath, in, force)
	if err != nil {
		return err
	}
	if err := luksNeedFile(out); err != nil {
		return err
	}
	h, err := luksCreate(a, cmd, o, out, o.ImageSize(in.Size), in, outPath, "encrypting")
	if err := finish(out, err); err != nil {
		return luksError(outPath, err)
	}
	a.infof("encrypted %s (%s) to the LUKS2 image %s: %s, UUID %s, data at byte %d", inPath, bytesize.Human(in.Size), outPath, h.Summary(), h.UUID, h.Segment.Offset)
	return nil
}

// luksFormatType is format with a --type other than volume
// (cmd_format.go's hook): --type luks2 makes a new LUKS2 image holding
// size bytes of zeros. It prints the UUID.
func luksFormatType(a *app, cmd *cobra.Command, typ, image, sizeArg string, force bool) error {
	if !isLUKSType(typ) {
		return usageError(fmt.Errorf("unknown --type %q (want %s or luks2)", typ, typeVolume))
	}
	if err := luksWriteType(typ); err != nil {
		return err
	}
	size, err := bytesize.Parse(sizeArg)
	if err != nil {
		return usageError(fmt.Errorf("--size: %w", err))
	}
	o, err := luksFormatOptions(cmd)
	if err != nil {
		return err
	}
	if size <= 0 || size%int64(o.SectorSize) != 0 {
		return usageError(fmt.Errorf("--size %s is not a positive whole number of %d-byte sectors", sizeArg, o.SectorSize))
	}
	if o.ImageSize(size) < size {
		return usageError(fmt.Errorf("--size %s is too large", sizeArg))
	}
	out, err := createOutput(image, &safefile.Input{}, force)
	if err != nil {
		return err
	}
	if err := luksNeedFile(out); err != nil {
		return err
	}
	h, err := luksCreate(a, cmd, o, out, o.ImageSize(size), nil, image, "formatting")
	if err := finish(out, err); err != nil {
		return luksError(image, err)
	}
	a.resultf("%s", h.UUID)
	a.infof("formatted %s: %s of data (image %s), %s, data at byte %d", image, bytesize.Human(size), bytesize.Human(o.ImageSize(size)), h.Summary(), h.Segment.Offset)
	return nil
}

// luksWriteType checks the --type of a new image: LUKS2 is written, LUKS1
// only read.
func luksWriteType(typ string) error {
	if typ == "luks1" {
		return withCode(exitUsage, errors.New("unsupported --type luks1: xtsctl reads LUKS1 images but writes only LUKS2"), "use --type luks2")
	}
	return nil
}
