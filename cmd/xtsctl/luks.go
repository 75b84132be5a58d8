package main

// LUKS1 and LUKS2 images (package luks) on the same verbs as xtsctl
// volumes. A verb's RunE first asks wantsLUKS (encrypt and format: --type
// luks2) and runs the LUKS code of luks_*.go instead when the image is
// LUKS: recognised by its magic, never by a flag the user must remember.
// The LUKS code reads its flags by name through cmd.Flags(), so that it
// needs nothing from the verbs but the registrations addLUKSFlags makes.
// This file holds what the verbs share: detection, flags, passphrases,
// opening the header (in the image, or detached with --header), KDF
// limits, new keyslot costs and the mapping of errors to exit codes.

import (
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/xtsctl/xtsctl/internal/bytesize"
	"github.com/xtsctl/xtsctl/internal/keyfile"
	"github.com/xtsctl/xtsctl/internal/safefile"
	"github.com/xtsctl/xtsctl/luks"
	"github.com/xtsctl/xtsctl/luks/luksimage"
	"github.com/xtsctl/xtsctl/volume"
)

func isLUKSType(t string) bool { return t == "luks" || t == "luks1" || t == "luks2" }

// maxKeyFile bounds a --key-file read as a LUKS passphrase: cryptsetup's
// default --keyfile-size limit (8 MiB).
const maxKeyFile = 8 << 20

// hasLUKSHeader reports whether the file at path holds a LUKS header.
func hasLUKSHeader(path string) bool { return luksimage.IsLUKS(path) }

// addFlag registers a flag on fs unless the command has it already (the
// volume commands may come to register the same spelling).
func addFlag(fs *pflag.FlagSet, name string, add func(*pflag.FlagSet)) {
	if fs.Lookup(name) == nil {
		add(fs)
	}
}

// addKeySlotFlag registers --key-slot/-S, cryptsetup's spelling, where
// the command does not have it from registerUnlockFlags: the keyslot to
// unlock with, or (passphrase add) to add. Unset means any.
func addKeySlotFlag(fs *pflag.FlagSet) {
	addFlag(fs, "key-slot", func(fs *pflag.FlagSet) {
		s := slotValue(-1)
		fs.VarP(&s, "key-slot", "S", "LUKS: the keyslot `N` to unlock with (passphrase add: the keyslot to add); default: any")
	})
}

// LUKS flag sets, for addLUKSFlags.
const (
	luksHeaderFlag  = 1 << iota // --header
	luksKeySlotFlag             // --key-slot/-S
	luksKeyFileFlag             // --key-file
	luksNewKeyFlag              // --new-key-file
	luksCreateFlags             // --uuid; --type on format
	luksUnlockFlags = luksKeySlotFlag | luksKeyFileFlag
)

// addLUKSFlags registers the flags the LUKS code of a verb reads.
func addLUKSFlags(cmd *cobra.Command, which int) {
	fs := cmd.Flags()
	if which&luksHeaderFlag != 0 {
		addFlag(fs, "header", func(fs *pflag.FlagSet) {
			fs.String("header", "", "LUKS: read the header from `FILE` (a detached header, cryptsetup --header); IMAGE holds the data")
		})
	}
	if which&luksKeySlotFlag != 0 {
		addKeySlotFlag(fs)
	}
	if which&luksKeyFileFlag != 0 {
		addFlag(fs, "key-file", func(fs *pflag.FlagSet) {
			fs.String("key-file", "", "LUKS: the passphrase is the whole of `FILE` (cryptsetup --key-file: no newline removed, at most 8 MiB)")
		})
	}
	if which&luksNewKeyFlag != 0 {
		addFlag(fs, "new-key-file", func(fs *pflag.FlagSet) {
			fs.String("new-key-file", "", "LUKS: the new passphrase is the whole of `FILE` (no newline removed)")
		})
	}
	if which&luksCreateFlags != 0 {
		addFlag(fs, "uuid", func(fs *pflag.FlagSet) {
			fs.String("uuid", "", "luks2: the new image's UUID (default: a random one)")
		})
		addFlag(fs, "type", func(fs *pflag.FlagSet) {
			fs.String("type", typeVolume, "image format: volume or luks2 (LUKS2 as cryptsetup writes it)")
		})
	}
}

// notLUKS refuses the LUKS flags on an image that is not LUKS, rather
// than ignoring them, and keyslots beyond a volume's.
func notLUKS(cmd *cobra.Command) error {
	for _, n := range []string{"new-key-file", "uuid"} {
		if f := cmd.Flags().Lookup(n); f != nil && f.Changed {
			return usageError(fmt.Errorf("--%s applies to LUKS images only", n))
		}
	}
	if f := cmd.Flags().Lookup("key-slot"); f != nil && f.Changed {
		if n, err := strconv.Atoi(f.Value.String()); err == nil && n >= volume.MaxSlots {
			return usageError(fmt.Errorf("--key-slot %d: xtsctl volumes have key slots 0..%d (LUKS2 images have 0..31)", n, volume.MaxSlots-1))
		}
	}
	return nil
}

// flagString is the value of a string flag of cmd, "" if it has none.
func flagString(cmd *cobra.Command, name string) string {
	if f := cmd.Flags().Lookup(name); f != nil {
		return f.Value.String()
	}
	return ""
}

// luksRejectFlags refuses flags that do not apply to LUKS images, which
// record their parameters in the header.
func luksRejectFlags(cmd *cobra.Command, names ...string) error {
	for _, n := range names {
		if f := cmd.Flags().Lookup(n); f != nil && f.Changed {
			return usageError(fmt.Errorf("--%s does not apply to LUKS images: the header records what it sets", n))
		}
	}
	return nil
}

// luksPassphrase reads a LUKS passphrase: the whole of the file named by
// the key-file flag (cryptsetup's rule for key files: no newline is
// removed), or the file named by the passphrase-file flag (our rule: one
// trailing newline removed), or from the terminal. The caller wipes it.
func luksPassphrase(a *app, cmd *cobra.Command, keyFlag, passFlag, prompt string, confirm bool) ([]byte, error) {
	keyFile, passFile := flagString(cmd, keyFlag), flagString(cmd, passFlag)
	switch {
	case keyFile != "" && passFile != "":
		return nil, usageError(fmt.Errorf("--%s and --%s do not go together", keyFlag, passFlag),
			fmt.Sprintf("--%s takes the whole file as the passphrase, --%s drops one trailing newline", keyFlag, passFlag))
	case keyFile != "":
		// cryptsetup's --keyfile-offset and --keyfile-size select the
		// bytes of the key file that unlocks (or, for a new image, of the
		// new one), not of --new-key-file.
		var win keyfile.Window
		if keyFlag == "key-file" {
			win = a.keyWindow
		}
		return readLUKSKeyFile(a, keyFile, win)
	}
	return readPassphrase(a, passphraseRequest{file: passFile, flag: passFlag, prompt: prompt, confirm: confirm})
}

// readLUKSKeyFile reads a key file as cryptsetup does: all of it (or the
// bytes win selects) is the passphrase, up to 8 MiB.
func readLUKSKeyFile(a *app, path string, win keyfile.Window) ([]byte, error) {
	key, err := readSecret(a, path, keyfile.Options{Name: "key file", Limit: maxKeyFile, Window: win})
	switch {
	case errors.Is(err, keyfile.ErrTooLarge):
		return nil, withCode(exitKey, fmt.Errorf("key file %s is larger than %d MiB, the most cryptsetup reads from a key file", path, maxKeyFile>>20))
	case err != nil:
		return nil, err
	case len(key) == 0:
		return nil, withCode(exitKey, fmt.Errorf("key file %s is empty", path))
	}
	return key, nil
}

// luksError maps the luks package's errors to exit codes, naming the file.
func luksError(file string, err error) error {
	if err == nil {
		return nil
	}
	var (
		ce *cliError
		ue *luks.UnsupportedError
		se *luks.KeyslotStateError
		nu *luks.UnusableKeyslotsError
	)
	wrap := func(code int, hints ...string) error {
		return withCode(code, fmt.Errorf("%s: %w", file, err), hints...)
	}
	switch {
	case errors.As(err, &ce):
		return err
	case errors.As(err, &se) && se.InUse:
		return usageError(fmt.Errorf("%s: %w", file, err), "pick a free one, or leave --key-slot out")
	case errors.As(err, &se):
		return usageError(fmt.Errorf("%s: %w", file, err))
	case errors.Is(err, luks.ErrNoKeyslot):
		return withCode(exitKey, fmt.Errorf("%s has no keyslot: no passphrase opens it", file),
			"restore a header backup taken before the last keyslot was removed")
	case errors.As(err, &nu):
		return luksError(file, fmt.Errorf("no keyslot xtsctl can use: %w", errors.Join(nu.Errs...)))
	case errors.Is(err, luks.ErrNotLUKS):
		return withCode(exitInput, fmt.Errorf("%s is not a LUKS image (no LUKS header at its start, nor a LUKS2 secondary header)", file))
	case errors.Is(err, luks.ErrKDFCost):
		return wrap(exitKey, "the image sets these costs; if you trust it, --allow-expensive-kdf runs them (it may take very long and much memory)")
	case errors.Is(err, luks.ErrWrongPassphrase):
		return wrap(exitKey)
	case errors.As(err, &ue) && ue.Feature == luks.FeatureVersion && strings.HasPrefix(ue.Value, "1 "):
		return wrap(exitInput, "cryptsetup writes LUKS1 headers, or converts them: cryptsetup convert --type luks2 (back up the header first)")
	case errors.As(err, &ue) && ue.Feature == luks.FeatureReencryption:
		return wrap(exitInput)
	case errors.Is(err, luks.ErrUnsupported):
		return wrap(exitInput, "cryptsetup, with device-mapper, opens what xtsctl does not support")
	case errors.Is(err, luks.ErrCorrupt):
		return wrap(exitIntegrity, "if you have a header backup of it: xtsctl header restore --force IMAGE BACKUP")
	case errors.Is(err, luks.ErrLastKeyslot):
		return wrap(exitUsage, "add another passphrase first (xtsctl passphrase add), or use --force")
	case errors.Is(err, luks.ErrHeaderChanged):
		return wrap(exitFailure, "another program changed the header meanwhile; run the command again")
	case errors.Is(err, luks.ErrUUIDMismatch):
		return wrap(exitUsage, "a header backup goes back onto the volume it was taken from")
	case errors.Is(err, volume.ErrInUse):
		return wrap(exitDevice, "xtsctl status lists open images; close it first")
	}
	return wrap(exitFailure)
}

// luksNeedFile refuses a stream as a new LUKS image: it is written at
// offsets, header last.
func luksNeedFile(out *safefile.Output) error {
	if out.File != nil {
		return nil
	}
	out.Abort()
	return usageError(fmt.Errorf("%s cannot take a LUKS image: it is written at offsets, its header last, so it must be a file", out.FinalName()))
}

// testOnlyLUKSArgon2 and testOnlyLUKSDigest replace the calibration of new
// keyslots and of the volume key digest in tests (luks_test.go).
var (
	testOnlyLUKSArgon2 *luks.Argon2Params
	testOnlyLUKSDigest uint32
)

// luksKDF returns the Argon2id costs of a new LUKS2 keyslot from
// --kdf-time, --kdf-memory and --kdf-iterations, calibrated as
// cryptsetup does (at least 4 passes; less memory rather than fewer
// passes) and held to the bounds of new volume key slots: no more work
// than xtsctl unlocks unasked, and not below 32 MiB unless the memory was
// chosen.
func luksKDF(a *app, cmd *cobra.Command) (*luks.Argon2Params, error) {
	fs := cmd.Flags()
	var f kdfFlags
	f.time, _ = fs.GetDuration("kdf-time")
	f.iterations, _ = fs.GetUint32("kdf-iterations")
	f.memory = flagString(cmd, "kdf-memory")
	memKiB, err := f.memoryKiB()
	if err != nil {
		return nil, err
	}
	var p luks.Argon2Params
	switch {
	case f.iterations > 0:
		if f.iterations < 4 {
			return nil, usageError(fmt.Errorf("--kdf-iterations %d: LUKS2 Argon2 keyslots take at least 4 passes (cryptsetup refuses fewer)", f.iterations))
		}
		p = luks.Argon2Params{Time: f.iterations, MemoryKiB: memKiB, Threads: uint32(min(4, max(1, runtime.NumCPU())))}
		if p.MemoryKiB == 0 {
			p.MemoryKiB = volume.DefaultKDFMemory()
		}
	case testOnlyLUKSArgon2 != nil:
		return testOnlyLUKSArgon2, nil
	default:
		a.infof("calibrating the passphrase hashing (Argon2id) to take %v", f.time)
		p = luks.CalibrateArgon2id(f.time, memKiB)
	}
	if err := p.Check(); err != nil {
		return nil, usageError(err)
	}
	switch {
	case p.MemoryKiB > luks.DefaultMaxMemoryKiB || p.Time > luks.DefaultMaxTime:
		return nil, usageError(fmt.Errorf("Argon2id with %s × %d passes: LUKS2 allows at most 4 GiB and xtsctl runs at most %d passes", bytesize.Human(int64(p.MemoryKiB)<<10), p.Time, luks.DefaultMaxTime))
	case uint64(p.Time)*uint64(p.MemoryKiB) > luks.DefaultMaxWork:
		return nil, f.costError(p.MemoryKiB, p.Time, true, luks.DefaultMaxWork)
	case p.MemoryKiB < volume.MinKDFMemoryKiB && memKiB == 0:
		return nil, f.costError(p.MemoryKiB, p.Time, false, 0)
	}
	f.warnWeak(a, p.MemoryKiB, "image")
	return &p, nil
}

// luksNewPassphrase reads a new passphrase: --new-key-file (whole file),
// --new-passphrase-file, or the terminal, asked twice.
func luksNewPassphrase(a *app, cmd *cobra.Command, keyFlag, passFlag, image string) ([]byte, error) {
	return luksPassphrase(a, cmd, keyFlag, passFlag, "the new passphrase for "+image, true)
}
