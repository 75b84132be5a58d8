//go:build linux

package serve

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"unsafe"

	"github.com/xtsctl/xtsctl/volume"
	"golang.org/x/sys/unix"
)

// An OpenedVolume is a volume opened by OpenVolume; Close closes the volume
// and then its image file.
type OpenedVolume struct {
	*volume.Volume
	img *splitFile
}

// Close closes the volume (flush, mark clean, wipe keys) and its image.
func (v *OpenedVolume) Close() error {
	err := v.Volume.Close()
	if cerr := v.img.Close(); err == nil {
		err = cerr
	}
	return err
}

// OpenVolume opens the volume at path with its master key for serving:
// like volume.OpenWithKey, with the same lock against a second writer,
// but whole-block requests (data sectors, as the loop device sends them)
// go to the image with O_DIRECT. Through the page cache, a 1 GiB
// sequential read cost the server 2 s of CPU in copies and page-cache
// upkeep for 0.2× the speed of a plain loop device; direct, the data
// moves by DMA into our buffers, as for plain images (BENCHMARKS.md,
// "Mounted volumes"). Requests that are not block-aligned (tags, the
// header, the state area) stay buffered; they never share a page with
// data sectors, whose area is aligned apart from theirs.
func OpenVolume(path string, key []byte, readOnly bool) (*OpenedVolume, error) {
	flag, lock := os.O_RDWR, unix.LOCK_EX
	if readOnly {
		flag, lock = os.O_RDONLY, unix.LOCK_SH
	}
	buffered, err := os.OpenFile(path, flag, 0)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(buffered.Fd()), lock|unix.LOCK_NB); err != nil {
		buffered.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, ErrImageBusy
		}
		return nil, fmt.Errorf("cannot lock %s: %w", path, err)
	}
	img := &splitFile{buffered: buffered}
	if f, err := os.OpenFile(path, flag|unix.O_DIRECT, 0); err == nil {
		img.direct = f
	}
	size, err := buffered.Seek(0, io.SeekEnd)
	if err != nil {
		img.Close()
		return nil, err
	}
	v, err := volume.OpenDevice(img, size, readOnly, func(hs *volume.Headers) ([]byte, int, error) {
		if err := hs.CheckKey(key); err != nil {
			return nil, -1, err
		}
		return slices.Clone(key), -1, nil
	})
	if err != nil {
		img.Close()
		return nil, err
	}
	return &OpenedVolume{Volume: v, img: img}, nil
}

// splitFile is a volume.Device over one image file opened twice: aligned
// requests use the O_DIRECT descriptor, the others the buffered one. The
// kernel keeps the two coherent (a direct read first writes back dirty
// cached pages of its range, a direct write drops them).
type splitFile struct {
	direct, buffered *os.File
}

// directAlign is the alignment O_DIRECT asks for on common devices (their
// logical block size); where a device wants more, the kernel says EINVAL
// and the request goes through the page cache instead.
const directAlign = 512

func (f *splitFile) aligned(p []byte, off int64) bool {
	return f.direct != nil && len(p) > 0 && off%directAlign == 0 && len(p)%directAlign == 0 &&
		uintptr(unsafe.Pointer(&p[0]))%directAlign == 0
}

func (f *splitFile) ReadAt(p []byte, off int64) (int, error) {
	if f.aligned(p, off) {
		n, err := f.direct.ReadAt(p, off)
		if !errors.Is(err, unix.EINVAL) {
			return n, err
		}
	}
	return f.buffered.ReadAt(p, off)
}

func (f *splitFile) WriteAt(p []byte, off int64) (int, error) {
	if f.aligned(p, off) {
		n, err := f.direct.WriteAt(p, off)
		if !errors.Is(err, unix.EINVAL) {
			return n, err
		}
	}
	return f.buffered.WriteAt(p, off)
}

// Sync flushes both: fdatasync writes back the inode's cached pages
// whichever descriptor dirtied them, and flushes the device's cache.
func (f *splitFile) Sync() error { return fdatasync(f.buffered) }

func (f *splitFile) Close() error {
	err := f.buffered.Close()
	if f.direct != nil {
		if derr := f.direct.Close(); err == nil {
			err = derr
		}
	}
	return err
}

var (
	_ VolumeSource  = (*OpenedVolume)(nil)
	_ volume.Device = (*splitFile)(nil)
)

// ringPlan: data sectors through the O_DIRECT descriptor (the ring falls
// back to the slow path if the image refuses it), tags through the page
// cache, as splitFile does.
func (v *OpenedVolume) ringPlan(first uint64, n int) (fd int, off int64, tagFd int, tagOff int64, tagLen int) {
	l := v.Layout()
	fd = int(v.img.buffered.Fd())
	if v.img.direct != nil {
		fd = int(v.img.direct.Fd())
	}
	tagFd = -1
	if l.Integrity != volume.IntegrityNone {
		tagFd, tagOff, tagLen = int(v.img.buffered.Fd()), l.TagPosition(first), n*l.TagSize
	}
	return fd, l.SectorOffset(first), tagFd, tagOff, tagLen
}

func (v *OpenedVolume) ringFinish(buf, tags []byte, first uint64) error {
	return v.OpenSectors(buf, tags, first)
}
