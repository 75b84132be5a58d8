// Package fusefile serves a Store, the decrypted sectors of an image, as a
// Linux block device without kernel crypto: through FUSE as a single file,
// which is attached to a loop device (VeraCrypt's "no kernel crypto" path).
//
// The data path is: filesystem → /dev/loopN → FUSE file → Disk → Store →
// image. A Store (package blockdev has one per image format) turns
// whole-sector requests into ciphertext I/O on the image; this package adds
// the byte-range handling (read-modify-write of partial sectors, in Disk),
// the counters that `xtsctl status` shows, the FUSE file (over /dev/fuse or
// io_uring) and the loop device. It knows nothing of image formats.
package fusefile

import (
	"errors"
	"sync"
	"sync/atomic"
)

// A Store reads and writes whole sectors of decrypted data. Implementations
// must be safe for concurrent use by calls on disjoint sectors.
type Store interface {
	// SectorSize is the size of one sector in bytes.
	SectorSize() int
	// Sectors is the number of sectors.
	Sectors() uint64
	// ReadSectors fills buf (a whole number of sectors) with the plaintext
	// of the sectors starting at first. When a sector fails verification
	// it returns an IntegrityFailure and buf holds no plaintext of that
	// sector.
	ReadSectors(buf []byte, first uint64) error
	// WriteSectors encrypts buf (a whole number of sectors) and writes it
	// at sector first. It leaves buf unchanged: buf may be the kernel's
	// request, passed through without a copy.
	WriteSectors(buf []byte, first uint64) error
	// Sync makes every completed write durable in the image.
	Sync() error
	// Close syncs, marks the image clean where the format has such a flag,
	// and releases it.
	Close() error
}

// An IntegrityFailure is the error a Store returns for sectors whose
// integrity tags did not verify (volume.IntegrityError is one): the Disk
// counts them and logs each newly seen one.
type IntegrityFailure interface {
	error
	SectorNumbers() []uint64 // counted from the start of the data area
}

// A DirectReader is a Store whose whole-sector reads the FUSE ring (FUSE
// over io_uring) can split in two: image reads that the ring performs
// itself, then a step that checks and decrypts in place.
type DirectReader interface {
	// ReadPlan says where the ciphertext of n sectors from first lives
	// (fd, off) and, for stores with tags, where their tags live (tagFd,
	// tagOff, tagLen; tagLen 0 when there are none). An fd below zero
	// sends the request the slow way (ReadSectors).
	ReadPlan(first uint64, n int) (fd int, off int64, tagFd int, tagOff int64, tagLen int)
	// FinishRead verifies the ciphertext in buf against tags and decrypts
	// it in place. A sector that fails is an IntegrityFailure and its
	// plaintext is not left in buf.
	FinishRead(buf, tags []byte, first uint64) error
}

// Counters are the I/O statistics of a served image. Fields are updated
// atomically; Snapshot reads them all.
type Counters struct {
	reads, readBytes     atomic.Uint64
	writes, writeBytes   atomic.Uint64
	syncs                atomic.Uint64
	readErrors           atomic.Uint64
	writeErrors          atomic.Uint64
	integrityErrors      atomic.Uint64
	mu                   sync.Mutex
	badSectors           []uint64 // the first maxBadSectors distinct ones
	badSectorsOverflowed bool
}

// maxBadSectors bounds how many bad sector numbers status reports, so a
// wholly corrupted image cannot grow the server's memory.
const maxBadSectors = 64

// Stats is a snapshot of Counters.
type Stats struct {
	Reads           uint64   `json:"reads"`
	ReadBytes       uint64   `json:"read_bytes"`
	Writes          uint64   `json:"writes"`
	WriteBytes      uint64   `json:"write_bytes"`
	Syncs           uint64   `json:"syncs"`
	ReadErrors      uint64   `json:"read_errors"`
	WriteErrors     uint64   `json:"write_errors"`
	IntegrityErrors uint64   `json:"integrity_errors"`
	BadSectors      []uint64 `json:"bad_sectors,omitempty"`
	MoreBadSectors  bool     `json:"more_bad_sectors,omitempty"`
	// Transport is how FUSE requests reach the server (Server.Transport)
	// and RingReads how many reads the io_uring queue threads served
	// themselves; the counters leave them empty, Server.Stats fills them.
	Transport string `json:"transport,omitempty"`
	RingReads uint64 `json:"ring_reads,omitempty"`
}

// Snapshot returns the current values.
func (c *Counters) Snapshot() Stats {
	c.mu.Lock()
	bad := append([]uint64(nil), c.badSectors...)
	more := c.badSectorsOverflowed
	c.mu.Unlock()
	return Stats{
		Reads: c.reads.Load(), ReadBytes: c.readBytes.Load(),
		Writes: c.writes.Load(), WriteBytes: c.writeBytes.Load(),
		Syncs:      c.syncs.Load(),
		ReadErrors: c.readErrors.Load(), WriteErrors: c.writeErrors.Load(),
		IntegrityErrors: c.integrityErrors.Load(),
		BadSectors:      bad, MoreBadSectors: more,
	}
}

// noteBad records bad sectors and reports which ones were new.
func (c *Counters) noteBad(sectors []uint64) (fresh []uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
next:
	for _, s := range sectors {
		for _, b := range c.badSectors {
			if b == s {
				continue next
			}
		}
		fresh = append(fresh, s)
		if len(c.badSectors) < maxBadSectors {
			c.badSectors = append(c.badSectors, s)
		} else {
			c.badSectorsOverflowed = true
		}
	}
	return fresh
}

// ErrOutOfRange is returned for requests beyond the end of the device.
var ErrOutOfRange = errors.New("request beyond the end of the device")
