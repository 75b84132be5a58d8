package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"github.com/xtsctl/xtsctl/blockdev"
	"github.com/xtsctl/xtsctl/internal/secret"
	"github.com/xtsctl/xtsctl/volume"
)

func init() { registerCommand(newOpenCmd) }

func newOpenCmd(a *app) *cobra.Command {
	var (
		typ, backendName, passFile string
		testPass                   bool
		pf                         plainFlags
		req                        blockdev.Request
	)
	cmd := &cobra.Command{
		Use:   "open IMAGE NAME",
		Short: "Unlock an image and serve it as a block device",
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

Volumes ask for their passphrase on the terminal, or read it from
--passphrase-file; plain images take --key-file.

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
			if testPass {
				return argsNamed("IMAGE")(cmd, args)
			}
			return argsNamed("IMAGE", "NAME")(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if wantsLUKS(cmd, args[0]) {
				if err := luksRejectFlags(cmd, luksOpenOnly...); err != nil {
					return err
				}
				if testPass {
					return luksTestPassphrase(a, cmd, args[0])
				}
				return openImage(a, cmd, &pf, typeLUKS, backendName, passFile, args[0], args[1], &req)
			}
			if err := notLUKS(cmd); err != nil {
				return err
			}
			if err := checkType(typ); err != nil {
				return err
			}
			if testPass {
				if typ != typeVolume {
					return usageError(errors.New("--test-passphrase checks a volume's passphrase; a plain image has none"))
				}
				return testPassphrase(a, passFile, args[0])
			}
			if typ == typePlain {
				if err := rejectFlags(cmd, typ, []string{"passphrase-file", "recover"}); err != nil {
					return err
				}
			} else {
				// The volume's header records its sector size.
				if err := rejectFlags(cmd, typ, append(plainOnly, "sector-size")); err != nil {
					return err
				}
			}
			return openImage(a, cmd, &pf, typ, backendName, passFile, args[0], args[1], &req)
		},
	}
	f := cmd.Flags()
	f.StringVar(&typ, "type", typeVolume, "image format: volume or plain")
	f.BoolVar(&testPass, "test-passphrase", false, "only check that the passphrase opens IMAGE (which key slot), and serve nothing; NAME is not needed")
	f.StringVar(&req.Mount, "mount", "", "mount the filesystem on the device at `DIR`")
	f.StringVar(&req.FSType, "fstype", "", "filesystem type for --mount (default: detected)")
	f.BoolVarP(&req.ReadOnly, "read-only", "r", false, "serve and mount read-only; the image is never written (also --readonly)")
	f.BoolVar(&req.Recover, "recover", false, "volume, after an unclean shutdown: re-tag the sectors whose tags do not match, accepting what they hold")
	f.StringVar(&backendName, "backend", "auto", "how to serve: "+blockdev.BackendNames())
	f.StringVar(&passFile, "passphrase-file", "", "volume: read the passphrase from `FILE` (one trailing newline is removed) instead of the terminal")
	registerUnlockFlags(a, f)
	pf.register(f)
	addLUKSFlags(cmd, luksHeaderFlag|luksUnlockFlags)
	return cmd
}

func openImage(a *app, cmd *cobra.Command, pf *plainFlags, typ, backendName, passFile, image, name string, req *blockdev.Request) error {
	if err := blockdev.CheckName(name); err != nil {
		return fromBlockdev(err)
	}
	req.Name, req.Type, req.Backend = name, typ, backendName
	if req.Recover && req.ReadOnly {
		return usageError(errors.New("--recover rewrites tags: it needs a read-write open, not --read-only"))
	}
	if req.FSType != "" && req.Mount == "" {
		return usageError(errors.New("--fstype needs --mount"))
	}
	if req.Mount != "" {
		real, occupied, err := blockdev.CheckMountpoint(req.Mount)
		if err != nil {
			return fromBlockdev(err)
		}
		if occupied {
			a.warningf("mountpoint %s is not empty: what it holds is hidden while %s is mounted on it (until close)", req.Mount, name)
		}
		req.Mount = real
	}
	if typ == typePlain {
		p, err := pf.params()
		if err != nil {
			return err
		}
		req.Plain = p
	}

	abs, err := filepath.Abs(image)
	if err != nil {
		return withCode(exitInput, err)
	}
	// Every later access to the image goes through this one open file
	// (as /proc/self/fd/N, and handed to the server): a path swapped
	// after these checks cannot change what is unlocked and served.
	img, err := os.Open(abs)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return withCode(exitInput, fmt.Errorf("image %s does not exist", image))
	case err != nil:
		return withCode(exitInput, fmt.Errorf("cannot read image: %w", err))
	}
	defer img.Close()
	fi, err := img.Stat()
	switch {
	case err != nil:
		return withCode(exitInput, fmt.Errorf("cannot read image: %w", err))
	case fi.IsDir():
		return withCode(exitInput, fmt.Errorf("image %s is a directory", image))
	case !fi.Mode().IsRegular() && fi.Mode()&fs.ModeDevice == 0:
		return withCode(exitInput, fmt.Errorf("image %s is not a regular file or block device", image))
	}
	if typ == typePlain && fi.Mode().IsRegular() {
		if err := checkPlainImage(image); err != nil {
			return err
		}
	}
	req.Image, req.Path = img, abs
	viaFD := fmt.Sprintf("/proc/self/fd/%d", img.Fd())

	if err := blockdev.CheckBackend(backendName); err != nil {
		return fromBlockdev(err)
	}
	blockdev.WaitForDeadServer(img)

	// The secret is read before taking the lock: a passphrase prompt
	// must not hold up other opens and closes.
	if typ == typePlain {
		key, err := readKeyFile(a, pf.keyFile)
		if err != nil {
			return err
		}
		defer clear(key)
		req.Key = key
		req.Cipher = plainCipher(req.Plain, 8*len(key))
	} else if typ == typeLUKS {
		if err := luksOpenRequest(a, cmd, image, img, req); err != nil {
			return err
		}
		defer secret.Wipe(req.Key)
	} else {
		// Unlock here, so that a wrong passphrase is reported like
		// everywhere else and the terminal prompt happens in this
		// process; the server gets the master key. Read-only takes a
		// shared lock and writes nothing.
		v, err := unlockVolumeAt(a, image, viaFD, passFile, true)
		if err != nil {
			return err
		}
		key := v.MasterKey()
		h := v.Header()
		if err := v.Close(); err != nil {
			secret.Wipe(key)
			return volumeError(image, err)
		}
		defer secret.Wipe(key)
		req.Key = key
		req.Header = &h
		req.Cipher = volumeCipher(&h)
	}
	st, err := blockdev.Open(a.ctx, req, a.blockdevOptions())
	if err != nil {
		return fromBlockdev(err)
	}
	if r := st.Recovered; r != nil {
		reportRecovery(a, r, image)
	}
	if st.Upgraded {
		a.infof("%s: upgraded to volume format version %d: its state area (clean or not, which regions are being written) is now authenticated", image, volume.Version)
	}
	a.resultf("%s", st.Device)
	switch {
	case st.Mountpoint != "":
		a.infof("opened %s as %s: %s (%s) mounted on %s (%s backend)", image, name, st.Device, st.FSType, st.Mountpoint, st.Backend)
	default:
		a.infof("opened %s as %s: %s (%s backend)", image, name, st.Device, st.Backend)
	}
	return nil
}

// reportRecovery tells the user what open found after an unclean
// shutdown.
func reportRecovery(a *app, r *blockdev.Recovery, image string) {
	if r.Untagged {
		a.warningf("%s was not closed cleanly: recovered (no integrity tags, so nothing to check)", image)
		return
	}
	checked := plural(int64(r.DirtyRegions), "dirty region")
	if r.AllRegions {
		checked = "every region (the record of which regions were being written could not be trusted)"
	}
	if r.Mismatched == 0 {
		a.warningf("%s was not closed cleanly: checked %s, %d sectors: every tag matches", image, checked, r.Sectors)
		return
	}
	list := intList(r.BadSectors)
	if uint64(len(r.BadSectors)) < r.Mismatched {
		list += fmt.Sprintf(" and %d more", r.Mismatched-uint64(len(r.BadSectors)))
	}
	if r.Repaired {
		a.warningf("%s was not closed cleanly: checked %s; re-tagged %s whose tags did not match, accepting what they hold (--recover): %s",
			image, checked, plural(int64(r.Mismatched), "sector"), list)
		return
	}
	a.warningf("%s was not closed cleanly: checked %s; %s do not match their tags and read as I/O errors: %s",
		image, checked, plural(int64(r.Mismatched), "sector"), list)
	a.hintf("a crash of xtsctl's server leaves in this state at most the sectors it was writing at that moment; a sector it was not writing was changed outside xtsctl")
	a.hintf("to accept what these sectors hold now, close the volume and open it again with --recover (or rewrite them)")
}

// testPassphrase unlocks image read-only and says which key slot the
// passphrase opens, like cryptsetup open --test-passphrase: exit 0 when it
// opens one, 4 when it does not.
func testPassphrase(a *app, passFile, image string) error {
	v, err := unlockVolume(a, image, passFile, true)
	if err != nil {
		return err
	}
	slot := v.Slot()
	if err := v.Close(); err != nil {
		return volumeError(image, err)
	}
	a.infof("%s: the passphrase opens key slot %d", image, slot)
	return nil
}
