package blockdev

import (
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/xtsctl/xtsctl/blockdev/fusefile"
	"github.com/xtsctl/xtsctl/sector"
	"github.com/xtsctl/xtsctl/volume"
)

// plainStore serves a cryptsetup plain-mode image (no header, no tags,
// the data area starts Offset*512 bytes into the file), or the data
// segment of a LUKS image, which is the same thing between the offset and
// the length its header gives. It has no integrity to check and nothing to
// recover after a crash; a torn write leaves a sector half old, half new,
// as on dm-crypt.
type plainStore struct {
	f       *os.File
	codec   *sector.Codec
	start   int64
	sectors uint64
	ss      int
	// scratch holds ciphertext, aligned for O_DIRECT: the store decrypts
	// from it into the caller's buffer and encrypts into it from the
	// caller's buffer, so plaintext and ciphertext are each copied once.
	scratch sync.Pool
	direct  bool
}

// newPlainStore serves the plain image open in f through codec. It takes
// ownership of f. The data area is everything after p's offset and must
// be a whole, non-zero number of sectors.
func newPlainStore(f *os.File, p volume.Plain, codec *sector.Codec) (*plainStore, error) {
	size, err := fileSize(f)
	if err != nil {
		return nil, err
	}
	data := size - p.OffsetBytes()
	ss := int64(p.Sector.Size)
	switch {
	case data <= 0:
		return nil, fmt.Errorf("image is %d bytes: nothing after the offset of %d bytes", size, p.OffsetBytes())
	case data%ss != 0:
		return nil, fmt.Errorf("image holds %d bytes after the offset, not a whole number of %d-byte sectors", data, ss)
	}
	return newSegmentStore(f, segment{Offset: p.OffsetBytes(), Length: data, Sector: p.Sector}, codec)
}

// A segment is a run of whole sectors of an image served as is, after
// decryption: a LUKS data segment (luks.Header.DataRange and
// SectorParams), or a plain image's data area. Sector 0 of the device is
// the segment's first, and its tweak comes from Sector.
type segment struct {
	Offset int64         `json:"offset"` // bytes from the start of the image
	Length int64         `json:"length"` // bytes
	Sector sector.Params `json:"sector"`
}

// newSegmentStore serves seg of the image open in f through codec (made
// for seg.Sector). It takes ownership of f. The segment must hold whole
// sectors and lie inside the image.
func newSegmentStore(f *os.File, seg segment, codec *sector.Codec) (*plainStore, error) {
	size, err := fileSize(f)
	if err != nil {
		return nil, err
	}
	ss := int64(seg.Sector.Size)
	switch {
	case ss <= 0 || seg.Offset < 0 || seg.Length <= 0 || seg.Length%ss != 0:
		return nil, fmt.Errorf("data segment of %d bytes at byte %d is not a whole, non-zero number of %d-byte sectors", seg.Length, seg.Offset, ss)
	case seg.Offset > size || seg.Length > size-seg.Offset:
		return nil, fmt.Errorf("data segment of %d bytes at byte %d runs past the end of the %d-byte image", seg.Length, seg.Offset, size)
	}
	s := &plainStore{f: f, codec: codec, start: seg.Offset, sectors: uint64(seg.Length / ss), ss: int(ss)}
	s.scratch.New = func() any { b := fusefile.AlignedBuffer(fusefile.MaxRequest + 2*sector.MaxSize); return &b }
	return s, nil
}

func fileSize(f *os.File) (int64, error) {
	size, err := f.Seek(0, io.SeekEnd) // block devices report 0 in Stat
	if err != nil {
		return 0, fmt.Errorf("cannot size image: %w", err)
	}
	return size, nil
}

// Direct reports whether the image is read and written with O_DIRECT.
func (s *plainStore) Direct() bool { return s.direct }

func (s *plainStore) SectorSize() int { return s.ss }
func (s *plainStore) Sectors() uint64 { return s.sectors }

func (s *plainStore) pos(first uint64) int64 { return s.start + int64(first)*int64(s.ss) }

func (s *plainStore) getScratch(n int) (buf []byte, put func()) {
	bp := s.scratch.Get().(*[]byte)
	if n > len(*bp) {
		s.scratch.Put(bp)
		return fusefile.AlignedBuffer(n), func() {}
	}
	return (*bp)[:n], func() { s.scratch.Put(bp) }
}

// ReadSectors reads and decrypts; plain images have nothing to verify.
func (s *plainStore) ReadSectors(buf []byte, first uint64) error {
	ct, put := s.getScratch(len(buf))
	defer put()
	if _, err := s.f.ReadAt(ct, s.pos(first)); err != nil {
		return fmt.Errorf("read sectors %d-%d: %w", first, first+uint64(len(buf)/s.ss)-1, err)
	}
	s.codec.Decrypt(buf, ct, first)
	return nil
}

// WriteSectors encrypts buf and writes it; buf is left as it was.
func (s *plainStore) WriteSectors(buf []byte, first uint64) error {
	ct, put := s.getScratch(len(buf))
	defer put()
	s.codec.Encrypt(ct, buf, first)
	if _, err := s.f.WriteAt(ct, s.pos(first)); err != nil {
		return fmt.Errorf("write sectors %d-%d: %w", first, first+uint64(len(buf)/s.ss)-1, err)
	}
	return nil
}

// Sync flushes the image's data to stable storage.
func (s *plainStore) Sync() error { return fdatasync(s.f) }

// Close syncs and closes the image.
func (s *plainStore) Close() error {
	err := s.Sync()
	if cerr := s.f.Close(); err == nil {
		err = cerr
	}
	return err
}
