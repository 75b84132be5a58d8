package main

import (
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/pflag"
	"github.com/xtsctl/xtsctl/disk"
	"github.com/xtsctl/xtsctl/internal/bytesize"
	"github.com/xtsctl/xtsctl/volume"
)

// Shared by the volume commands: creation flags, passphrase flags, error
// mapping, descriptions; and encrypt/decrypt with --type volume.

// createFlags are the options of a new image (format, encrypt); each
// format says which it takes (disk.FormatInfo.Takes).
type createFlags struct {
	keyBits   int
	integrity string
	tagSize   int
	label     string
	uuid      string
	kdf       kdfFlags
	fs        *pflag.FlagSet
}

func (f *createFlags) register(fs *pflag.FlagSet) {
	f.fs = fs
	fs.IntVarP(&f.keyBits, "key-size", cryptsetupShort["key-size"], 512, "XTS key size in bits: 512 (XTS-AES-256) or 256 (XTS-AES-128), as cryptsetup counts")
	fs.StringVar(&f.integrity, "integrity", "blake2b", "volume: per-sector integrity tags: blake2b, or none")
	fs.IntVar(&f.tagSize, "tag-size", 32, "volume: bytes per integrity tag: 16 or 32")
	fs.StringVar(&f.label, "label", "", "a label stored in the header (volume: at most 64 bytes; LUKS2: 47)")
	fs.StringVar(&f.uuid, "uuid", "", "luks2: the new image's UUID (default: a random one)")
	f.kdf.register(fs)
}

// options fill o from the flags given.
func (f *createFlags) options(o *disk.CreateOptions) {
	changed := func(name string) bool { return f.fs.Changed(name) }
	if changed("key-size") {
		o.KeyBits = f.keyBits
	}
	if changed("integrity") {
		o.Integrity = f.integrity
	}
	if changed("tag-size") {
		o.TagSize = f.tagSize
	}
	o.Label, o.UUID = f.label, f.uuid
	if n, err := f.fs.GetInt("sector-size"); err == nil && changed("sector-size") {
		o.SectorSize = n
	}
}

// kdfFlags set the Argon2id costs of a new key slot.
type kdfFlags struct {
	time       time.Duration
	memory     string
	iterations uint32
}

func (f *kdfFlags) register(fs *pflag.FlagSet) {
	f.time = volume.DefaultKDFTime
	fs.VarP(msDuration{&f.time}, "kdf-time", cryptsetupShort["kdf-time"], "Argon2id: calibrate the passphrase hashing to take this long on this machine; a plain number counts milliseconds (cryptsetup's --iter-time)")
	fs.StringVar(&f.memory, "kdf-memory", "", "Argon2id memory, kept as given (only the passes are calibrated), e.g. 256M (default: calibrated, at most 1G or half the available RAM); a plain number counts KiB")
	fs.Uint32Var(&f.iterations, "kdf-iterations", 0, "Argon2id passes; skips the time calibration")
}

// testOnlyKDF replaces the calibration of a new key slot in tests, by
// format name (xtsctl_test.go, luks_test.go), so that commands without
// explicit costs do not spend seconds per slot.
var testOnlyKDF = map[string]disk.Argon2{}

// memoryKiB reads --kdf-memory (0: not given) and checks --kdf-time, for
// volumes and LUKS images alike.
func (f *kdfFlags) memoryKiB() (uint32, error) {
	var memKiB uint32
	if f.memory != "" {
		n, err := bytesize.ParseKiB(f.memory)
		if err != nil {
			return 0, usageError(fmt.Errorf("--kdf-memory: %w", err))
		}
		memKiB = n
	}
	if f.time <= 0 {
		return 0, usageError(fmt.Errorf("--kdf-time must be positive, not %v", f.time))
	}
	return memKiB, nil
}

// newKDF is what the flags ask of a new key slot of a format's image
// (disk.NewKDF); the format calibrates and bounds it.
func (f *kdfFlags) newKDF(a *app, format string) (disk.NewKDF, error) {
	memKiB, err := f.memoryKiB()
	if err != nil {
		return disk.NewKDF{}, err
	}
	k := disk.NewKDF{Time: f.time, MemoryKiB: memKiB, Iterations: f.iterations, Info: a.infof, Warn: a.warningf}
	if p, ok := testOnlyKDF[format]; ok {
		k.Fixed = &p
	}
	return k, nil
}

// registerUnlockFlags adds the flags of commands that unlock a volume.
func registerUnlockFlags(a *app, fs *pflag.FlagSet) {
	fs.BoolVar(&a.allowExpensiveKDF, "allow-expensive-kdf", false,
		"try key slots whose Argon2id costs exceed the limits (more memory than this machine can spare, or more than "+
			fmt.Sprintf("%d GiB×passes, or %d GiB×passes over all slots tried", volume.MaxKDFWork>>20, volume.MaxUnlockWork>>20)+"): they may take very long")
	fs.VarP((*slotValue)(&a.keySlot), "key-slot", "S", "try only key slot `N` (0-7; LUKS2 images: 0-31; cryptsetup's --key-slot)")
	fs.VarP((*triesValue)(&a.tries), "tries", "T", "ask for a wrong passphrase `N` times in all (only on the terminal; cryptsetup's --tries)")
	registerKeyWindow(a, fs)
}

// defaultTries is --tries unless given: cryptsetup's default.
const defaultTries = 3

// triesValue is --tries: at least one.
type triesValue int

func (t *triesValue) String() string { return strconv.Itoa(int(*t)) }

func (t *triesValue) Set(v string) error {
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return fmt.Errorf("%q is not a number of tries (1 or more)", v)
	}
	*t = triesValue(n)
	return nil
}

func (t *triesValue) Type() string { return "N" }

// warnAll prints the library's warnings about an image.
func warnAll(a *app, image string, warnings []string) {
	for _, w := range warnings {
		a.warningf("%s: %s", image, w)
	}
}

// printDigest prints the end-to-end digest of the plaintext, its
// BLAKE2b-512 (the hex digits b2sum prints), as the command's result.
func printDigest(a *app, digest []byte) {
	a.resultf("%s", hex.EncodeToString(digest))
}

// currentVerb is the command being run and whether it has --type, so that
// hints only suggest what the command has (set by the root command).
var currentVerb struct {
	name    string
	hasType bool
}

// slotValue is --key-slot: a slot number, or -1 (every slot) when unset.
type slotValue int

// maxKeySlotFlag bounds --key-slot: LUKS2's 32 keyslots.
const maxKeySlotFlag = 32

func (s *slotValue) String() string {
	if *s < 0 {
		return ""
	}
	return strconv.Itoa(int(*s))
}

func (s *slotValue) Set(v string) error {
	n, err := strconv.Atoi(v)
	// LUKS2 images have keyslots 0..31; volumes refuse those above
	// theirs where they are unlocked (notLUKS).
	if err != nil || n < 0 || n >= maxKeySlotFlag {
		return fmt.Errorf("key slot %q is not a number from 0 to %d", v, maxKeySlotFlag-1)
	}
	*s = slotValue(n)
	return nil
}

func (s *slotValue) Type() string { return "N" }
