package volume

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/xtsctl/xtsctl/blake2b"
	"github.com/xtsctl/xtsctl/sector"
	"golang.org/x/sys/unix"
)

// Volume is an unlocked xtsctl volume: sector I/O with integrity tags, and
// the state area. ReadSectors, WriteSectors and Sync are safe for concurrent
// use (concurrent writes to the same sectors land in some order, as on a
// disk); the region and state methods are too.
type Volume struct {
	dev      Device
	file     *os.File // when opened by path: closed by Close
	hs       *Headers
	h        *Header
	l        Layout
	readOnly bool

	key   []byte
	codec *sector.Codec // its Wipe erases the XTS keys
	// workers is how many goroutines one large ReadSectors or
	// WriteSectors call spreads its tags and encryption over.
	workers int
	tagKey  []byte
	track   *tracker // the dirty regions of WriteSectors and Sync

	warnings []string

	mu            sync.Mutex // guards the fields below
	state         State
	stateKeys     *stateKeys           // version 2: authenticate the state area
	knownBitmaps  [][stateMACSize]byte // version 2: MACs of the bitmaps the usable records describe
	writing       bool                 // the state record says Dirty and DigestStale for this session
	needsRecovery bool                 // Dirty when opened: Close must not mark it clean before Recover
	pinned        map[int64]bool       // regions holding sectors Recover found mismatched and left alone
	bitmap        []byte               // loaded on first use
	bitmapDirty   map[int64]bool
	closed        bool
	scratch       sync.Pool
	lastSlot      int
}

// Errors of Open and of sector I/O.
var (
	ErrInUse    = errors.New("the image is in use by another process (open, or being changed)")
	ErrReadOnly = errors.New("volume is open read-only")
	ErrClosed   = errors.New("volume is closed")
)

// BadSector names a sector whose tag does not match.
type BadSector struct {
	Sector uint64 // data sector number, from 0
	Offset int64  // byte offset of its ciphertext in the volume
	// DirtyRegion (set by Verify) says the sector lies in a region being
	// written when the volume was last used and not closed cleanly since
	// (or the record of those regions cannot be trusted): a crash may
	// have torn it, where any other bad sector was changed outside xtsctl.
	DirtyRegion bool
}

// IntegrityError lists the sectors of a read whose tags do not match. Their
// bytes in the read buffer are zeroed: unverified plaintext is never
// returned.
type IntegrityError struct{ Sectors []BadSector }

// SectorNumbers lists the failing sectors' numbers: what a server that
// knows nothing of the format counts and logs.
func (e *IntegrityError) SectorNumbers() []uint64 {
	n := make([]uint64, len(e.Sectors))
	for i, b := range e.Sectors {
		n[i] = b.Sector
	}
	return n
}

func (e *IntegrityError) Error() string {
	const show = 8
	var b strings.Builder
	fmt.Fprintf(&b, "integrity check failed for %d sector", len(e.Sectors))
	if len(e.Sectors) != 1 {
		b.WriteString("s")
	}
	b.WriteString(":")
	for i, s := range e.Sectors {
		if i == show {
			fmt.Fprintf(&b, " and %d more", len(e.Sectors)-show)
			break
		}
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, " sector %d (byte offset %d)", s.Sector, s.Offset)
	}
	return b.String()
}

// Open opens the volume at path (an image file or block device) and
// unlocks it with passphrase. A read-write open takes an exclusive lock on
// the file, a read-only open a shared one, so that two processes never
// write the same volume. Warnings (a damaged header copy, an unclean
// shutdown) are in Warnings.
func Open(path string, passphrase []byte, readOnly bool) (*Volume, error) {
	return openPath(path, readOnly, func(hs *Headers) ([]byte, int, error) { return hs.Unlock(passphrase) })
}

// WithKey returns an unlock function (for OpenWith and OpenDevice) that
// takes masterKey, once the header's MAC shows it is this volume's, and
// uses a copy of it.
func WithKey(masterKey []byte) func(*Headers) ([]byte, int, error) {
	return func(hs *Headers) ([]byte, int, error) {
		if err := hs.CheckKey(masterKey); err != nil {
			return nil, -1, err
		}
		return slices.Clone(masterKey), -1, nil
	}
}

// OpenWith opens the volume at path, locked as Open does, and unlocks it
// with unlock (usually a call of Headers.UnlockWith).
func OpenWith(path string, readOnly bool, unlock func(*Headers) ([]byte, int, error)) (*Volume, error) {
	return openPath(path, readOnly, unlock)
}

func openPath(path string, readOnly bool, unlock func(*Headers) ([]byte, int, error)) (*Volume, error) {
	f, err := LockImage(path, readOnly, 0)
	if err != nil {
		return nil, err
	}
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		f.Close()
		return nil, err
	}
	v, err := OpenDevice(f, size, readOnly, unlock)
	if err != nil {
		f.Close()
		return nil, err
	}
	v.file = f
	return v, nil
}

// LockImage opens the image (a file or block device) at path and locks
// it the one way every xtsctl process does: exclusively to write, shared
// to read (flock, which a loop device holding the file keeps for as long
// as it is attached). So a volume is never written by two processes, nor
// its header rewritten while it is served. It returns ErrInUse when
// another holds a conflicting lock. flag adds open flags (O_DIRECT).
func LockImage(path string, readOnly bool, flag int) (*os.File, error) {
	mode, lock := os.O_RDWR, unix.LOCK_EX
	if readOnly {
		mode, lock = os.O_RDONLY, unix.LOCK_SH
	}
	f, err := os.OpenFile(path, mode|flag, 0)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), lock|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, ErrInUse
		}
		return nil, fmt.Errorf("cannot lock %s: %w", path, err)
	}
	return f, nil
}

// OpenDevice opens a volume on dev (size bytes); unlock turns its headers
// into the master key and slot number, usually with Headers.Unlock.
func OpenDevice(dev Device, size int64, readOnly bool, unlock func(*Headers) ([]byte, int, error)) (*Volume, error) {
	hs, err := ReadHeaders(dev, size)
	if err != nil {
		return nil, err
	}
	key, slot, err := unlock(hs)
	if err != nil {
		return nil, err
	}
	v, err := newVolume(dev, hs, key, readOnly)
	if err != nil {
		clear(key)
		return nil, err
	}
	v.lastSlot = slot
	return v, nil
}

func newVolume(dev Device, hs *Headers, key []byte, readOnly bool) (*Volume, error) {
	h := hs.Header
	codec, err := sector.NewCodecKey(key, h.sectorParams())
	if err != nil {
		return nil, err
	}
	v := &Volume{
		dev: dev, hs: hs, h: h, l: h.Layout, readOnly: readOnly,
		key: key, codec: codec, workers: runtime.GOMAXPROCS(0),
		warnings: slices.Clone(hs.Warnings),
	}
	v.track = newTracker(v)
	if h.Integrity != IntegrityNone {
		v.tagKey = deriveKey(key, purposeTags, blake2b.Size)
	}
	if h.Version >= 2 {
		v.stateKeys = newStateKeys(key)
	}
	res := readState(dev, h, v.stateKeys)
	v.state = res.inForce
	v.warnings = append(v.warnings, res.warn...)
	for _, s := range []State{res.inForce, res.other} {
		if s.Valid && s.Authenticated {
			v.knownBitmaps = append(v.knownBitmaps, s.bitmapMAC)
		}
	}
	if h.Version == 1 && res.found < 2 && hasV2Record(dev) {
		v.warnings = append(v.warnings, "the header is format version 1 but the state area holds version-2 records: an upgrade was interrupted, or the header was rolled back to a copy from before it")
	}
	if !v.state.Valid || v.state.Dirty {
		v.needsRecovery = true
		v.warnings = append(v.warnings, "the volume was not closed cleanly: sectors being written then may fail their integrity check (a read-write open checks them)")
	}
	return v, nil
}

// Header returns a copy of the header in use.
func (v *Volume) Header() Header { return *v.h }

// Layout returns where the areas of the volume are.
func (v *Volume) Layout() Layout { return v.l }

// Headers returns what was found reading the header copies.
func (v *Volume) Headers() *Headers { return v.hs }

// Slot is the key slot the passphrase opened (-1 when opened with the key).
func (v *Volume) Slot() int { return v.lastSlot }

// Warnings lists what Open found wrong but could work around.
func (v *Volume) Warnings() []string { return slices.Clone(v.warnings) }

// MasterKey returns a copy of the master key, which is the XTS key of the
// data area (the key of the dm-crypt table). The caller wipes it.
func (v *Volume) MasterKey() []byte { return slices.Clone(v.key) }

// Sectors is the number of data sectors.
func (v *Volume) Sectors() uint64 { return uint64(v.l.Sectors()) }

// SectorSize is the data sector size in bytes.
func (v *Volume) SectorSize() int { return v.l.SectorSize }

func (v *Volume) checkRange(buf []byte, first uint64) (uint64, error) {
	size := uint64(v.l.SectorSize)
	if uint64(len(buf))%size != 0 {
		panic(fmt.Sprintf("volume: buffer of %d bytes is not a whole number of %d-byte sectors", len(buf), size))
	}
	n := uint64(len(buf)) / size
	if first > v.Sectors() || n > v.Sectors()-first {
		return 0, fmt.Errorf("sectors %d..%d are beyond the end of the volume (%d sectors)", first, first+n, v.Sectors())
	}
	return n, nil
}

// ReadSectors reads len(buf)/SectorSize sectors starting at sector first,
// checks their tags and decrypts them into buf. A sector whose tag does not
// match is zeroed in buf and listed in the *IntegrityError returned; the
// other sectors are decrypted.
func (v *Volume) ReadSectors(buf []byte, first uint64) error {
	n, err := v.checkRange(buf, first)
	if err != nil || n == 0 {
		return err
	}
	if _, err := v.dev.ReadAt(buf, v.l.SectorOffset(first)); err != nil {
		return fmt.Errorf("cannot read sectors %d..%d: %w", first, first+n-1, err)
	}
	if v.l.Integrity == IntegrityNone {
		return v.OpenSectors(buf, nil, first)
	}
	stored := v.getScratch(int(n) * v.l.TagSize)
	defer v.putScratch(stored)
	if _, err := v.dev.ReadAt(stored, v.l.TagPosition(first)); err != nil {
		return fmt.Errorf("cannot read the tags of sectors %d..%d: %w", first, first+n-1, err)
	}
	return v.OpenSectors(buf, stored, first)
}

// OpenSectors verifies the ciphertext of the sectors from first in buf
// against their stored tags (as read from the tag area at
// Layout().TagPosition(first); nil without integrity) and decrypts it in
// place: the second half of ReadSectors, for callers that read the image
// themselves. A sector that fails verification is cleared and reported in
// an *IntegrityError.
func (v *Volume) OpenSectors(buf, stored []byte, first uint64) error {
	ss, ts := v.l.SectorSize, v.l.TagSize
	var bad []BadSector
	if v.l.Integrity != IntegrityNone {
		if n := len(buf) / ss; len(stored) != n*ts {
			return fmt.Errorf("volume: %d bytes of tags for %d sectors", len(stored), n)
		}
		computed := v.getScratch(len(stored))
		defer v.putScratch(computed)
		v.sumTags(computed, buf, first)
		bad = v.compareTags(stored, computed, first)
	}
	v.codec.Decrypt(buf, buf, first)
	if len(bad) == 0 {
		return nil
	}
	for _, b := range bad {
		i := int(b.Sector-first) * ss
		clear(buf[i : i+ss])
	}
	return &IntegrityError{Sectors: bad}
}

// compareTags returns the sectors whose stored tag differs from the one
// computed over their ciphertext.
func (v *Volume) compareTags(stored, computed []byte, first uint64) []BadSector {
	var bad []BadSector
	ts := v.l.TagSize
	for i := 0; i < len(stored); i += ts {
		if subtle.ConstantTimeCompare(stored[i:i+ts], computed[i:i+ts]) != 1 {
			n := first + uint64(i/ts)
			bad = append(bad, BadSector{Sector: n, Offset: v.l.SectorOffset(n)})
		}
	}
	return bad
}

// tagParallelMin is the size from which tags are computed on several cores.
const tagParallelMin = 256 << 10

// sumTags computes the tags of the ciphertext sectors in data.
func (v *Volume) sumTags(tags, data []byte, first uint64) {
	ss, ts := v.l.SectorSize, v.l.TagSize
	sectors := len(data) / ss
	workers := min(v.workers, len(data)/(tagParallelMin/2))
	if workers <= 1 {
		blake2b.SumSectors(tags, ts, v.tagKey, first, data, ss)
		return
	}
	per := (sectors + workers - 1) / workers
	var wg sync.WaitGroup
	for lo := 0; lo < sectors; lo += per {
		hi := min(lo+per, sectors)
		wg.Add(1)
		go func() {
			defer wg.Done()
			blake2b.SumSectors(tags[lo*ts:hi*ts], ts, v.tagKey, first+uint64(lo), data[lo*ss:hi*ss], ss)
		}()
	}
	wg.Wait()
}

// WriteSectors encrypts the len(buf)/SectorSize sectors of buf (which it
// leaves unchanged), writes them at sector first, and writes their tags.
// It follows the writer protocol of docs/FORMAT.md: the first write of a
// session records, synced, that the volume is dirty and its digest stale;
// a region is marked dirty, durably, before its first write; and Sync
// clears the regions it made durable. The data and its tags reach the
// device in no particular order and only Sync makes them durable. It is
// safe for concurrent use.
func (v *Volume) WriteSectors(buf []byte, first uint64) error {
	if v.readOnly {
		return ErrReadOnly
	}
	n, err := v.checkRange(buf, first)
	if err != nil || n == 0 {
		return err
	}
	return v.track.write(first, first+n-1, func() error { return v.writeSectors(buf, first, n) })
}

func (v *Volume) writeSectors(buf []byte, first, n uint64) error {
	if err := v.beginWriting(); err != nil {
		return err
	}
	ts := v.l.TagSize
	scratch := v.getScratch(len(buf) + int(n)*ts)
	defer v.putScratch(scratch)
	ct, tags := scratch[:len(buf)], scratch[len(buf):]
	v.codec.Encrypt(ct, buf, first)
	if _, err := v.dev.WriteAt(ct, v.l.SectorOffset(first)); err != nil {
		return fmt.Errorf("cannot write sectors %d..%d: %w", first, first+n-1, err)
	}
	if v.l.Integrity != IntegrityNone {
		v.sumTags(tags, ct, first)
		if _, err := v.dev.WriteAt(tags, v.l.TagPosition(first)); err != nil {
			return fmt.Errorf("cannot write the tags of sectors %d..%d: %w", first, first+n-1, err)
		}
	}
	return nil
}

// MarkModified records, durably, that the volume is being written (dirty,
// and its digest stale) without writing through WriteSectors: for a backend
// that hands the data area to another writer, such as the kernel's
// dm-crypt. WriteSectors calls it itself; Close
// marks the volume clean again.
func (v *Volume) MarkModified() error {
	if v.readOnly {
		return ErrReadOnly
	}
	return v.beginWriting()
}

// beginWriting persists Dirty and DigestStale before the first write.
func (v *Volume) beginWriting() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.beginWritingLocked()
}

func (v *Volume) beginWritingLocked() error {
	if v.closed {
		return ErrClosed
	}
	if v.writing {
		return nil
	}
	s := v.state
	s.Dirty, s.DigestStale = true, true
	if err := v.recordLocked(s); err != nil {
		return err
	}
	v.writing = true
	return nil
}

// recordLocked writes s as the next state record: the next sequence number,
// into the slot that does not hold the record in force, synced. A torn
// write damages only the record being written, and the previous one stays
// in force. A version-2 record names the bitmap as it is in memory, which
// the caller writes after it (see markRegions for why in that order).
func (v *Volume) recordLocked(s State) error {
	if s.Sequence+1 >= maxStateSequence {
		return errors.New("the state records' sequence numbers are exhausted")
	}
	s.Sequence++
	return v.writeRecordLocked(s)
}

// writeRecordLocked writes s at its sequence number's slot and syncs.
func (v *Volume) writeRecordLocked(s State) error {
	s.Valid = true
	if v.stateKeys != nil {
		if err := v.loadBitmapLocked(); err != nil {
			return err
		}
		s.bitmapMAC = v.stateKeys.bitmapMAC(v.bitmap)
		s.Authenticated = true
	}
	b := marshalState(s, v.h.Version, v.h.UUID, v.stateKeys)
	if _, err := v.dev.WriteAt(b, StateOffset+int64(s.Sequence%2)*StateRecordSize); err != nil {
		return fmt.Errorf("cannot write the state record: %w", err)
	}
	if err := v.dev.Sync(); err != nil {
		return fmt.Errorf("cannot sync the state record: %w", err)
	}
	v.state = s
	return nil
}

func (v *Volume) getScratch(n int) []byte {
	if p, ok := v.scratch.Get().(*[]byte); ok && cap(*p) >= n {
		return (*p)[:n]
	}
	return make([]byte, n)
}

func (v *Volume) putScratch(b []byte) {
	clear(b) // it may have held plaintext
	v.scratch.Put(&b)
}

// SetWorkers sets how many goroutines one large ReadSectors or
// WriteSectors call uses for its tags and encryption (at least 1; the
// default is GOMAXPROCS). A server that runs many requests at once has its
// parallelism already and does better with few.
func (v *Volume) SetWorkers(n int) {
	v.workers = max(n, 1)
	v.codec.SetWorkers(v.workers)
}

// Sync makes every completed write (data and tags) and bitmap update
// durable, then clears the regions whose writes it made durable (the
// clears reach the disk with the next Sync).
func (v *Volume) Sync() error {
	if v.readOnly {
		return v.syncNow()
	}
	return v.track.sync(v.syncNow)
}

func (v *Volume) syncNow() error {
	v.mu.Lock()
	err := v.writeBitmapLocked()
	v.mu.Unlock()
	if err != nil {
		return err
	}
	if err := v.dev.Sync(); err != nil {
		return fmt.Errorf("cannot sync the volume: %w", err)
	}
	return nil
}

// writeBitmapLocked writes the bitmap blocks changed in memory (not
// synced). In version 2 a state record naming the new bitmap goes first,
// synced: so the bitmap on the disk is always one that a usable record
// names, the new one or, until its write completes, the old one.
func (v *Volume) writeBitmapLocked() error {
	if len(v.bitmapDirty) == 0 {
		return nil
	}
	if v.stateKeys != nil {
		if err := v.recordLocked(v.state); err != nil {
			return err
		}
		v.knownBitmaps = [][stateMACSize]byte{v.state.bitmapMAC}
	}
	return v.flushBitmapBlocksLocked()
}

// State returns the volume's state as last read or written.
func (v *Volume) State() State {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.state
}

// RegionOf returns the dirty region holding data sector n.
func (v *Volume) RegionOf(n uint64) int64 { return int64(n / uint64(v.l.sectorsPerRegion())) }

// regionSectors returns the first sector and the number of sectors of a
// dirty region (the last region may be short).
func (v *Volume) regionSectors(region int64) (first, count uint64) {
	per := uint64(v.l.sectorsPerRegion())
	first = uint64(region) * per
	return first, min(per, v.Sectors()-first)
}

func (v *Volume) loadBitmapLocked() error {
	if v.bitmap != nil {
		return nil
	}
	b := make([]byte, v.l.bitmapLength())
	if _, err := v.dev.ReadAt(b, BitmapOffset); err != nil {
		return fmt.Errorf("cannot read the dirty-region bitmap: %w", err)
	}
	v.bitmap, v.bitmapDirty = b, map[int64]bool{}
	return nil
}

// DirtyRegions lists the regions marked in the bitmap, in order. In a
// version-2 volume opened after a crash, the bitmap is only believed once
// Recover has authenticated it.
func (v *Volume) DirtyRegions() ([]int64, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.loadBitmapLocked(); err != nil {
		return nil, err
	}
	return v.markedLocked(), nil
}

func (v *Volume) markedLocked() []int64 {
	var regions []int64
	for r := range v.l.Regions() {
		if i, bit := bitmapBit(r); v.bitmap[i]&bit != 0 {
			regions = append(regions, r)
		}
	}
	return regions
}

// markRegions sets the regions' bits and makes them durable before it
// returns (the tracker calls it before writing to a region that is not
// marked yet).
//
// In version 2 that takes two syncs: a state record naming the new bitmap
// (its MAC), then the bitmap. The other order would leave, after a crash
// between the two, a bitmap no record names, which recovery cannot tell
// from a forged one and must treat as unknown (every region checked).
func (v *Volume) markRegions(regions ...int64) error {
	if v.readOnly {
		return ErrReadOnly
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		return ErrClosed
	}
	if err := v.setBitsLocked(regions, true); err != nil {
		return err
	}
	if !v.writing {
		// The first record of the session says dirty; in version 2 it
		// also names the bitmap with these bits, so one record serves.
		if err := v.beginWritingLocked(); err != nil {
			return err
		}
		if v.stateKeys != nil {
			v.knownBitmaps = [][stateMACSize]byte{v.state.bitmapMAC}
			if err := v.flushBitmapBlocksLocked(); err != nil {
				return err
			}
		}
	}
	if err := v.writeBitmapLocked(); err != nil {
		return err
	}
	if err := v.dev.Sync(); err != nil {
		return fmt.Errorf("cannot sync the dirty-region bitmap: %w", err)
	}
	return nil
}

// flushBitmapBlocksLocked writes the changed bitmap blocks without a state
// record: for a caller that has just written the record naming them.
func (v *Volume) flushBitmapBlocksLocked() error {
	for blk := range v.bitmapDirty {
		off := blk * bitmapAlign
		if _, err := v.dev.WriteAt(v.bitmap[off:off+bitmapAlign], BitmapOffset+off); err != nil {
			return fmt.Errorf("cannot write the dirty-region bitmap: %w", err)
		}
		delete(v.bitmapDirty, blk)
	}
	return nil
}

// clearRegions clears the regions' bits once everything written to them is
// synced. The cleared bits reach the device with the next Sync or bitmap
// update (a bit left set only costs a check after a crash). A region
// holding sectors that Recover found mismatched stays marked.
func (v *Volume) clearRegions(regions ...int64) error {
	if v.readOnly {
		return ErrReadOnly
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	regions = slices.DeleteFunc(slices.Clone(regions), func(r int64) bool { return v.pinned[r] })
	return v.setBitsLocked(regions, false)
}

func (v *Volume) setBitsLocked(regions []int64, set bool) error {
	if err := v.loadBitmapLocked(); err != nil {
		return err
	}
	for _, r := range regions {
		if r < 0 || r >= v.l.Regions() {
			return fmt.Errorf("region %d is beyond the last region %d", r, v.l.Regions()-1)
		}
		i, bit := bitmapBit(r)
		old := v.bitmap[i]
		if set {
			v.bitmap[i] |= bit
		} else {
			v.bitmap[i] &^= bit
		}
		if v.bitmap[i] != old {
			v.bitmapDirty[i/bitmapAlign] = true
		}
	}
	return nil
}

// Recovery reports what Recover checked and what it found.
type Recovery struct {
	// Regions is how many dirty regions were checked, of Sectors sectors.
	Regions int64
	Sectors uint64
	// AllRegions: no usable state record, or a bitmap that no usable record
	// names, so every region was checked.
	AllRegions bool
	// Mismatched counts the sectors whose tags do not match their data;
	// Sectors lists the first MaxReported of them.
	Mismatched uint64
	BadSectors []BadSector
	// Repaired: the mismatched sectors were re-tagged, accepting their
	// current data. Otherwise they still fail their check, and their
	// regions stay marked so the next read-write open reports them again.
	Repaired bool
}

// MaxReported bounds the bad sectors a Recovery lists.
const MaxReported = 1000

// Recover checks a volume that was not closed cleanly: the tag of every
// sector of every region marked dirty (all regions when the state or the
// bitmap cannot be trusted) is compared with its data. Sectors that match
// are left alone. Sectors that do not are reported and, only if repair is
// true (the user asked), re-tagged from their current data, which accepts
// whatever a crash tore into them. Then the volume is recorded clean, or,
// if mismatched sectors were left, dirty with only their regions marked.
// On a volume that was closed cleanly it does nothing.
//
// A crash of an xtsctl server can leave mismatched only the sectors it was
// writing at that moment: anything else that fails was changed outside
// xtsctl, which is why nothing is re-tagged without being asked. progress,
// if not nil, receives the bytes checked.
func (v *Volume) Recover(ctx context.Context, repair bool, progress func(int64)) (*Recovery, error) {
	if v.readOnly {
		return nil, ErrReadOnly
	}
	v.mu.Lock()
	pending := v.needsRecovery
	v.mu.Unlock()
	rec := &Recovery{}
	if !pending {
		return rec, nil
	}
	regions, all, err := v.RecoveryRegions()
	if err != nil {
		return nil, err
	}
	rec.AllRegions, rec.Regions = all, int64(len(regions))
	pinned := map[int64]bool{}
	var done int64
	for _, r := range regions {
		first, count := v.regionSectors(r)
		rec.Sectors += count
		if v.l.Integrity == IntegrityNone {
			continue
		}
		err := v.checkSectors(ctx, first, count, func(b BadSector, tag []byte) error {
			rec.Mismatched++
			if len(rec.BadSectors) < MaxReported {
				rec.BadSectors = append(rec.BadSectors, b)
			}
			if !repair {
				pinned[r] = true
				return nil
			}
			if _, err := v.dev.WriteAt(tag, v.l.TagPosition(b.Sector)); err != nil {
				return fmt.Errorf("cannot write the tag of sector %d: %w", b.Sector, err)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		done += int64(count) * int64(v.l.SectorSize)
		if progress != nil {
			progress(done)
		}
	}
	rec.Repaired = repair && rec.Mismatched > 0
	if err := v.dev.Sync(); err != nil {
		return nil, fmt.Errorf("cannot sync the volume: %w", err)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.pinned = pinned
	if err := v.settleLocked(); err != nil {
		return nil, err
	}
	v.needsRecovery = false
	return rec, nil
}

// RecoveryRegions returns the regions Recover checks: those marked dirty
// in a bitmap that a usable state record names, or all of them (all true)
// when the state or the bitmap cannot be trusted. It means something only
// for a volume that was not closed cleanly.
func (v *Volume) RecoveryRegions() (regions []int64, all bool, err error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.loadBitmapLocked(); err != nil {
		return nil, false, err
	}
	trusted := v.state.Valid
	if trusted && v.stateKeys != nil {
		mac := v.stateKeys.bitmapMAC(v.bitmap)
		trusted = slices.Contains(v.knownBitmaps, mac)
	}
	if trusted {
		return v.markedLocked(), false, nil
	}
	regions = make([]int64, v.l.Regions())
	for i := range regions {
		regions[i] = int64(i)
	}
	return regions, true, nil
}

// checkSectors compares the tags of count sectors from first with their
// data and calls bad, with the tag the data should have, for each that
// does not match.
func (v *Volume) checkSectors(ctx context.Context, first, count uint64, bad func(BadSector, []byte) error) error {
	const batch = 1 << 20
	ss, ts := uint64(v.l.SectorSize), uint64(v.l.TagSize)
	per := batch / ss
	buf := make([]byte, per*(ss+2*ts))
	for done := uint64(0); done < count; {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := min(per, count-done)
		s := first + done
		data := buf[:n*ss]
		stored := buf[per*ss:][:n*ts]
		computed := buf[per*(ss+ts):][:n*ts]
		if _, err := v.checkRange(data, s); err != nil {
			return err
		}
		if _, err := v.dev.ReadAt(data, v.l.SectorOffset(s)); err != nil {
			return fmt.Errorf("cannot read sectors %d..%d: %w", s, s+n-1, err)
		}
		if _, err := v.dev.ReadAt(stored, v.l.TagPosition(s)); err != nil {
			return fmt.Errorf("cannot read the tags of sectors %d..%d: %w", s, s+n-1, err)
		}
		v.sumTags(computed, data, s)
		for _, b := range v.compareTags(stored, computed, s) {
			i := (b.Sector - s) * ts
			if err := bad(b, computed[i:i+ts]); err != nil {
				return err
			}
		}
		done += n
	}
	return nil
}

// settleLocked records the end of a session whose data and tags are
// synced: the bitmap marks exactly the regions Recover left mismatched
// sectors in, and the state says clean, or dirty if any remain.
func (v *Volume) settleLocked() error {
	if err := v.loadBitmapLocked(); err != nil {
		return err
	}
	for i := range v.bitmap {
		var keep byte
		for bit := range 8 {
			if v.pinned[int64(i)*8+int64(bit)] {
				keep |= 1 << bit
			}
		}
		// Exactly the pinned regions: after a recovery of every region
		// the bitmap on the disk was untrusted and may lack their bits,
		// and a dirty record naming a bitmap without them would have
		// the next open check nothing and record the volume clean.
		if v.bitmap[i] != keep {
			v.bitmap[i] = keep
			v.bitmapDirty[int64(i)/bitmapAlign] = true
		}
	}
	s := v.state
	// An unreadable state leaves the digest's meaning unknown: stale.
	s.DigestStale = s.DigestStale || !s.Valid || v.writing
	s.Dirty = len(v.pinned) > 0
	if v.stateKeys != nil {
		// The record first (it names the bitmap that follows): a crash
		// before the bitmap lands leaves a clean record, or a dirty one
		// naming a bitmap that is a subset of the one on the disk.
		if err := v.recordLocked(s); err != nil {
			return err
		}
		v.knownBitmaps = [][stateMACSize]byte{v.state.bitmapMAC}
		if err := v.flushBitmapBlocksLocked(); err != nil {
			return err
		}
		if err := v.dev.Sync(); err != nil {
			return fmt.Errorf("cannot sync the dirty-region bitmap: %w", err)
		}
	} else {
		// Version 1: the bitmap first, so that a clean record is never
		// followed by a bitmap with bits set.
		if err := v.flushBitmapBlocksLocked(); err != nil {
			return err
		}
		if err := v.recordLocked(s); err != nil { // syncs the bitmap too
			return err
		}
	}
	v.writing = false
	return nil
}

// Upgrade rewrites a version-1 volume, opened read-write and recovered, as
// version 2, whose state area is authenticated; it returns false for a
// volume that is version 2 already. The state carries over. A crash at any
// moment leaves a volume that opens as version 1 (and is upgraded again) or
// as version 2:
//
//  1. a version-2 state record goes into the state slot that does not hold
//     the version-1 record in force, synced: version 1 cannot read it and
//     keeps using the other;
//  2. the header is rewritten as version 2 (both copies, writeHeader);
//     from then on only the version-2 record is usable;
//  3. a second version-2 record replaces the version-1 one.
func (v *Volume) Upgrade() (bool, error) {
	if v.h.Version != 1 {
		return false, nil
	}
	if v.readOnly {
		return false, ErrReadOnly
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	switch {
	case v.closed:
		return false, ErrClosed
	case v.needsRecovery:
		return false, errors.New("the volume was not closed cleanly: recover it before upgrading it")
	}
	if err := v.loadBitmapLocked(); err != nil {
		return false, err
	}
	if err := v.flushBitmapBlocksLocked(); err != nil {
		return false, err
	}
	h := *v.h
	h.Version = 2
	mac, err := h.computeMAC(v.key)
	if err != nil {
		return false, err
	}
	h.MAC = mac
	slot := uint64(1)
	if v.state.Valid {
		slot = 1 - v.state.Sequence%2
	}
	s := v.state
	s.DigestStale = s.DigestStale || !s.Valid
	s.Sequence = slot
	old := v.h
	v.h, v.stateKeys = &h, newStateKeys(v.key)
	fail := func(err error) (bool, error) {
		v.stateKeys.wipe()
		v.h, v.stateKeys = old, nil
		return false, err
	}
	if err := v.writeRecordLocked(s); err != nil {
		return fail(err)
	}
	if err := writeHeader(v.dev, v.hs, &h); err != nil {
		return fail(err)
	}
	if hs, err := ReadHeaders(v.dev, v.hs.DeviceSize); err == nil {
		v.hs = hs
	}
	v.h = v.hs.Header
	v.knownBitmaps = [][stateMACSize]byte{v.state.bitmapMAC}
	if err := v.recordLocked(v.state); err != nil {
		return true, err
	}
	return true, nil
}

// hasV2Record reports whether either state record has the version-2 magic.
func hasV2Record(r io.ReaderAt) bool {
	b := make([]byte, len(stateMagicV2))
	for i := range 2 {
		if _, err := r.ReadAt(b, StateOffset+int64(i)*StateRecordSize); err == nil && string(b) == stateMagicV2 {
			return true
		}
	}
	return false
}

// Close makes everything written durable, marks a volume it wrote clean
// (unless it was left unclean by a crash and not recovered), wipes the keys
// and, when Open opened the file, closes it.
func (v *Volume) Close() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		return nil
	}
	v.closed = true
	var err error
	if v.writing {
		err = v.writeBitmapLocked()
		if err == nil {
			err = v.dev.Sync()
		}
		if err == nil && !v.needsRecovery {
			err = v.settleLocked()
		}
	}
	clear(v.key)
	clear(v.tagKey)
	v.stateKeys.wipe()
	v.codec.Wipe()
	if v.file != nil {
		if cerr := v.file.Close(); err == nil {
			err = cerr
		}
	}
	return err
}
