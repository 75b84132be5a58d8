package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/xtsctl/xtsctl/disk"
	"github.com/xtsctl/xtsctl/internal/bytesize"
	"github.com/xtsctl/xtsctl/plain"
	"github.com/xtsctl/xtsctl/volume"
)

func init() {
	registerCommand(newEncryptCmd)
	registerCommand(newDecryptCmd)
}

// digestFlag is --digest of encrypt and decrypt: whether a volume's
// plaintext is hashed end to end.
type digestFlag string

const (
	digestBLAKE2b = "blake2b"
	digestNone    = "none"
)

func (d *digestFlag) register(fs *pflag.FlagSet, usage string) {
	fs.StringVar((*string)(d), "digest", digestBLAKE2b, usage)
}

// enabled validates --digest and says whether to compute the digest.
func (d digestFlag) enabled() (bool, error) {
	switch d {
	case digestBLAKE2b:
		return true, nil
	case digestNone:
		return false, nil
	}
	return false, usageError(fmt.Errorf("unknown --digest %q (want %s or %s)", string(d), digestBLAKE2b, digestNone))
}

// encryptFlags are encrypt's flags.
type encryptFlags struct {
	img    imageFlags
	cf     createFlags
	force  bool
	digest digestFlag
	ip     inPlaceFlags
}

func newEncryptCmd(a *app) *cobra.Command {
	var f encryptFlags
	cmd := &cobra.Command{
		Annotations: map[string]string{takesPlain: "yes"},
		Use:         "encrypt IN OUT | encrypt --in-place TARGET",
		Short:       "Encrypt a plaintext disk image",
		Long: `Encrypt the plaintext image IN into OUT.

OUT is written as an unnamed file in its directory, synced, then linked
in, so it appears only when complete and a killed run leaves nothing; IN
is never modified.

By default OUT is an xtsctl volume (docs/FORMAT.md): a header, a key slot
for the passphrase (asked twice on the terminal, or --passphrase-file), the
data encrypted as dm-crypt's aes-xts-plain64, and a keyed BLAKE2b tag per
sector (--integrity none to leave them out). encrypt prints the end-to-end
digest of IN, its BLAKE2b-512 (the hex digits b2sum prints for IN); the
volume records it, encrypted, and decrypt and verify check it. The digest
is one sequential pass over IN, which bounds encrypt's speed on a fast
disk: --digest none leaves it out (the tags still cover every sector; info
says the volume has no digest). Passphrase hashing (Argon2id) is
calibrated to take --kdf-time on this machine.

With --type luks2, OUT is a LUKS2 image as cryptsetup luksFormat lays it
out (its passphrase asked twice, or the whole of --key-file), which
cryptsetup opens.

With --type plain, OUT is byte for byte what the device would hold after
writing IN through
  cryptsetup open --type plain --cipher aes-xts-plain64 --key-file KEY \
      --key-size 512 (or 256 for a 32-byte key) [--sector-size N]
      [--iv-large-sectors] [--offset N] [--skip N]
so the kernel's dm-crypt opens it with the same options.

With --in-place, TARGET (an image file or a block device) is encrypted
itself, with the same result: no second copy is needed. The run is
resumable and crash-safe: if it is interrupted (killed, a crash, a power
loss), run the same command again and it resumes where it stopped; info
shows how far it got. A volume needs room after the data for its
metadata: an image file grows; a block device must have it free at its end
(--reduce-device-size). A plain run keeps a journal file beside an image,
or where --journal says (required for a block device). docs/INPLACE.md
says how.`,
		Example: `  xtsctl encrypt disk.img disk.vol
  xtsctl encrypt --passphrase-file pass.txt --sector-size 512 --tag-size 16 disk.img disk.vol
  xtsctl encrypt --type luks2 disk.img disk.luks
  head -c 64 /dev/urandom > disk.key && chmod 600 disk.key
  xtsctl encrypt --type plain --key-file disk.key disk.img disk.enc
  xtsctl encrypt --type plain --key-file disk.key --sector-size 4096 disk.img disk.enc
  xtsctl encrypt --in-place disk.img
  xtsctl encrypt --in-place --reduce-device-size 64M /dev/sdb1
  xtsctl encrypt --in-place --type plain --key-file disk.key --journal /root/sdb1.journal /dev/sdb1`,
		Args: inPlaceArgs(&f.ip, "IN", "OUT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			withDigest, err := f.digest.enabled()
			if err != nil {
				return err
			}
			if f.ip.on {
				return inPlace(a, &f.img, inPlaceJob{target: args[0], encrypt: true, force: f.force, digest: withDigest, ip: &f.ip, cf: &f.cf})
			}
			return createImage(a, &f.img, &f.cf, createJob{in: args[0], out: args[1], force: f.force, digest: withDigest})
		},
	}
	fs := cmd.Flags()
	f.img.register(a, cmd, imgType|imgKeyFile|imgPassFile|imgOptions)
	fs.Lookup("type").Usage = "output format: " + creatorNames() + " (default volume)"
	fs.Lookup("passphrase-file").Usage = "read the new passphrase from `FILE` (one trailing newline is removed) instead of the terminal"
	registerKeyWindow(a, fs)
	fs.BoolVarP(&f.force, "force", "f", false, "overwrite OUT if it exists; in place: convert TARGET even if it carries another format's header, or (--type plain) looks converted already")
	fs.Int("sector-size", 0, fmt.Sprintf("sector (XTS data unit) size: 512, 1024, 2048 or 4096 (default %d for --type plain, %d for a volume, or what the filesystem in IN allows if less)", plain.DefaultSectorSize, volume.DefaultSectorSize))
	f.cf.register(fs)
	f.digest.register(fs, "volume: end-to-end digest of IN, recorded in the volume and printed: blake2b (BLAKE2b-512, as b2sum), or none")
	registerProgressFlag(a, fs)
	f.ip.register(fs, true)
	return cmd
}

// decryptFlags are decrypt's flags.
type decryptFlags struct {
	img    imageFlags
	force  bool
	digest digestFlag
	ip     inPlaceFlags
}

func newDecryptCmd(a *app) *cobra.Command {
	var f decryptFlags
	cmd := &cobra.Command{
		Annotations: map[string]string{takesPlain: "yes"},
		Use:         "decrypt IN OUT | decrypt --in-place TARGET",
		Short:       "Decrypt an encrypted disk image",
		Long: `Decrypt the encrypted image IN into the plaintext image OUT.

OUT is written as an unnamed file in its directory, synced, then linked
in, so it appears only when complete and a killed run leaves nothing; IN
is never modified.

The format of IN is recognised by its header (an xtsctl volume, LUKS1 or
LUKS2, ...), or named with --type (plain, or formats without a header in
clear such as tcrypt). An xtsctl volume is unlocked with its passphrase;
every sector's tag is checked before it is decrypted (a bad one stops
decrypt, and OUT is not written) and the end-to-end digest at the end.
decrypt prints the digest of OUT (its BLAKE2b-512, as b2sum prints it),
which equals the one encrypt printed. --digest none skips the digest (the
tags are still checked): faster where the disk is, with nothing printed on
stdout.

With --type plain, IN is read as a cryptsetup plain-mode aes-xts-plain64
device (the same options as cryptsetup open: --sector-size,
--iv-large-sectors, --offset, --skip).

With --in-place, TARGET itself is decrypted: afterwards it holds the
plaintext from its start (an image file shrinks to it; on a block device
what followed it is zeroed). For a volume every sector's tag is checked
before anything is written. Resumable like encrypt --in-place: run the
same command again after an interruption.`,
		Example: `  xtsctl decrypt disk.vol disk.img
  xtsctl decrypt --key-file pass disk.luks disk.img
  xtsctl decrypt --type plain --key-file disk.key disk.enc disk.img
  xtsctl decrypt --in-place disk.vol`,
		Args: inPlaceArgs(&f.ip, "IN", "OUT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			withDigest, err := f.digest.enabled()
			if err != nil {
				return err
			}
			if f.ip.on {
				return inPlace(a, &f.img, inPlaceJob{target: args[0], force: f.force, digest: withDigest, ip: &f.ip})
			}
			return decryptImage(a, &f, args[0], args[1], withDigest)
		},
	}
	fs := cmd.Flags()
	f.img.register(a, cmd, imgAll)
	fs.BoolVarP(&f.force, "force", "f", false, "overwrite OUT if it exists; read IN as --type says even if it carries another format's header")
	fs.Int("sector-size", 0, fmt.Sprintf("plain: sector (XTS data unit) size: 512, 1024, 2048 or 4096 (default %d)", plain.DefaultSectorSize))
	f.digest.register(fs, "volume: check the end-to-end digest and print OUT's: blake2b, or none (every tag is still checked)")
	registerProgressFlag(a, fs)
	f.ip.register(fs, false)
	return cmd
}

// digestMismatchHints say, after every tag matched but the digest did
// not, where to look and what --digest none would do.
func digestMismatchHints(image string) []string {
	return []string{
		"every sector's tag matched, yet the data is not what was encrypted: xtsctl verify " + image + " checks the headers, every tag and the digest, and writes nothing",
		"--digest none decrypts without the end-to-end digest, checking only each sector's tag: that gets the data out as it is now, not as encrypt recorded it",
	}
}

// decryptImage writes the plaintext of the image at inPath to outPath.
func decryptImage(a *app, f *decryptFlags, inPath, outPath string, withDigest bool) error {
	o, err := openImageOrStream(a, &f.img, inPath, f.force)
	if err != nil {
		return err
	}
	defer o.Close()
	headerWarnings(a, o)
	req := a.request(&f.img)
	req.ReadOnly = true
	// Refusals come before any prompt and before the output exists.
	need, err := check(&f.img, o, req)
	if err != nil {
		return err
	}
	out, err := o.output(a, outPath, f.force)
	if err != nil {
		return err
	}
	u, err := unlockChecked(a, &f.img, o, req, need)
	if err != nil {
		out.Abort()
		return err
	}
	defer u.Wipe()
	update, done := func(int64) {}, func(error) {}
	opt := disk.DecryptOptions{
		Digest: withDigest,
		Total:  func(n int64) { update, done = newProgress(a, "decrypting", n) },
		Progress: func(n int64) {
			if update != nil {
				update(n)
			}
		},
	}
	var res *disk.DecryptResult
	if d, ok := o.hdr.(disk.Decrypter); ok {
		res, err = d.Decrypt(a.ctx, u, out, opt)
	} else {
		res, err = disk.Decrypt(a.ctx, o.img.File, u, out, opt)
	}
	done(err)
	if err := finish(out, err); err != nil {
		var dm *volume.DigestMismatchError
		if errors.As(err, &dm) {
			return withCode(exitIntegrity, fmt.Errorf("%s: %w; %s", inPath, err, notWritten(out)), digestMismatchHints(inPath)...)
		}
		if disk.KindOf(err) == disk.KindIntegrity && !strings.Contains(err.Error(), inPath) {
			return withCode(exitIntegrity, fmt.Errorf("%s: %w; %s", inPath, err, notWritten(out)))
		}
		return err
	}
	switch {
	case res.Digest == nil:
	case out.Stream == os.Stdout:
		// Standard output holds the plaintext: the digest goes to stderr.
		a.infof("end-to-end digest (BLAKE2b-512): %x", res.Digest)
	default:
		printDigest(a, res.Digest)
	}
	checked := res.Checked
	if checked == "" {
		checked = u.Layout.Summary()
	}
	a.infof("decrypted %s (%s) to %s: %s", o.path, bytesize.Human(res.Bytes), out.FinalName(), checked)
	return nil
}
