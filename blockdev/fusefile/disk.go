package fusefile

import (
	"errors"
	"fmt"
	"log"
	"sync"
	"unsafe"
)

// A Device serves byte ranges of a Store: it turns reads and writes at any
// offset into whole-sector Store calls (read-modify-write for partial
// sectors), keeps them consistent under concurrency, and counts them.
type Disk struct {
	store      Store
	sectorSize int64
	size       int64
	readOnly   bool
	logf       func(format string, args ...any)

	Counters Counters

	locks [lockStripes]sync.RWMutex
	bufs  sync.Pool
}

// Requests lock the 64 KiB chunks they cover: readers share, writers
// exclude. Whole-sector writes need this too: a read that ran between the
// data and the tag update of an xtsctl volume would see a false integrity
// error, and a read-modify-write racing a plain write could resurrect old
// bytes. Chunks map onto a fixed array of stripes; a request spans at most
// MaxRequest/64 KiB + 1 chunks, far fewer than the stripes, so its chunks
// never share a stripe.
const (
	chunkShift  = 16
	lockStripes = 1024
)

// MaxRequest is the largest request the FUSE file accepts (the kernel's
// FUSE_MAX_MAX_PAGES limit: 256 pages of 4 KiB).
const MaxRequest = 1 << 20

// NewDisk serves store. logf receives one line per newly seen bad
// sector; nil means log.Printf.
func NewDisk(store Store, readOnly bool, logf func(format string, args ...any)) *Disk {
	if logf == nil {
		logf = log.Printf
	}
	ss := int64(store.SectorSize())
	d := &Disk{
		store:      store,
		sectorSize: ss,
		size:       int64(store.Sectors()) * ss,
		readOnly:   readOnly,
		logf:       logf,
	}
	bufSize := MaxRequest + 2*int(ss)
	d.bufs.New = func() any { b := make([]byte, bufSize); return &b }
	return d
}

// Size is the device size in bytes.
func (d *Disk) Size() int64 { return d.size }

// ReadOnly reports whether writes are refused.
func (d *Disk) ReadOnly() bool { return d.readOnly }

// SectorSize is the store's sector size.
func (d *Disk) SectorSize() int { return int(d.sectorSize) }

// ErrReadOnly is returned by WriteAt on a read-only device.
var ErrReadOnly = errors.New("device is read-only")

// lockRange locks the chunks covering [off, off+n).
func (d *Disk) lockRange(off, n int64, write bool) (unlock func()) {
	unlock, _ = d.lockStripes(d.stripes(off, n), write, false)
	return unlock
}

// tryLockRange is lockRange for callers that must not wait (a ring
// thread): it takes every lock or none.
func (d *Disk) tryLockRange(off, n int64, write bool) (unlock func(), ok bool) {
	return d.lockStripes(d.stripes(off, n), write, true)
}

func (d *Disk) lockStripes(stripes []int, write, try bool) (unlock func(), ok bool) {
	release := func(held []int) {
		for _, s := range held {
			if write {
				d.locks[s].Unlock()
			} else {
				d.locks[s].RUnlock()
			}
		}
	}
	for i, s := range stripes {
		got := true
		switch {
		case write && try:
			got = d.locks[s].TryLock()
		case try:
			got = d.locks[s].TryRLock()
		case write:
			d.locks[s].Lock()
		default:
			d.locks[s].RLock()
		}
		if !got {
			release(stripes[:i])
			return nil, false
		}
	}
	return func() { release(stripes) }, true
}

// stripes lists, in ascending order, the lock stripes of the chunks
// covering [off, off+n).
func (d *Disk) stripes(off, n int64) []int {
	first, last := off>>chunkShift, (off+n-1)>>chunkShift
	var stripes []int
	if last-first+1 >= lockStripes {
		stripes = make([]int, lockStripes)
		for i := range stripes {
			stripes[i] = i
		}
	} else {
		lo, hi := int(first%lockStripes), int(last%lockStripes)
		if lo <= hi {
			for i := lo; i <= hi; i++ {
				stripes = append(stripes, i)
			}
		} else { // wraps: keep ascending order so lockers never deadlock
			for i := 0; i <= hi; i++ {
				stripes = append(stripes, i)
			}
			for i := lo; i < lockStripes; i++ {
				stripes = append(stripes, i)
			}
		}
	}
	return stripes
}

func (d *Disk) check(n int, off int64) error {
	if off < 0 || n < 0 || off > d.size || int64(n) > d.size-off {
		return fmt.Errorf("%w: %d bytes at %d, device size %d", ErrOutOfRange, n, off, d.size)
	}
	if n > MaxRequest {
		panic(fmt.Sprintf("serve: request of %d bytes exceeds MaxRequest", n))
	}
	return nil
}

// ReadAt fills p with the plaintext at off. It fills all of p or fails: a
// sector that fails verification fails the whole request (with an
// IntegrityFailure), so no unverified byte is ever returned.
func (d *Disk) ReadAt(p []byte, off int64) error {
	if err := d.check(len(p), off); err != nil {
		return err
	}
	if len(p) == 0 {
		return nil
	}
	d.Counters.reads.Add(1)
	unlock := d.lockRange(off, int64(len(p)), false)
	defer unlock()
	first, lo, span := d.cover(off, len(p))
	var err error
	if lo == 0 && span == len(p) {
		err = d.store.ReadSectors(p, first)
	} else {
		bp := d.bufs.Get().(*[]byte)
		buf := (*bp)[:span]
		if err = d.store.ReadSectors(buf, first); err == nil {
			copy(p, buf[lo:])
		}
		clear(buf) // plaintext does not linger in pooled buffers
		d.bufs.Put(bp)
	}
	if err != nil {
		clear(p)
		d.noteReadError(err)
		return err
	}
	d.Counters.readBytes.Add(uint64(len(p)))
	return nil
}

func (d *Disk) noteReadError(err error) {
	var ie IntegrityFailure
	if !errors.As(err, &ie) {
		d.Counters.readErrors.Add(1)
		d.logf("read error: %v", err)
		return
	}
	bad := ie.SectorNumbers()
	d.Counters.integrityErrors.Add(uint64(max(len(bad), 1)))
	for _, s := range d.Counters.noteBad(bad) {
		d.logf("integrity error: sector %d failed verification; reads of it return EIO", s)
	}
}

// cover returns the first sector of the sectors covering [off, off+n),
// where the request starts within them, and their total length.
func (d *Disk) cover(off int64, n int) (first uint64, lo, span int) {
	start := off / d.sectorSize * d.sectorSize
	end := (off + int64(n) + d.sectorSize - 1) / d.sectorSize * d.sectorSize
	return uint64(start / d.sectorSize), int(off - start), int(end - start)
}

// WriteAt writes p at off: whole sectors are encrypted and written directly,
// partial ones are read, patched and written back. Either all of p is
// written or an error is returned.
func (d *Disk) WriteAt(p []byte, off int64) error {
	if d.readOnly {
		return ErrReadOnly
	}
	if err := d.check(len(p), off); err != nil {
		return err
	}
	if len(p) == 0 {
		return nil
	}
	d.Counters.writes.Add(1)
	unlock := d.lockRange(off, int64(len(p)), true)
	defer unlock()
	first, lo, span := d.cover(off, len(p))
	if lo == 0 && span == len(p) {
		if err := d.store.WriteSectors(p, first); err != nil {
			d.Counters.writeErrors.Add(1)
			d.logf("write error: %v", err)
			return err
		}
		d.Counters.writeBytes.Add(uint64(len(p)))
		return nil
	}
	bp := d.bufs.Get().(*[]byte)
	buf := (*bp)[:span]
	defer func() {
		clear(buf)
		d.bufs.Put(bp)
	}()
	ss := int(d.sectorSize)
	if lo != 0 {
		if err := d.readForPatch(buf[:ss], first); err != nil {
			return err
		}
	}
	if tail := (lo + len(p)) % ss; tail != 0 && (span > ss || lo == 0) {
		last := span - ss
		if err := d.readForPatch(buf[last:], first+uint64(last/ss)); err != nil {
			return err
		}
	}
	copy(buf[lo:], p)
	if err := d.store.WriteSectors(buf, first); err != nil {
		d.Counters.writeErrors.Add(1)
		d.logf("write error: %v", err)
		return err
	}
	d.Counters.writeBytes.Add(uint64(len(p)))
	return nil
}

// readForPatch reads the sector that a partial write patches. A sector
// that fails verification cannot be patched: rewriting it would tag
// unverified bytes as good.
func (d *Disk) readForPatch(buf []byte, n uint64) error {
	err := d.store.ReadSectors(buf, n)
	if err != nil {
		d.noteReadError(err)
	}
	return err
}

// Sync makes completed writes durable.
func (d *Disk) Sync() error {
	d.Counters.syncs.Add(1)
	if d.readOnly {
		return nil
	}
	return d.store.Sync()
}

// alignment is what O_DIRECT asks of buffers on every Linux filesystem
// and block device (at most the page size).
const alignment = 4096

// AlignedBuffer returns n bytes aligned for O_DIRECT.
func AlignedBuffer(n int) []byte {
	b := make([]byte, n+alignment)
	off := int(uintptr(unsafe.Pointer(&b[0])) & (alignment - 1))
	if off != 0 {
		off = alignment - off
	}
	return b[off : off+n : off+n]
}
