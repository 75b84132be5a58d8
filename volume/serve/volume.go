package serve

import (
	"errors"

	"github.com/xtsctl/xtsctl/volume"
)

// NewVolumeStore serves an unlocked xtsctl volume: reads verify every
// sector's tag (a failing sector is an *IntegrityError, never plaintext),
// writes encrypt and re-tag, and, on a read-write volume, writes follow the
// dirty-region protocol of docs/FORMAT.md so that a crash leaves only
// marked regions to re-tag. Recover the volume (Volume.Recover) before
// serving it read-write.
func NewVolumeStore(v VolumeSource, readOnly bool) Store {
	s := &volumeStore{v: v}
	if readOnly {
		return s
	}
	return TrackDirtyRegions(s, v)
}

// A VolumeSource is an unlocked volume: *volume.Volume, or the
// *OpenedVolume of OpenVolume.
type VolumeSource interface {
	SectorSize() int
	Sectors() uint64
	ReadSectors(buf []byte, first uint64) error
	WriteSectors(buf []byte, first uint64) error
	Sync() error
	Close() error
	RegionLog
}

var _ VolumeSource = (*volume.Volume)(nil)

type volumeStore struct{ v VolumeSource }

func (s *volumeStore) SectorSize() int { return s.v.SectorSize() }
func (s *volumeStore) Sectors() uint64 { return s.v.Sectors() }
func (s *volumeStore) Sync() error     { return s.v.Sync() }
func (s *volumeStore) Close() error    { return s.v.Close() }

func (s *volumeStore) WriteSectors(buf []byte, first uint64) error {
	return s.v.WriteSectors(buf, first)
}

func (s *volumeStore) ReadSectors(buf []byte, first uint64) error {
	return integrityError(s.v.ReadSectors(buf, first))
}

// integrityError converts the volume package's integrity errors to ours.
func integrityError(err error) error {
	var ie *volume.IntegrityError
	if errors.As(err, &ie) {
		bad := make([]uint64, len(ie.Sectors))
		for i, b := range ie.Sectors {
			bad[i] = b.Sector
		}
		return &IntegrityError{Sectors: bad}
	}
	return err
}

// A ringReader is a Store whose whole-sector reads can be split into image
// reads the ring performs and a step that checks and decrypts in place.
type ringReader interface {
	// ringPlan says where the ciphertext of n sectors from first lives
	// (fd, off) and, for stores with tags, where their tags live
	// (tagFd, tagOff, tagLen; tagLen 0 when there are none).
	ringPlan(first uint64, n int) (fd int, off int64, tagFd int, tagOff int64, tagLen int)
	// ringFinish verifies the ciphertext in buf against tags and decrypts
	// it in place. A sector that fails is an *IntegrityError and its
	// plaintext is not left in buf.
	ringFinish(buf, tags []byte, first uint64) error
}

// ringSource is a VolumeSource the FUSE ring can read from directly.
type ringSource interface {
	ringPlan(first uint64, n int) (fd int, off int64, tagFd int, tagOff int64, tagLen int)
	ringFinish(buf, tags []byte, first uint64) error
}

// ringReader returns the store's direct-read side when its volume has one.
func (s *volumeStore) ringReader() ringReader {
	if r, ok := s.v.(ringSource); ok {
		return volumeRing{s: r}
	}
	return nil
}

type volumeRing struct{ s ringSource }

func (r volumeRing) ringPlan(first uint64, n int) (int, int64, int, int64, int) {
	return r.s.ringPlan(first, n)
}

func (r volumeRing) ringFinish(buf, tags []byte, first uint64) error {
	return integrityError(r.s.ringFinish(buf, tags, first))
}
