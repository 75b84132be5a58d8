package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/xtsctl/xtsctl/internal/secret"
	"github.com/xtsctl/xtsctl/xts"
	"golang.org/x/sys/unix"
)

func init() { registerCommand(newOpenCmd) }

func newOpenCmd(a *app) *cobra.Command {
	var (
		typ, backendName, passFile string
		pf                         plainFlags
		req                        openRequest
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
		Args: argsNamed("IMAGE", "NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkType(typ); err != nil {
				return err
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
			return openImage(a, &pf, typ, backendName, passFile, args[0], args[1], &req)
		},
	}
	f := cmd.Flags()
	f.StringVar(&typ, "type", typeVolume, "image format: volume or plain")
	f.StringVar(&req.mount, "mount", "", "mount the filesystem on the device at `DIR`")
	f.StringVar(&req.fstype, "fstype", "", "filesystem type for --mount (default: detected)")
	f.BoolVar(&req.readOnly, "read-only", false, "serve and mount read-only; the image is never written")
	f.BoolVar(&req.recover, "recover", false, "volume, after an unclean shutdown: re-tag the sectors whose tags do not match, accepting what they hold")
	f.StringVar(&backendName, "backend", "auto", "how to serve: "+backendNames())
	f.StringVar(&passFile, "passphrase-file", "", "volume: read the passphrase from `FILE` (one trailing newline is removed) instead of the terminal")
	registerUnlockFlags(a, f)
	pf.register(f)
	return cmd
}

func openImage(a *app, pf *plainFlags, typ, backendName, passFile, image, name string, req *openRequest) error {
	if err := checkName(name); err != nil {
		return err
	}
	req.name, req.typ = name, typ
	if req.recover && req.readOnly {
		return usageError(errors.New("--recover rewrites tags: it needs a read-write open, not --read-only"))
	}
	if req.fstype != "" && req.mount == "" {
		return usageError(errors.New("--fstype needs --mount"))
	}
	if req.mount != "" {
		abs, err := filepath.Abs(req.mount)
		if err != nil {
			return usageError(err)
		}
		// The real path is recorded: close unmounts exactly what was
		// mounted, wherever a symlink on the way points by then.
		if real, err := filepath.EvalSymlinks(abs); err == nil {
			abs = real
		}
		fi, err := os.Stat(abs)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return usageError(fmt.Errorf("mountpoint %s does not exist", req.mount), "create it: mkdir -p "+req.mount)
		case err != nil:
			return withCode(exitDevice, err)
		case !fi.IsDir():
			return usageError(fmt.Errorf("mountpoint %s is not a directory", req.mount))
		}
		req.mount = abs
	}
	if typ == typePlain {
		p, err := pf.params()
		if err != nil {
			return err
		}
		req.plain = p
	}

	abs, err := filepath.Abs(image)
	if err != nil {
		return withCode(exitInput, err)
	}
	// Every later access to the image goes through this one open file
	// (as /proc/self/fd/N, and handed to the server): a path swapped
	// after these checks cannot change what is unlocked and served.
	img, err := os.Open(abs)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return withCode(exitInput, fmt.Errorf("cannot read image: %w", err))
	}
	if img != nil {
		defer img.Close()
		req.file = img
	}
	fi, err := os.Stat(abs)
	if img != nil {
		fi, err = img.Stat()
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return withCode(exitInput, fmt.Errorf("image %s does not exist", image))
	case err != nil:
		return withCode(exitInput, fmt.Errorf("cannot read image: %w", err))
	case fi.IsDir():
		return withCode(exitInput, fmt.Errorf("image %s is a directory", image))
	case !fi.Mode().IsRegular() && fi.Mode()&fs.ModeDevice == 0:
		return withCode(exitInput, fmt.Errorf("image %s is not a regular file or block device", image))
	}
	sys := fi.Sys().(*syscall.Stat_t)
	req.image, req.imageDev, req.imageIno = abs, sys.Dev, sys.Ino

	if err := checkBackend(backendName); err != nil {
		return err
	}

	waitForDeadServer(req)

	// The secret is read before taking the lock: a passphrase prompt
	// must not hold up other opens and closes.
	if typ == typePlain {
		key, err := readKeyFile(a, pf.keyFile)
		if err != nil {
			return err
		}
		defer clear(key)
		c, err := xts.NewCipher(key) // reject a bad key here, with its exit code
		if err != nil {
			return withCode(exitKey, err)
		}
		c.Wipe()
		req.secret = key
		req.cipher = describePlain(req.plain, 8*len(key))
	} else {
		// Unlock here, so that a wrong passphrase is reported like
		// everywhere else and the terminal prompt happens in this
		// process; the server gets the master key. Read-only takes a
		// shared lock and writes nothing.
		v, err := unlockVolumeAt(a, image, req.path(), passFile, true)
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
		req.secret = key
		req.header = &h
		req.cipher = describeVolume(&h)
	}
	bname, b, err := pickBackend(backendName, req)
	if err != nil {
		return err
	}

	unlock, err := lockRunDir()
	if err != nil {
		return err
	}
	defer unlock()
	if err := checkNotOpen(a, req); err != nil {
		return err
	}
	dir := stateDir(name)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return withCode(exitDevice, fmt.Errorf("cannot create %s: %w", dir, err))
	}
	st, err := b.open(a, req)
	if err != nil {
		os.RemoveAll(dir)
		return err
	}
	a.resultf("%s", st.Device)
	switch {
	case st.Mountpoint != "":
		a.infof("opened %s as %s: %s (%s) mounted on %s (%s backend)", image, name, st.Device, st.FSType, st.Mountpoint, bname)
	default:
		a.infof("opened %s as %s: %s (%s backend)", image, name, st.Device, bname)
	}
	return nil
}

// checkNotOpen refuses a NAME or an image that is already open, and cleans
// up after servers that died (with a warning). The caller holds the lock.
func checkNotOpen(a *app, req *openRequest) error {
	entries, err := listEntries()
	if err != nil {
		return withCode(exitDevice, fmt.Errorf("cannot read %s: %w", runDir(), err))
	}
	for _, e := range entries {
		b := backendOf(e)
		if !b.alive(e) {
			if err := removeStale(a, e); err != nil {
				return err
			}
			continue
		}
		if e.name == req.name {
			what := "it"
			if e.state != nil {
				what = fmt.Sprintf("%s on %s", e.state.Image, e.state.Device)
			}
			return withCode(exitDevice, fmt.Errorf("%s is already open (%s)", req.name, what),
				"close it first: xtsctl close "+req.name)
		}
		if e.state != nil && e.state.ImageDev == req.imageDev && e.state.ImageIno == req.imageIno {
			return withCode(exitDevice, fmt.Errorf("image %s is already open as %s (%s)", req.image, e.name, e.state.Device),
				"close it first: xtsctl close "+e.name)
		}
	}
	return nil
}

// removeStale cleans what a dead server left and removes its record.
func removeStale(a *app, e *entry) error {
	if err := backendOf(e).cleanup(a, e); err != nil {
		return withCode(exitDevice, fmt.Errorf("cannot clean up after %s: %w", e.name, err))
	}
	if err := os.RemoveAll(stateDir(e.name)); err != nil {
		return withCode(exitDevice, err)
	}
	if e.state != nil && e.state.Backend == "dm" {
		a.warningf("%s was left open, but its device-mapper device is gone (removed by hand, or its open was interrupted); cleaned up", e.name)
		return nil
	}
	a.warningf("%s was left open by a server that died (%s); cleaned up", e.name, describeLeftovers(e))
	return nil
}

// waitForDeadServer waits, a few seconds at most, for a server of this
// image that was killed a moment ago to let go of the image's lock: the
// kernel tears a dead process's io_uring down asynchronously, and its
// requests in flight keep the image open until then. Without the wait,
// opening again right after a crash would fail with "in use".
func waitForDeadServer(req *openRequest) {
	entries, err := listEntries()
	if err != nil {
		return
	}
	for _, e := range entries {
		if e.state == nil || e.state.ImageDev != req.imageDev || e.state.ImageIno != req.imageIno || backendOf(e).alive(e) {
			continue
		}
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			f, err := os.Open(req.image)
			if err != nil {
				return
			}
			err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
			f.Close()
			if err == nil {
				return
			}
		}
		return
	}
}
