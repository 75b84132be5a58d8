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
//
// It returns the state record that MarkClean writes once the other writer
// is done: in version 2 only a record made with the key counts, and the
// session is closed without it (the record is not secret: it says clean,
// digest stale, and nothing else; it is nil for version 1).
func (v *Volume) Release() (closeRecord []byte, err error) {
	if v.l.Integrity != IntegrityNone {
		v.Close() // never written: Close has nothing to mark
		return nil, ErrHasTags
	}
	if v.readOnly {
		v.Close()
		return nil, ErrReadOnly
	}
	v.mu.Lock()
	pending := v.needsRecovery
	v.mu.Unlock()
	if pending {
		v.Close()
		return nil, errors.New("the volume was not closed cleanly: recover it before handing it over")
	}
	err = v.MarkModified()
	v.mu.Lock()
	if err == nil {
		err = v.writeBitmapLocked()
	}
	if err == nil {
		if serr := v.dev.Sync(); serr != nil {
			err = fmt.Errorf("cannot sync the volume: %w", serr)
		}
	}
	if err == nil && v.stateKeys != nil {
		s := v.state
		s.Dirty, s.DigestStale = false, true
		s.Sequence++
		s.bitmapMAC = v.stateKeys.bitmapMAC(v.bitmap)
		closeRecord = marshalState(s, v.h.Version, v.h.UUID, v.stateKeys)
	}
	// Close must not mark the volume clean: the other writer owns it now.
	v.writing = false
	v.mu.Unlock()
	if cerr := v.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	return closeRecord, nil
}

// MarkClean records that the volume without integrity tags on dev (size
// bytes) was closed cleanly: the writer it was released to has finished
// and the caller has synced its writes. closeRecord is what Release
// returned (nil for a version-1 volume). A volume whose state has moved on
// since Release (recorded clean, or opened again) is left as it is.
//
// It needs no key, so that the other writer's session can be closed
// without the passphrase: a volume without tags has nothing to recover.
// A volume with tags is refused with ErrHasTags; only Recover, with the
// key, clears its dirty state.
func MarkClean(dev Device, size int64, closeRecord []byte) error {
	hs, err := ReadHeaders(dev, size)
	if err != nil {
		return err
	}
	h := hs.Header
	if h.Integrity != IntegrityNone {
		return ErrHasTags
	}
	cur := readState(dev, h, nil).inForce
	if cur.Valid && !cur.Dirty {
		return nil
	}
	if h.Version == 1 {
		bitmap := make([]byte, h.Layout.bitmapLength())
		if _, err := dev.WriteAt(bitmap, BitmapOffset); err != nil {
			return fmt.Errorf("cannot clear the dirty-region bitmap: %w", err)
		}
		// As in settleLocked: an unreadable state leaves the digest's
		// meaning unknown, and a dirty one means the data was written.
		s := State{Valid: true, DigestStale: true, Sequence: cur.Sequence + 1}
		return writeDetachedRecord(dev, marshalState(s, 1, h.UUID, nil), s.Sequence)
	}
	if len(closeRecord) != StateRecordSize {
		return errors.New("no state record to close the session with (a version-2 volume needs the one Release returned)")
	}
	s, _, err := parseState(closeRecord, int(le64(closeRecord, stateOffSequence)%2), h.Version, h.UUID, nil)
	if err != nil {
		return fmt.Errorf("the state record to close the session with is unusable: %w", err)
	}
	if cur.Valid && cur.Sequence+1 != s.Sequence {
		return nil // opened again since: that session records its own state
	}
	return writeDetachedRecord(dev, closeRecord, s.Sequence)
}

// writeDetachedRecord writes a record made elsewhere at its slot, synced.
func writeDetachedRecord(dev Device, b []byte, seq uint64) error {
	if _, err := dev.WriteAt(b, StateOffset+int64(seq%2)*StateRecordSize); err != nil {
		return fmt.Errorf("cannot write the state record: %w", err)
	}
	if err := dev.Sync(); err != nil {
		return fmt.Errorf("cannot sync the state record: %w", err)
	}
	return nil
}
