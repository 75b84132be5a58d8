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
	err := s.v.ReadSectors(buf, first)
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
