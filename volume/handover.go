package volume

import (
	"errors"
	"fmt"
)

// Handing the data area to another writer. The kernel's dm-crypt (xtsctl
// open --backend dm) reads and writes a volume's data area without this
// package: we see none of its writes, so we can neither mark regions dirty
// before them nor update tags after them. The writer protocol of
// docs/FORMAT.md is then kept at the scale of the whole session:
//
//   - before the other writer starts, Release records the volume as dirty,
//     its digest stale, synced (protocol step 1), then closes it without
//     marking it clean;
//   - once the other writer is done and its writes are synced, MarkClean
//     records the clean close (step 5).
//
// Only volumes without integrity tags can be handed over: the other
// writer would leave the tags of every sector it writes stale, and no
// bitmap would say which. With no tags there is nothing for step 2 to
// protect and nothing for a recovery to re-tag, so a crash while the other
// writer runs leaves a volume that reads "not closed cleanly" until its
// next read-write open, which recovers it at no cost.

// ErrHasTags is returned by Release and MarkClean for a volume with
// integrity tags: a writer outside this package would not keep them.
var ErrHasTags = errors.New("the volume has integrity tags, which a writer outside xtsctl (such as dm-crypt) would not keep up to date")

// Release ends this Volume's session so that another writer can take over
// the data area: it records, durably, that the volume is being written
// (dirty, digest stale: MarkModified), makes everything written so far
// durable, wipes the keys and closes, leaving the volume dirty. A volume
// that was not closed cleanly must be recovered first (Recover). The
// Volume is closed afterwards, whatever the result.
func (v *Volume) Release() error {
	if v.l.Integrity != IntegrityNone {
		v.Close() // never written: Close has nothing to mark
		return ErrHasTags
	}
	if v.readOnly {
		v.Close()
		return ErrReadOnly
	}
	v.mu.Lock()
	pending := v.needsRecovery
	v.mu.Unlock()
	if pending {
		v.Close()
		return errors.New("the volume was not closed cleanly: recover it before handing it over")
	}
	err := v.MarkModified()
	v.mu.Lock()
	if err == nil {
		err = v.flushBitmapLocked()
	}
	if err == nil {
		if serr := v.dev.Sync(); serr != nil {
			err = fmt.Errorf("cannot sync the volume: %w", serr)
		}
	}
	// Close must not mark the volume clean: the other writer owns it now.
	v.writing = false
	v.mu.Unlock()
	if cerr := v.Close(); err == nil {
		err = cerr
	}
	return err
}

// MarkClean records that the volume without integrity tags on dev (size
// bytes) was closed cleanly: the writer it was released to has finished
// and the caller has synced its writes. It clears the dirty-region bitmap
// and writes a state record without dirty, keeping the digest stale, and
// syncs. A volume already recorded clean is left as it is.
//
// It needs no key, so that the other writer's session can be closed
// without the passphrase: the state area is not secret, and a volume
// without tags has nothing to recover. A volume with tags is refused with
// ErrHasTags; only Recover, with the key, clears its dirty state.
func MarkClean(dev Device, size int64) error {
	hs, err := ReadHeaders(dev, size)
	if err != nil {
		return err
	}
	h := hs.Header
	if h.Integrity != IntegrityNone {
		return ErrHasTags
	}
	s, _ := readState(dev, h.UUID)
	if s.Valid && !s.Dirty {
		return nil
	}
	bitmap := make([]byte, h.Layout.BitmapLength())
	if _, err := dev.WriteAt(bitmap, BitmapOffset); err != nil {
		return fmt.Errorf("cannot clear the dirty-region bitmap: %w", err)
	}
	// As in markCleanLocked: an unreadable state leaves the digest's
	// meaning unknown, and a dirty one means the data was written.
	s.DigestStale = true
	s.Valid, s.Dirty = true, false
	s.Sequence++
	return writeState(dev, s, h.UUID) // syncs the bitmap too
}
