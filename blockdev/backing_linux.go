//go:build linux

package blockdev

import (
	"errors"
	"io"
	"os"
	"unsafe"

	"github.com/xtsctl/xtsctl/disk"
	"github.com/xtsctl/xtsctl/internal/imagelock"
	"golang.org/x/sys/unix"
)

// openBacking opens the image at path for serving, locked as every
// xtsctl process locks an image (imagelock), with whole-block requests
// (data sectors, as the loop device sends them) going to the image with
// O_DIRECT. Direct I/O keeps the ciphertext out of the page cache: the
// block device on top already caches the plaintext, a second cached copy
// would only take memory, and fsync has no page cache to write back.
// Through the page cache, a 1 GiB sequential read of a volume cost the
// server 2 s of CPU in copies and page-cache upkeep for 0.2× the speed of
// a plain loop device; direct, the data moves by DMA into our buffers
// (BENCHMARKS.md, "Mounted volumes"). Requests that are not block-aligned
// (tags, headers, state areas) stay buffered; they never share a page
// with data sectors, whose areas are aligned apart from theirs.
func openBacking(path string, readOnly bool) (*splitFile, error) {
	buffered, err := imagelock.Open(path, readOnly, 0)
	if err != nil {
		return nil, err
	}
	f := &splitFile{buffered: buffered}
	flag := os.O_RDWR
	if readOnly {
		flag = os.O_RDONLY
	}
	if d, err := os.OpenFile(path, flag|unix.O_DIRECT, 0); err == nil {
		f.direct = d
	}
	return f, nil
}

// splitFile is a disk.FDBacking over one image file opened twice: aligned
// requests use the O_DIRECT descriptor, the others the buffered one. The
// kernel keeps the two coherent (a direct read first writes back dirty
// cached pages of its range, a direct write drops them).
type splitFile struct {
	direct, buffered *os.File
}

var _ disk.FDBacking = (*splitFile)(nil)

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

// Seek finds the image's size (io.SeekEnd), as block devices need.
func (f *splitFile) Seek(offset int64, whence int) (int64, error) {
	return f.buffered.Seek(offset, whence)
}

// DataFD reads aligned data sectors: O_DIRECT where the image allows it.
func (f *splitFile) DataFD() int {
	if f.direct != nil {
		return int(f.direct.Fd())
	}
	return int(f.buffered.Fd())
}

// MetaFD reads everything else through the page cache.
func (f *splitFile) MetaFD() int { return int(f.buffered.Fd()) }

var _ io.Seeker = (*splitFile)(nil)
