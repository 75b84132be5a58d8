package volume

import (
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
	"github.com/xtsctl/xtsctl/xts"
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

	key    []byte
	cipher *xts.Cipher
	codec  *sector.Codec
	// workers is how many goroutines one large ReadSectors or
	// WriteSectors call spreads its tags and encryption over.
	workers int
	tagKey  []byte

	warnings []string

	mu            sync.Mutex // guards the fields below
	state         State
	writing       bool   // the state record says Dirty and DigestStale for this session
	needsRecovery bool   // Dirty when opened: Close must not mark it clean before Recover
	bitmap        []byte // loaded on first use
	bitmapDirty   map[int64]bool
	closed        bool
	scratch       sync.Pool
	lastSlot      int
}

// Errors of Open and of sector I/O.
var (
	ErrInUse    = errors.New("the volume is in use by another process (open for writing there)")
	ErrReadOnly = errors.New("volume is open read-only")
	ErrClosed   = errors.New("volume is closed")
)

// BadSector names a sector whose tag does not match.
type BadSector struct {
	Sector uint64 // data sector number, from 0
	Offset int64  // byte offset of its ciphertext in the volume
}

// IntegrityError lists the sectors of a read whose tags do not match. Their
// bytes in the read buffer are zeroed: unverified plaintext is never
// returned.
type IntegrityError struct{ Sectors []BadSector }

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

// OpenWithKey opens the volume at path with its master key (for a process
// that was handed the key by the one that unlocked it). The key is copied.
func OpenWithKey(path string, masterKey []byte, readOnly bool) (*Volume, error) {
	return openPath(path, readOnly, func(hs *Headers) ([]byte, int, error) {
		if err := hs.CheckKey(masterKey); err != nil {
			return nil, -1, err
		}
		return slices.Clone(masterKey), -1, nil
	})
}

func openPath(path string, readOnly bool, unlock func(*Headers) ([]byte, int, error)) (*Volume, error) {
	flag, lock := os.O_RDWR, unix.LOCK_EX
	if readOnly {
		flag, lock = os.O_RDONLY, unix.LOCK_SH
	}
	f, err := os.OpenFile(path, flag, 0)
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
	c, err := xts.NewCipher(key)
	if err != nil {
		return nil, err
	}
	codec, err := sector.NewCodec(c, h.SectorParams())
	if err != nil {
		c.Wipe()
		return nil, err
	}
	v := &Volume{
		dev: dev, hs: hs, h: h, l: h.Layout, readOnly: readOnly,
		key: key, cipher: c, codec: codec, workers: runtime.GOMAXPROCS(0),
		warnings: slices.Clone(hs.Warnings),
	}
	if h.Integrity != IntegrityNone {
		v.tagKey = deriveKey(key, purposeTags, blake2b.Size)
	}
	var w []string
	v.state, w = readState(dev, h.UUID)
	v.warnings = append(v.warnings, w...)
	if !v.state.Valid || v.state.Dirty {
		v.needsRecovery = true
		v.warnings = append(v.warnings, "the volume was not closed cleanly: sectors written last may fail their integrity check until it is recovered")
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
// The data and its tags reach the device in no particular order and only
// Sync makes them durable: callers that must survive a crash mark the
// regions dirty first (MarkRegionsDirty; docs/FORMAT.md, "Dirty regions").
// The first write of a session records in the state area, synced, that the
// volume is dirty and its end-to-end digest stale.
func (v *Volume) WriteSectors(buf []byte, first uint64) error {
	if v.readOnly {
		return ErrReadOnly
	}
	n, err := v.checkRange(buf, first)
	if err != nil || n == 0 {
		return err
	}
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
// dm-crypt. WriteSectors and MarkRegionsDirty call it themselves; Close
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
	if v.closed {
		return ErrClosed
	}
	if v.writing {
		return nil
	}
	s := v.state
	s.Valid, s.Dirty, s.DigestStale = true, true, true
	s.Sequence++
	if err := writeState(v.dev, s, v.h.UUID); err != nil {
		return err
	}
	v.state, v.writing = s, true
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
// durable.
func (v *Volume) Sync() error {
	v.mu.Lock()
	err := v.flushBitmapLocked()
	v.mu.Unlock()
	if err != nil {
		return err
	}
	if err := v.dev.Sync(); err != nil {
		return fmt.Errorf("cannot sync the volume: %w", err)
	}
	return nil
}

// State returns the volume's state as last read or written.
func (v *Volume) State() State {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.state
}

// RegionOf returns the dirty region holding data sector n.
func (v *Volume) RegionOf(n uint64) int64 { return int64(n / uint64(v.l.SectorsPerRegion())) }

// RegionSectors returns the first sector and the number of sectors of a
// dirty region (the last region may be short).
func (v *Volume) RegionSectors(region int64) (first, count uint64) {
	per := uint64(v.l.SectorsPerRegion())
	first = uint64(region) * per
	return first, min(per, v.Sectors()-first)
}

func (v *Volume) loadBitmapLocked() error {
	if v.bitmap != nil {
		return nil
	}
	b := make([]byte, v.l.BitmapLength())
	if _, err := v.dev.ReadAt(b, BitmapOffset); err != nil {
		return fmt.Errorf("cannot read the dirty-region bitmap: %w", err)
	}
	v.bitmap, v.bitmapDirty = b, map[int64]bool{}
	return nil
}

// DirtyRegions lists the regions marked in the bitmap, in order.
func (v *Volume) DirtyRegions() ([]int64, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.loadBitmapLocked(); err != nil {
		return nil, err
	}
	var regions []int64
	for r := range v.l.Regions() {
		if i, bit := bitmapBit(r); v.bitmap[i]&bit != 0 {
			regions = append(regions, r)
		}
	}
	return regions, nil
}

// MarkRegionsDirty sets the regions' bits and makes them durable before it
// returns: call it before writing to a region that is not marked yet.
func (v *Volume) MarkRegionsDirty(regions ...int64) error {
	if v.readOnly {
		return ErrReadOnly
	}
	if err := v.beginWriting(); err != nil {
		return err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.setBitsLocked(regions, true); err != nil {
		return err
	}
	if err := v.flushBitmapLocked(); err != nil {
		return err
	}
	if err := v.dev.Sync(); err != nil {
		return fmt.Errorf("cannot sync the dirty-region bitmap: %w", err)
	}
	return nil
}

// ClearRegions clears the regions' bits; call it once everything written to
// them is synced. The cleared bits reach the device with the next Sync or
// bitmap update (a bit left set only costs a re-tag after a crash).
func (v *Volume) ClearRegions(regions ...int64) error {
	if v.readOnly {
		return ErrReadOnly
	}
	v.mu.Lock()
	defer v.mu.Unlock()
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

// flushBitmapLocked writes the changed bitmap blocks (not synced).
func (v *Volume) flushBitmapLocked() error {
	for blk := range v.bitmapDirty {
		off := blk * bitmapAlign
		if _, err := v.dev.WriteAt(v.bitmap[off:off+bitmapAlign], BitmapOffset+off); err != nil {
			return fmt.Errorf("cannot write the dirty-region bitmap: %w", err)
		}
		delete(v.bitmapDirty, blk)
	}
	return nil
}

// RetagSectors recomputes the tags of count sectors from first from their
// current ciphertext, without checking the old tags: the recovery of a
// region whose writes a crash may have torn. It does not sync.
func (v *Volume) RetagSectors(first, count uint64) error {
	if v.readOnly {
		return ErrReadOnly
	}
	if v.l.Integrity == IntegrityNone || count == 0 {
		return nil
	}
	const batch = 1 << 20
	per := uint64(batch / v.l.SectorSize)
	data := make([]byte, batch)
	tags := make([]byte, int(per)*v.l.TagSize)
	for done := uint64(0); done < count; {
		n := min(per, count-done)
		d, t := data[:n*uint64(v.l.SectorSize)], tags[:n*uint64(v.l.TagSize)]
		s := first + done
		if _, err := v.checkRange(d, s); err != nil {
			return err
		}
		if _, err := v.dev.ReadAt(d, v.l.SectorOffset(s)); err != nil {
			return fmt.Errorf("cannot read sectors to re-tag: %w", err)
		}
		v.sumTags(t, d, s)
		if _, err := v.dev.WriteAt(t, v.l.TagPosition(s)); err != nil {
			return fmt.Errorf("cannot write tags: %w", err)
		}
		done += n
	}
	return nil
}

// Recover brings a volume that was not closed cleanly back to a consistent
// state: it re-tags every sector of the regions marked in the bitmap, syncs,
// clears the bitmap and records a clean state. It returns how many regions
// it re-tagged. On a volume that was closed cleanly it does nothing.
//
// Re-tagging accepts whatever ciphertext the marked regions hold, as
// dm-integrity's bitmap mode does: a sector torn by the crash decrypts to
// garbage instead of failing its check.
func (v *Volume) Recover() (int64, error) {
	if v.readOnly {
		return 0, ErrReadOnly
	}
	v.mu.Lock()
	pending := v.needsRecovery
	v.mu.Unlock()
	if !pending {
		return 0, nil
	}
	regions, err := v.DirtyRegions()
	if err != nil {
		return 0, err
	}
	for _, r := range regions {
		first, count := v.RegionSectors(r)
		if err := v.RetagSectors(first, count); err != nil {
			return 0, err
		}
	}
	if err := v.dev.Sync(); err != nil {
		return 0, err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.markCleanLocked(); err != nil {
		return 0, err
	}
	v.needsRecovery = false
	return int64(len(regions)), nil
}

// markCleanLocked clears the bitmap, syncs it, then records a clean state.
// The data and tags must already be synced.
func (v *Volume) markCleanLocked() error {
	if err := v.loadBitmapLocked(); err != nil {
		return err
	}
	for i := range v.bitmap {
		if v.bitmap[i] != 0 {
			v.bitmap[i] = 0
			v.bitmapDirty[int64(i)/bitmapAlign] = true
		}
	}
	if err := v.flushBitmapLocked(); err != nil {
		return err
	}
	s := v.state
	// An unreadable state leaves the digest's meaning unknown: stale.
	s.DigestStale = s.DigestStale || !s.Valid || v.writing
	s.Valid, s.Dirty = true, false
	s.Sequence++
	if err := writeState(v.dev, s, v.h.UUID); err != nil { // syncs the bitmap too
		return err
	}
	v.state, v.writing = s, false
	return nil
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
		err = v.flushBitmapLocked()
		if err == nil {
			err = v.dev.Sync()
		}
		if err == nil && !v.needsRecovery {
			err = v.markCleanLocked()
		}
	}
	clear(v.key)
	clear(v.tagKey)
	v.cipher.Wipe()
	if v.file != nil {
		if cerr := v.file.Close(); err == nil {
			err = cerr
		}
	}
	return err
}
