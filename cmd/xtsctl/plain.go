package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/xtsctl/xtsctl/aesni"
	"github.com/xtsctl/xtsctl/blockdev"
	"github.com/xtsctl/xtsctl/inplace"
	"github.com/xtsctl/xtsctl/internal/bytesize"
	"github.com/xtsctl/xtsctl/internal/dmtable"
	"github.com/xtsctl/xtsctl/internal/secret"
	"github.com/xtsctl/xtsctl/sector"
	"github.com/xtsctl/xtsctl/volume"
)

// plainFlags are the options of cryptsetup's plain mode that xtsctl
// supports, with cryptsetup's names and units.
type plainFlags struct {
	keyFile      string
	sectorSize   int
	largeSectors bool
	offset       uint64
	skip         uint64
	fs           *pflag.FlagSet // to tell a given --sector-size from the default
}

// plainOnly lists the flags that make sense only with --type plain.
var plainOnly = []string{"key-file", "iv-large-sectors", "offset", "skip"}

func (pf *plainFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&pf.keyFile, "key-file", "", "plain: file holding the raw key, 32 bytes (XTS-AES-128) or 64 bytes (XTS-AES-256); LUKS: the passphrase is the whole file (cryptsetup --key-file)")
	pf.fs = fs
	// Default 0 so that help prints no single default: it depends on the
	// type (plainSectorSize, defaultVolumeSectorSize).
	fs.IntVar(&pf.sectorSize, "sector-size", 0, fmt.Sprintf("plain: sector (XTS data unit) size: 512, 1024, 2048 or 4096 (default %d)", plainSectorSize))
	fs.BoolVar(&pf.largeSectors, "iv-large-sectors", false, "plain: count tweaks in sectors of --sector-size instead of 512-byte units (dm-crypt iv_large_sectors)")
	fs.Uint64Var(&pf.offset, "offset", 0, "plain: start of the encrypted data in the image, in 512-byte units (cryptsetup --offset)")
	fs.Uint64Var(&pf.skip, "skip", 0, "plain: IV offset added to every tweak, in 512-byte units (cryptsetup --skip)")
}

// plainSectorSize is a plain image's sector size unless --sector-size is
// given: cryptsetup's default.
const plainSectorSize = 512

// params validates the flags and returns the plain-mode layout.
func (pf *plainFlags) params() (volume.Plain, error) {
	if pf.keyFile == "" {
		return volume.Plain{}, usageError(fmt.Errorf("--type plain needs --key-file"), "make a key with: head -c 64 /dev/urandom > KEYFILE; chmod 600 KEYFILE")
	}
	size := pf.sectorSize
	if !pf.fs.Changed("sector-size") {
		size = plainSectorSize
	}
	p := volume.Plain{
		Sector: sector.Params{Size: size, IVOffset: pf.skip},
		Offset: pf.offset,
	}
	if pf.largeSectors {
		p.Sector.IVMode = sector.Plain64LargeSectors
	}
	if err := p.Check(); err != nil {
		return volume.Plain{}, usageError(err)
	}
	return p, nil
}

// rejectFlags fails if any of names was given on the command line; used to
// refuse options that the chosen --type ignores instead of ignoring them.
func rejectFlags(cmd *cobra.Command, typ string, names []string) error {
	for _, n := range names {
		if cmd.Flags().Changed(n) {
			return usageError(fmt.Errorf("--%s does not apply to --type %s", n, typ), rejectHints[typ+" "+n]...)
		}
	}
	return nil
}

// rejectHints say what a flag of the other type is called here.
var rejectHints = map[string][]string{
	"volume key-file":       {"a volume is unlocked with a passphrase: --passphrase-file FILE, or the terminal (a plain image's key file is its key)"},
	"plain passphrase-file": {"a plain image takes its raw key: --key-file FILE (32 or 64 bytes)"},
}

// plainCodec reads the key file and returns the codec, which the caller
// wipes, and the key's size in bits.
func plainCodec(a *app, pf *plainFlags, p volume.Plain) (codec *sector.Codec, keyBits int, err error) {
	key, err := readKeyFile(a, pf.keyFile)
	if err != nil {
		return nil, 0, err
	}
	defer secret.Wipe(key)
	if err := p.Sector.Check(); err != nil {
		return nil, 0, usageError(err)
	}
	codec, err = sector.NewCodecKey(key, p.Sector)
	if err != nil {
		return nil, 0, withCode(exitKey, err)
	}
	a.verbosef("AES-XTS kernel for %d-byte sectors: %s", p.Sector.Size, aesni.Pick(p.Sector.Size))
	return codec, 8 * len(key), nil
}

// plainCipher describes a plain image's encryption.
func plainCipher(p volume.Plain, keyBits int) blockdev.Cipher {
	return blockdev.Cipher{
		Name: dmtable.DefaultCipher, KeyBits: keyBits, SectorSize: p.Sector.Size,
		IVLargeSectors: p.Sector.IVMode == sector.Plain64LargeSectors, IVOffset: p.Sector.IVOffset,
		DataOffset: int64(p.Offset) * 512,
	}
}

// convertPlain encrypts or decrypts (verb) inPath to outPath as
// cryptsetup's plain mode maps them (volume.EncryptPlain, DecryptPlain).
func convertPlain(a *app, pf *plainFlags, verb, inPath, outPath string, force bool) error {
	p, err := pf.params()
	if err != nil {
		return err
	}
	in, err := openStreamInput(a, inPath)
	if err != nil {
		return err
	}
	defer in.Close()
	size, run := in.Size, volume.EncryptPlain
	if verb == "encrypt" {
		if err := p.CheckPlaintext(inPath, in.Size); err != nil {
			return withCode(exitInput, err, fmt.Sprintf("pad it to a multiple of the sector size (truncate -s %d %s), or choose a smaller --sector-size", roundUp(in.Size, int64(p.Sector.Size)), inPath))
		}
	} else if size, err = p.DataSize(inPath, in.Size); err != nil {
		return withCode(exitInput, err)
	} else if in.File != nil && in.Info != nil && in.Info.Mode().IsRegular() {
		if err := inplace.CheckPlainImage(inPath); err != nil {
			return withCode(exitInput, err)
		}
	}
	codec, keyBits, err := plainCodec(a, pf, p)
	if err != nil {
		return err
	}
	defer codec.Wipe()
	if verb == "decrypt" {
		if err := p.SkipOffset(in); err != nil {
			return withCode(exitInput, fmt.Errorf("cannot read input: %w", err))
		}
		run = volume.DecryptPlain
	}
	out, err := createOutput(outPath, in, force)
	if err != nil {
		return err
	}
	update, done := newProgress(a, verb+"ing", size)
	n, err := run(a.ctx, out, in, size, p, codec, update)
	done()
	if err == nil && n == 0 { // an empty stream, refused as an empty file is
		err = &volume.ReadError{Err: fmt.Errorf("input %s is empty", in.Name)}
	}
	if err := finish(out, err); err != nil {
		return err
	}
	a.infof("%sed %s (%s, %d sectors) to %s: %s", verb, in.Name, bytesize.Human(n), n/int64(p.Sector.Size), out.FinalName(), plainCipher(p, keyBits))
	return nil
}

func roundUp(n, m int64) int64 { return (n + m - 1) / m * m }
