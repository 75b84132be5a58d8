//go:build linux

package blockdev

import (
	"errors"
	"io"
	"os"
	"unsafe"

	"github.com/xtsctl/xtsctl/blockdev/fusefile"
	"github.com/xtsctl/xtsctl/volume"
	"golang.org/x/sys/unix"
)

// volumeStore serves an unlocked xtsctl volume: reads verify every
// sector's tag (a failing sector is a *volume.IntegrityError, never
// plaintext), writes encrypt and re-tag, following the volume's
// dirty-region protocol (volume.Volume.WriteSectors). Recover the volume
// before serving it read-write.
type volumeStore struct {
	v   *volume.Volume
	img *splitFile
}

var (
	_ fusefile.Store        = (*volumeStore)(nil)
	_ fusefile.DirectReader = (*volumeStore)(nil)
)

func (s *volumeStore) SectorSize() int                            { return s.v.SectorSize() }
func (s *volumeStore) Sectors() uint64                            { return s.v.Sectors() }
func (s *volumeStore) ReadSectors(buf []byte, first uint64) error { return s.v.ReadSectors(buf, first) }
func (s *volumeStore) WriteSectors(buf []byte, first uint64) error {
	return s.v.WriteSectors(buf, first)
}
func (s *volumeStore) Sync() error { return s.v.Sync() }

// Close closes the volume (flush, mark clean, wipe keys), then its image.
func (s *volumeStore) Close() error {
	err := s.v.Close()
	if cerr := s.img.Close(); err == nil {
		err = cerr
	}
	return err
}

// ReadPlan: data sectors through the O_DIRECT descriptor (the ring falls
// back to the slow path if the image refuses it), tags through the page
// cache, as splitFile does.
func (s *volumeStore) ReadPlan(first uint64, n int) (fd int, off int64, tagFd int, tagOff int64, tagLen int) {
	l := s.v.Layout()
	fd = int(s.img.buffered.Fd())
	if s.img.direct != nil {
		fd = int(s.img.direct.Fd())
	}
	tagFd = -1
	if l.Integrity != volume.IntegrityNone {
		tagFd, tagOff, tagLen = int(s.img.buffered.Fd()), l.TagPosition(first), n*l.TagSize
	}
	return fd, l.SectorOffset(first), tagFd, tagOff, tagLen
}

func (s *volumeStore) FinishRead(buf, tags []byte, first uint64) error {
	return s.v.OpenSectors(buf, tags, first)
}

// openVolumeStore opens the volume at path with its master key for
// serving, locked as every xtsctl process locks an image
// (volume.LockImage), but with whole-block requests (data sectors, as the
// loop device sends them) going to the image with O_DIRECT. Through the
// page cache, a 1 GiB sequential read cost the server 2 s of CPU in copies
// and page-cache upkeep for 0.2× the speed of a plain loop device; direct,
// the data moves by DMA into our buffers, as for plain images
// (BENCHMARKS.md, "Mounted volumes"). Requests that are not block-aligned
// (tags, the header, the state area) stay buffered; they never share a
// page with data sectors, whose area is aligned apart from theirs.
func openVolumeStore(path string, key []byte, readOnly bool) (*volumeStore, error) {
	buffered, err := volume.LockImage(path, readOnly, 0)
	if err != nil {
		return nil, err
	}
	img := &splitFile{buffered: buffered}
	flag := os.O_RDWR
	if readOnly {
		flag = os.O_RDONLY
	}
	if f, err := os.OpenFile(path, flag|unix.O_DIRECT, 0); err == nil {
		img.direct = f
	}
	size, err := buffered.Seek(0, io.SeekEnd)
	if err != nil {
		img.Close()
		return nil, err
	}
	v, err := volume.OpenDevice(img, size, readOnly, volume.WithKey(key))
	if err != nil {
		img.Close()
		return nil, err
	}
	return &volumeStore{v: v, img: img}, nil
}

// splitFile is a volume.Device over one image file opened twice: aligned
// requests use the O_DIRECT descriptor, the others the buffered one. The
// kernel keeps the two coherent (a direct read first writes back dirty
// cached pages of its range, a direct write drops them).
type splitFile struct {
	direct, buffered *os.File
}

var _ volume.Device = (*splitFile)(nil)

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
