//go:build linux

package blockdev

import (
	"errors"
	"fmt"

	"github.com/xtsctl/xtsctl/sector"
	"github.com/xtsctl/xtsctl/volume"
	"golang.org/x/sys/unix"
)

// openPlainStore opens the plain image at path for serving: locked against
// a second server (flock), and with O_DIRECT where the filesystem allows
// it. Direct I/O keeps the ciphertext out of the page cache: the block
// device on top already caches the plaintext, a second cached copy would
// only take memory, and fsync has no page cache to write back. It also
// lets the image be read and written with the same large, parallel
// requests the loop device sends us.
//
// seg is the data the store serves (a LUKS data segment); nil serves the
// plain image p.
func openPlainStore(path string, readOnly bool, p volume.Plain, seg *segment, codec *sector.Codec) (*plainStore, error) {
	f, err := volume.LockImage(path, readOnly, unix.O_DIRECT)
	direct := err == nil
	if errors.Is(err, unix.EINVAL) { // the filesystem has no O_DIRECT
		f, err = volume.LockImage(path, readOnly, 0)
	}
	if err != nil {
		return nil, err
	}
	var s *plainStore
	if seg != nil {
		s, err = newSegmentStore(f, *seg, codec)
	} else {
		s, err = newPlainStore(f, p, codec)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	if direct {
		// The data area's start must suit the device under the
		// file too; if a sector read there fails, fall back.
		probe, put := s.getScratch(s.ss)
		_, err := f.ReadAt(probe, s.start)
		put()
		if errors.Is(err, unix.EINVAL) {
			// Clear O_DIRECT (the file has no other status flags).
			if _, err := unix.FcntlInt(f.Fd(), unix.F_SETFL, 0); err != nil {
				f.Close()
				return nil, fmt.Errorf("open image: %w", err)
			}
			direct = false
		}
	}
	s.direct = direct
	return s, nil
}

func (s *plainStore) ReadPlan(first uint64, n int) (fd int, off int64, tagFd int, tagOff int64, tagLen int) {
	return int(s.f.Fd()), s.pos(first), -1, 0, 0
}

func (s *plainStore) FinishRead(buf, tags []byte, first uint64) error {
	s.codec.Decrypt(buf, buf, first)
	return nil
}
