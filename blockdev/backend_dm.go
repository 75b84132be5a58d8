package blockdev

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/xtsctl/xtsctl/blockdev/fusefile"
	"github.com/xtsctl/xtsctl/disk"
	"github.com/xtsctl/xtsctl/internal/devmapper"
	"github.com/xtsctl/xtsctl/internal/dmtable"
	"github.com/xtsctl/xtsctl/internal/imagelock"
	"github.com/xtsctl/xtsctl/internal/loopdev"
	"github.com/xtsctl/xtsctl/internal/mount"
	"github.com/xtsctl/xtsctl/internal/testhooks"
	"golang.org/x/sys/unix"
)

// dmBackend hands an image to the kernel's dm-crypt: a loop device on the
// image file, one crypt target on the loop device for the encrypted data
// (/dev/mapper/NAME), and optionally a mount. No process of ours stays
// behind: the kernel serves the device, the state record says what to
// take down, and close does it. docs/DM.md maps our parameters to the
// table and says how it is tested.
//
// The image stays locked while the device exists, as volume.Open and the
// FUSE server lock it (exclusive to write, shared to read): the lock is
// taken on the file handed to the loop device, which holds it until the
// table lets go of the loop device at close. decrypt, verify, passphrase
// changes and other opens therefore refuse the image meanwhile.
type dmBackend struct{}

// dmAvailable is devmapper.Available; tests replace it to exercise the
// choice of backend on hosts without device-mapper.
var dmAvailable = func() error {
	if err := testhooks.DMUnavailable; err != nil {
		return err
	}
	return devmapper.Available()
}

func (dmBackend) available() error {
	if os.Geteuid() != 0 {
		return errors.New("the dm backend needs root (device-mapper, loop devices and mount)")
	}
	if err := dmAvailable(); err != nil {
		return err
	}
	return checkLoopSupport()
}

// suits: --backend auto leaves images with integrity tags to FUSE, which
// checks every read against its tag (dm-crypt knows nothing of tags), and
// images whose layout dm-crypt cannot express.
func (dmBackend) suits(req *Request) error {
	if hasTags(req) {
		return errors.New("the image has integrity tags, which dm-crypt does not check")
	}
	_, err := dmTarget(req)
	return err
}

func hasTags(req *Request) bool { return req.Unlocked.Layout.Integrity != "" }

func imageSize(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return f.Seek(0, io.SeekEnd) // block devices report 0 in Stat
}

// dmTarget is the dm-crypt mapping of what req serves (the layout the
// format unlocked: the table info --dm-table prints). It fails when
// dm-crypt cannot express it (several extents, a cipher it names
// otherwise; with sectors above 512 bytes, offsets and IV offsets that
// are not multiples of the sector size).
func dmTarget(req *Request) (dmtable.CryptTable, error) {
	t, err := req.Unlocked.Layout.CryptTable()
	if err != nil {
		return t, err
	}
	probe := cryptTable(t, make([]byte, len(req.Unlocked.Key)), "7:0", false)
	return t, probe.Validate()
}

// cryptTable is t with its key and device, to load.
func cryptTable(t dmtable.CryptTable, key []byte, device string, readOnly bool) *dmtable.CryptTable {
	t.Key, t.Device, t.ReadOnly = key, device, readOnly
	return &t
}

// dmReadOnly decides whether req opens read-only, and says why when it
// is not what was asked: an image with integrity tags is only ever read
// through dm-crypt, which would leave the tags of what it writes stale.
func dmReadOnly(a *run, req *Request) bool {
	if !hasTags(req) {
		return req.ReadOnly
	}
	if req.ReadOnly {
		a.warningf("%s has integrity tags, which dm-crypt does not check: its reads are not verified (--backend fuse verifies every read)", req.Path)
	} else {
		a.warningf("%s has integrity tags, which dm-crypt neither checks nor updates: opening it read-only (--backend fuse verifies every read and can write)", req.Path)
	}
	return true
}

// handover is the format's KernelHandover, if it has one.
func handover(format string) disk.KernelHandover {
	f, _ := disk.Lookup(format)
	h, _ := f.(disk.KernelHandover)
	return h
}

func (dmBackend) open(a *run, req *Request) (_ *State, err error) {
	ro := dmReadOnly(a, req)
	pid := os.Getpid()
	st := &State{
		Name: req.Name, Backend: "dm", Image: req.Path, ImageDev: req.dev, ImageIno: req.ino,
		Type: req.Unlocked.Format, Cipher: cipherOf(req.Unlocked), Mountpoint: req.Mount, ReadOnly: ro,
		PID: pid, PIDStart: processStart(pid),
	}
	// Recorded before anything is set up, with this process as the one
	// at work: if it dies half-way, the next open, close or status tells
	// what it left (alive, cleanup).
	if err := writeState(st); err != nil {
		return nil, withKind(KindDevice, fmt.Errorf("write state: %w", err))
	}

	f, err := imagelock.Open(req.path(), ro, 0)
	if err != nil {
		return nil, imageError(req.Path, err)
	}
	defer f.Close() // after the undo below, which may finish the image through f
	var undo []func()
	defer func() {
		if err != nil {
			for i := len(undo) - 1; i >= 0; i-- {
				undo[i]()
			}
		}
	}()

	target, err := dmTarget(req)
	if err != nil {
		return nil, usageError(fmt.Errorf("dm-crypt cannot map %s: %w", req.Path, err), "the fuse backend serves it: --backend fuse")
	}
	loop, err := loopdev.AttachFile(f, loopdev.Options{
		ReadOnly: ro,
		// The loop driver then does not cache the ciphertext that
		// dm-crypt's device caches the plaintext of; where the
		// image's filesystem cannot, the kernel falls back to
		// buffered I/O by itself.
		DirectIO: true,
		// 512-byte blocks whatever the encryption sector: a plain
		// image's --offset may be any multiple of 512 bytes.
		BlockSize: 512,
	})
	if err != nil {
		return nil, withKind(KindDevice, err)
	}
	// The table holds the loop device from now on: closing our handle
	// lets the kernel free it with the table (LO_FLAGS_AUTOCLEAR), or at
	// once if no table was loaded.
	defer loop.Close()
	st.Loop = loop.Path

	// The volume is recorded as being written only now, right before the
	// device appears: an open that fails earlier leaves it untouched. One
	// that fails later marks it clean again, its digest stale.
	if h := handover(req.Unlocked.Format); h != nil && !ro {
		rep, token, err := h.BeginKernelWrites(f, req.Unlocked)
		if err != nil {
			return nil, imageError(req.Path, err)
		}
		st.CloseRecord, st.Recovered, st.Upgraded = token, rep.Recovered, rep.Upgraded != ""
		undo = append(undo, func() {
			// The device is gone again (undone before this):
			// sync what reached the image and close cleanly.
			if err := finishImage(f, st); err != nil {
				a.warningf("%v", err)
			}
		})
	}

	// Last point to stop cleanly on Ctrl-C: after it, the device exists
	// and open completes.
	if a.ctx.Err() != nil {
		return nil, withKind(KindInterrupted, fmt.Errorf("interrupted; %s was not opened", req.Name))
	}
	table := cryptTable(target, req.Unlocked.Key, fmt.Sprintf("%d:%d", loop.Major, loop.Minor), ro)
	dev, err := devmapper.CreateCrypt(req.Name, table)
	if err != nil {
		return nil, createError(req.Name, err)
	}
	undo = append(undo, func() { devmapper.Remove(req.Name) })
	st.Device = dev

	if mp := req.MountDir; mp != nil {
		var id uint64
		if st.FSType, id, err = mountFilesystem(req.Path, req.Unlocked.Format, dev, mp, req.FSType, ro, nil); err != nil {
			return nil, err
		}
		undo = append(undo, func() { mount.UnmountID(mp.Path, id) })
		st.MountDev, st.MountIno = mp.dev, mp.ino
	}
	st.PID, st.PIDStart, st.Opened = 0, 0, time.Now().UTC()
	if err := writeState(st); err != nil {
		return nil, withKind(KindDevice, fmt.Errorf("write state: %w", err))
	}
	return st, nil
}

// createError explains why CreateCrypt failed.
func createError(name string, err error) error {
	switch {
	case errors.Is(err, devmapper.ErrUnavailable):
		return withKind(KindDevice, err)
	case !errors.Is(err, devmapper.ErrExists):
		return withKind(KindDevice, err, "the kernel log (dmesg) says why device-mapper refused the table")
	}
	if info, serr := devmapper.Status(name); serr == nil && info.Ours() {
		return withKind(KindDevice, fmt.Errorf("%s exists already, made by an xtsctl open whose record is lost", devmapper.DevPath(name)),
			"unmount it if it is mounted, then remove it: dmsetup remove "+name)
	}
	return withKind(KindDevice, fmt.Errorf("a device-mapper device named %s exists already, not made by xtsctl", name), "choose another NAME")
}

// finishImage completes a read-write session on f, the image locked: it
// syncs what dm-crypt wrote through the loop device and, for a volume,
// records the clean close (volume.MarkClean).
func finishImage(f *os.File, st *State) error {
	if err := f.Sync(); err != nil {
		return withKind(KindDevice, fmt.Errorf("sync %s: %w", st.Image, err))
	}
	if st.CloseRecord == nil {
		return nil
	}
	h := handover(st.Type)
	if h == nil {
		return withKind(KindDevice, fmt.Errorf("%s: this xtsctl does not know the format %q its open recorded, to record the clean close", st.Image, st.Type))
	}
	if err := h.EndKernelWrites(f, st.CloseRecord); err != nil {
		return withKind(KindDevice, fmt.Errorf("%s: %w", st.Image, err))
	}
	return nil
}

// releaseWait bounds how long close waits for the loop device to let go
// of the image once the table is removed: the kernel frees an
// auto-clearing loop device in the release path of its last user, which
// may lag behind the removal briefly.
const releaseWait = 10 * time.Second

// reopenImage opens the image of st again and takes its lock once the loop
// device has let go of it, waiting up to wait.
func reopenImage(st *State, wait time.Duration) (*os.File, error) {
	deadline := time.Now().Add(wait)
	for {
		f, err := imagelock.Open(st.Image, false, 0)
		switch {
		case err == nil:
			var fst unix.Stat_t
			if err := unix.Fstat(int(f.Fd()), &fst); err != nil || fst.Dev != st.ImageDev || fst.Ino != st.ImageIno {
				f.Close()
				return nil, withKind(KindDevice, fmt.Errorf("%s is not the image that was opened any more", st.Image))
			}
			return f, nil
		case !errors.Is(err, imagelock.ErrInUse):
			return nil, withKind(KindDevice, fmt.Errorf("cannot reopen %s to finish it: %w", st.Image, err))
		case time.Now().After(deadline):
			return nil, withKind(KindDevice, fmt.Errorf("%s is still in use (by its loop device %s?): %w", st.Image, st.Loop, err),
				"run 'xtsctl close "+st.Name+"' again once it is released")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// alive: the device exists and is ours, or the open that records it is
// still at work.
func (dmBackend) alive(e *entry) bool {
	if processAlive(e.pid, e.start) {
		return true
	}
	info, err := devmapper.Status(e.name)
	return err == nil && info.Ours()
}

func (dmBackend) close(a *run, st *State) error {
	info, err := devmapper.Status(st.Name)
	switch {
	case errors.Is(err, devmapper.ErrNotFound):
		info = nil // removed already
	case err != nil:
		return withKind(KindDevice, err)
	case !info.Ours():
		return withKind(KindDevice, fmt.Errorf("device-mapper device %s was not made by xtsctl", st.Name))
	}
	dev := devmapper.DevPath(st.Name)
	mounted := false
	if st.Mountpoint != "" {
		m, _ := mount.At(st.Mountpoint)
		mounted = m != nil && m.Source == dev
	}
	if info != nil {
		// Refuse before unmounting anything: a device in use elsewhere
		// would fail the removal, and the filesystem is better left
		// mounted then. A program that opened the device for a moment
		// (udev's blkid) gets the time a loop device's release gets to
		// let go.
		besides := func(info *devmapper.DeviceStatus) int {
			if mounted {
				return info.OpenCount - 1
			}
			return info.OpenCount
		}
		others := besides(info)
		for deadline := time.Now().Add(loopReleaseWait); others > 0 && time.Now().Before(deadline); {
			time.Sleep(holderRecheck)
			now, err := devmapper.Status(st.Name)
			switch {
			case errors.Is(err, devmapper.ErrNotFound):
				info, others = nil, 0 // removed meanwhile
			case err != nil:
				return withKind(KindDevice, err)
			case !now.Ours():
				return withKind(KindDevice, fmt.Errorf("device-mapper device %s was not made by xtsctl", st.Name))
			default:
				info, others = now, besides(now)
			}
		}
		if others > 0 {
			return withKind(KindDevice, fmt.Errorf("%s is in use (open %d times besides the mount)", dev, others),
				"find its users with: fuser -v "+dev)
		}
	}
	// Unmount first (a busy filesystem refuses), then remove the device:
	// one still held after the unmount (the filesystem mounted in another
	// mount namespace keeps it open) gets its mount back.
	m, err := unmountForClose(st.Mountpoint, dev, nil)
	if err != nil {
		return err
	}
	if info != nil {
		if err := devmapper.Remove(st.Name); err != nil && !errors.Is(err, devmapper.ErrNotFound) {
			if errors.Is(err, devmapper.ErrBusy) {
				err = deviceBusy(dev)
			} else {
				err = withKind(KindDevice, err)
			}
			return remountAfter(st, dev, m, err, nil)
		}
	}
	if st.ReadOnly {
		return nil
	}
	f, err := reopenImage(st, releaseWait)
	if err != nil {
		return err
	}
	defer f.Close()
	return finishImage(f, st)
}

// cleanup after an instance whose device is gone (removed by hand, or an
// open that died before making it): a read-write session is finished if
// the image can be had at once. A volume left dirty is no harm: its next
// read-write open recovers it, at no cost without tags.
func (dmBackend) cleanup(a *run, e *entry) error {
	st := e.state
	if st == nil {
		return nil
	}
	dev := devmapper.DevPath(e.name)
	if err := unmountLeftover(a, st.Mountpoint, func(src string) bool { return src == dev }); err != nil {
		return err
	}
	if st.ReadOnly {
		return nil
	}
	f, err := reopenImage(st, time.Second)
	if err == nil {
		defer f.Close()
		err = finishImage(f, st)
	}
	if err != nil {
		a.warningf("%s: %v", e.name, err)
	}
	return nil
}

// stats: the kernel keeps no counters of ours; status shows the table.
func (dmBackend) stats(st *State) (*fusefile.Stats, error) { return nil, nil }

// DMStatus is what status shows of a device-mapper device.
type DMStatus struct {
	Table     string `json:"table"` // the live table, keys masked with zeros
	OpenCount int    `json:"open_count"`
	ReadOnly  bool   `json:"read_only"`
}

// kernelStatus reads the device's live table and state from the kernel.
func (dmBackend) kernelStatus(st *State) (*DMStatus, error) {
	info, err := devmapper.Status(st.Name)
	if err != nil {
		return nil, err
	}
	targets, err := devmapper.Table(st.Name)
	if err != nil {
		return nil, err
	}
	lines := make([]string, len(targets))
	for i, t := range targets {
		lines[i] = fmt.Sprintf("%d %d %s %s", t.Start, t.Length, t.Type, t.Params)
	}
	return &DMStatus{Table: strings.Join(lines, "\n"), OpenCount: info.OpenCount, ReadOnly: info.ReadOnly}, nil
}
