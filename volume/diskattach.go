package volume

import (
	"context"
	"fmt"
	"io"

	"github.com/xtsctl/xtsctl/disk"
)

// Attach serves an unlocked volume from b: reads verify every sector's
// tag, writes follow the dirty-region protocol. Read-write, it first
// settles what a crash left (the tags of the regions being written are
// checked, and mismatches reported or, with opt.Recover, re-tagged) and
// upgrades a version-1 volume; the AttachReport says what it did.
func (volumeFormat) Attach(b disk.Backing, u *disk.Unlocked, opt disk.AttachOptions) (disk.Device, error) {
	size, err := sizeOf(b)
	if err != nil {
		b.Close()
		return nil, err
	}
	v, err := OpenDevice(b, size, opt.ReadOnly, WithKey(u.Key))
	if err != nil {
		b.Close()
		return nil, DiskError("the image", err)
	}
	d := &attached{Volume: v, backing: b, report: &disk.AttachReport{}}
	if opt.Workers > 0 {
		v.SetWorkers(opt.Workers)
	}
	if vs := v.State(); (!vs.Valid || vs.Dirty) && opt.ReadOnly {
		d.report.Warnings = append(d.report.Warnings, "it was not closed cleanly and is open read-only, so it was not checked: sectors a crash tore read as integrity errors; open it read-write once to check them")
	}
	if !opt.ReadOnly {
		if err := d.settle(opt.Recover); err != nil {
			d.Close()
			return nil, err
		}
	}
	return d, nil
}

func sizeOf(b disk.Backing) (int64, error) {
	s, ok := b.(io.Seeker)
	if !ok {
		return 0, fmt.Errorf("cannot size the image")
	}
	return s.Seek(0, io.SeekEnd)
}

// attached is a Volume served from a backing it owns.
type attached struct {
	*Volume
	backing disk.Backing
	report  *disk.AttachReport
}

func (d *attached) AttachReport() *disk.AttachReport { return d.report }

// Close closes the volume (flush, mark clean, wipe keys), then its image.
func (d *attached) Close() error {
	err := d.Volume.Close()
	if cerr := d.backing.Close(); err == nil {
		err = cerr
	}
	return err
}

// settle recovers a volume that was not closed cleanly and upgrades a
// version-1 volume, before it is served read-write.
func (d *attached) settle(repair bool) error {
	v := d.Volume
	if st := v.State(); !st.Valid || st.Dirty {
		r, err := v.Recover(context.Background(), repair, nil)
		if err != nil {
			return disk.WithKind(disk.KindDevice, fmt.Errorf("recover: %w", err))
		}
		rec := &disk.Recovery{DirtyRegions: uint64(r.Regions), Sectors: r.Sectors, AllRegions: r.AllRegions,
			Mismatched: r.Mismatched, Repaired: r.Repaired, Untagged: v.Layout().Integrity == IntegrityNone}
		for _, b := range r.BadSectors {
			rec.BadSectors = append(rec.BadSectors, b.Sector)
		}
		d.report.Recovered = rec
	}
	upgraded, err := v.Upgrade()
	if err != nil {
		return disk.WithKind(disk.KindDevice, fmt.Errorf("upgrade to format version %d: %w", Version, err))
	}
	if upgraded {
		d.report.Upgraded = fmt.Sprintf("volume format version %d: its state area (clean or not, which regions are being written) is now authenticated", Version)
	}
	return nil
}

// ReadPlan: data sectors through the backing's data descriptor (O_DIRECT
// where the image allows), tags through its other one, for a server that
// reads them itself (FUSE over io_uring); fd -1 when the backing has no
// descriptors to give.
func (d *attached) ReadPlan(first uint64, n int) (fd int, off int64, tagFd int, tagOff int64, tagLen int) {
	fb, ok := d.backing.(disk.FDBacking)
	if !ok {
		return -1, 0, -1, 0, 0
	}
	l := d.Layout()
	tagFd = -1
	if l.Integrity != IntegrityNone {
		tagFd, tagOff, tagLen = fb.MetaFD(), l.TagPosition(first), n*l.TagSize
	}
	return fb.DataFD(), l.SectorOffset(first), tagFd, tagOff, tagLen
}

// FinishRead checks the tags of what ReadPlan said to read, and decrypts
// it in place.
func (d *attached) FinishRead(buf, tags []byte, first uint64) error {
	return d.OpenSectors(buf, tags, first)
}

// BeginKernelWrites prepares a volume without tags for dm-crypt to write,
// following docs/FORMAT.md's writer protocol for a writer we do not see:
// it recovers it if it was not closed cleanly (no tags: only the state to
// repair), upgrades a version-1 volume, then records it dirty with its
// digest stale (Volume.Release); EndKernelWrites records the clean close
// with the record Release returned.
func (volumeFormat) BeginKernelWrites(b disk.Backing, u *disk.Unlocked) (*disk.AttachReport, []byte, error) {
	size, err := sizeOf(b)
	if err != nil {
		return nil, nil, err
	}
	v, err := OpenDevice(b, size, false, WithKey(u.Key))
	if err != nil {
		return nil, nil, DiskError("the image", err)
	}
	d := &attached{Volume: v, report: &disk.AttachReport{}}
	if err := d.settle(false); err != nil {
		v.Close()
		return nil, nil, err
	}
	rec, err := v.Release()
	if err != nil {
		return nil, nil, disk.WithKind(disk.KindDevice, fmt.Errorf("cannot mark it as being written: %w", err))
	}
	return d.report, rec, nil
}

// EndKernelWrites records the clean close of a volume dm-crypt wrote.
func (volumeFormat) EndKernelWrites(b disk.Backing, token []byte) error {
	size, err := sizeOf(b)
	if err == nil {
		err = MarkClean(b, size, token)
	}
	if err != nil {
		return disk.WithKind(disk.KindDevice, fmt.Errorf("cannot record the clean close: %w", err))
	}
	return nil
}
