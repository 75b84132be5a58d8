// Package serve exposes an unlocked image as a Linux block device without
// kernel crypto: the decrypted sectors are served through FUSE as a single
// file, and that file is attached to a loop device (VeraCrypt's "no kernel
// crypto" path).
//
// The data path is: filesystem → /dev/loopN → FUSE file → Store → image.
// A Store turns byte-aligned whole-sector requests into ciphertext I/O on the
// image (and, for xtsctl volumes, into integrity-checked reads and re-tagged
// writes); this package adds the byte-range handling (read-modify-write of
// partial sectors), the counters that `xtsctl status` shows, the FUSE file,
// the loop device and the optional filesystem mount.
package serve

import (
	"errors"
	"fmt"
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
	// it returns an error that matches *IntegrityError and buf holds no
	// plaintext of that sector.
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

// An IntegrityError reports sectors whose integrity tags did not verify.
type IntegrityError struct {
	Sectors []uint64 // sector numbers, counted from the start of the data area
}

func (e *IntegrityError) Error() string {
	switch len(e.Sectors) {
	case 0:
		return "integrity check failed"
	case 1:
		return fmt.Sprintf("integrity check failed for sector %d", e.Sectors[0])
	}
	return fmt.Sprintf("integrity check failed for %d sectors, first %d", len(e.Sectors), e.Sectors[0])
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
	// Transport is how FUSE requests reach the server (Server.Transport);
	// the counters leave it empty, the server fills it in.
	Transport string `json:"transport,omitempty"`
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
