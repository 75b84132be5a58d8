package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/xtsctl/xtsctl/blockdev"
	"github.com/xtsctl/xtsctl/disk"
	"github.com/xtsctl/xtsctl/plain"
	"github.com/xtsctl/xtsctl/volume"
)

func init() { registerCommand(newOpenCmd) }

func newOpenCmd(a *app) *cobra.Command {
	var f openFlags
	cmd := &cobra.Command{
		Annotations: map[string]string{takesPlain: "yes"},
		Use:         "open IMAGE NAME",
		Short:       "Unlock an image and serve it as a block device",
		Long: `Unlock IMAGE and serve its plaintext as a block device named NAME. The
device path is printed once the device is ready. With --mount, the
filesystem on it is mounted on DIR.

Two backends serve images:

  fuse  a background xtsctl process serves the decrypted data through FUSE
        as one file and attaches a loop device to it. For xtsctl volumes
        every sector's tag is checked on every read: a sector that fails
        reads as an I/O error (EIO), never as unverified data, and is
        logged and counted (xtsctl status); writes re-tag. A volume that
        was not closed cleanly (server killed, power lost) is checked
        first: the tags of the regions it was writing are compared with
        their data, and open names every sector that does not match.
        Those keep reading as I/O errors unless you open it again with
        --recover, which accepts what they hold (a crash leaves at most
        the sectors being written at that moment; any other sector was
        changed outside xtsctl). Needs /dev/fuse and loop devices.
  dm    the kernel's dm-crypt serves the image: a loop device on IMAGE and
        a crypt table on it make /dev/mapper/NAME, and no xtsctl process
        stays. dm-crypt knows nothing of integrity tags: a volume with
        tags opens read-only this way, with a warning (a read-write
        request included), and its reads are not verified.
        A volume without tags is recorded as being written (not closed
        cleanly, its digest stale) until close marks it clean. Needs
        device-mapper (the dm_mod and dm_crypt modules) and loop devices.

--backend auto (the default) picks dm when device-mapper is available and
the image suits it: plain images and volumes without integrity tags, with
--offset and --skip that dm-crypt can express. Volumes with integrity tags
always get fuse, which verifies every read; so does everything else when
device-mapper is missing.

Either backend keeps the image locked until close: while it is open
read-write, the volume commands (decrypt, verify, passphrase, ...) refuse
it; while it is open read-only, those that would write it do.

The format is recognised by its header (an xtsctl volume, LUKS1 or
LUKS2, ...) or named with --type. Volumes and LUKS images ask for their
passphrase on the terminal, or read it from --passphrase-file (LUKS:
--key-file, the whole file); plain images take --key-file.

'xtsctl close NAME' undoes it all; 'xtsctl status' lists open volumes.
Needs root.`,
		Example: `  xtsctl format --size 1G disk.vol
  xtsctl open disk.vol secret                 # prints the device, e.g. /dev/loop3
  mkfs.ext4 /dev/loop3
  xtsctl close secret
  xtsctl open --mount /mnt disk.vol secret
  xtsctl open --type plain --key-file disk.key --mount /mnt disk.enc other
  xtsctl open --backend dm --mount /mnt fast.vol fast  # a volume made with --integrity none`,
		Args: func(cmd *cobra.Command, args []string) error {
			if f.testPass {
				return argsNamed("IMAGE")(cmd, args)
			}
			return argsNamed("IMAGE", "NAME")(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.testPass {
				return testPassphrase(a, &f, args[0])
			}
			return openImage(a, &f, args[0], args[1])
		},
	}
	fs := cmd.Flags()
	fs.BoolVar(&f.testPass, "test-passphrase", false, "only check that the passphrase opens IMAGE (which key slot), and serve nothing; NAME is not needed")
	fs.StringVar(&f.req.Mount, "mount", "", "mount the filesystem on the device at `DIR`")
	fs.StringVar(&f.req.FSType, "fstype", "", "filesystem type for --mount (default: detected)")
	fs.BoolVarP(&f.req.ReadOnly, "read-only", "r", false, "serve and mount read-only; the image is never written (also --readonly)")
	fs.BoolVar(&f.req.Recover, "recover", false, "volume, after an unclean shutdown: re-tag the sectors whose tags do not match, accepting what they hold")
	fs.StringVar(&f.req.Backend, "backend", "auto", "how to serve: "+blockdev.BackendNames())
	fs.BoolVar(&f.force, "force", false, "serve IMAGE as --type says even if it carries another format's header")
	fs.Int("sector-size", 0, fmt.Sprintf("plain: sector (XTS data unit) size: 512, 1024, 2048 or 4096 (default %d)", plain.DefaultSectorSize))
	f.img.register(a, cmd, imgAll)
	return cmd
}

// openFlags are open's flags.
type openFlags struct {
	img      imageFlags
	req      blockdev.Request
	testPass bool
	force    bool
}

func openImage(a *app, f *openFlags, image, name string) error {
	req := &f.req
	if err := blockdev.CheckName(name); err != nil {
		return err
	}
	req.Name = name
	if req.Recover && req.ReadOnly {
		return usageError(errors.New("--recover rewrites tags: it needs a read-write open, not --read-only"))
	}
	if req.FSType != "" && req.Mount == "" {
		return usageError(errors.New("--fstype needs --mount"))
	}
	if req.Mount != "" {
		// Held from the check to the mount, which goes on this very
		// directory whatever happens to its path meanwhile.
		mp, err := blockdev.CheckMountpoint(req.Mount)
		if err != nil {
			return err
		}
		defer mp.Close()
		if mp.Occupied {
			a.warningf("mountpoint %s is not empty: what it holds is hidden while %s is mounted on it (until close)", req.Mount, name)
		}
		req.Mount, req.MountDir = mp.Path, mp
	}
	if err := f.img.checkType(); err != nil {
		return err
	}
	img, abs, err := blockdev.OpenImage(image)
	if err != nil {
		return err
	}
	defer img.Close()
	req.Image, req.Path = img, abs
	dimg, err := disk.OpenImageOn(img, image, f.img.header)
	if err != nil {
		return err
	}
	defer dimg.Close()
	o, err := openHeader(a, &f.img, dimg, defaultType, f.force)
	if err != nil {
		return err
	}
	headerWarnings(a, o)
	ureq := a.request(&f.img)
	ureq.ReadOnly = req.ReadOnly
	need, err := check(&f.img, o, ureq)
	if err != nil {
		return err
	}
	if err := blockdev.CheckBackend(req.Backend); err != nil {
		return err
	}
	// Before CheckOpen, which cleans up after a dead server of this
	// image: the wait needs that server's record.
	blockdev.WaitForDeadServer(img)
	// Everything that needs no key is checked before the prompt and the
	// key derivation: a NAME in use or an image open already is refused
	// at once, not after seconds of Argon2id.
	if err := blockdev.CheckOpen(a.ctx, req, a.blockdevOptions()); err != nil {
		return err
	}
	// The secret is read before taking the lock: a passphrase prompt
	// must not hold up other opens and closes. The unlock runs here, so
	// that a wrong passphrase is reported like everywhere else and the
	// terminal prompt happens in this process; the server gets what to
	// serve, the key with it.
	u, err := unlockChecked(a, &f.img, o, ureq, need)
	if err != nil {
		return err
	}
	defer u.Wipe()
	if u.SlotName != "" {
		a.infof("%s: unlocked with %s", image, u.SlotName)
	}
	req.Unlocked = u
	st, err := blockdev.Open(a.ctx, req, a.blockdevOptions())
	if err != nil {
		return err
	}
	if r := st.Recovered; r != nil {
		reportRecovery(a, r, image)
	}
	if st.Upgraded {
		a.infof("%s: upgraded to volume format version %d: its state area (clean or not, which regions are being written) is now authenticated", image, volume.Version)
	}
	a.resultf("%s", st.Device)
	dev := st.Device
	if st.Link != "" {
		dev += ", also " + st.Link
	}
	switch {
	case st.Mountpoint != "":
		a.infof("opened %s as %s: %s (%s) mounted on %s (%s backend)", image, name, dev, st.FSType, st.Mountpoint, st.Backend)
	default:
		a.infof("opened %s as %s: %s (%s backend)", image, name, dev, st.Backend)
	}
	return nil
}

// reportRecovery tells the user what open found after an unclean
// shutdown.
func reportRecovery(a *app, r *blockdev.Recovery, image string) {
	warning, hints := r.Warning(image)
	a.warningf("%s", warning)
	for _, h := range hints {
		a.hintf("%s", h)
	}
}

// testPassphrase unlocks image read-only and says which key slot the
// passphrase opens, like cryptsetup open --test-passphrase: exit 0 when it
// opens one, 4 when it does not. A header whose data xtsctl cannot serve
// is tested all the same, as cryptsetup tests it, and says so.
func testPassphrase(a *app, f *openFlags, image string) error {
	o, err := openImageFor(a, &f.img, image, disk.Inspect, defaultType, f.force)
	if err != nil {
		return err
	}
	defer o.Close()
	headerWarnings(a, o)
	req := a.request(&f.img)
	req.ReadOnly, req.TestOnly = true, true
	u, err := unlockImage(a, &f.img, o, req)
	if err != nil {
		return err
	}
	u.Wipe()
	a.infof("%s: the passphrase opens %s", image, u.SlotName)
	if u.Unservable != "" {
		a.warningf("%s: its data cannot be served: %s", image, u.Unservable)
	}
	return nil
}
