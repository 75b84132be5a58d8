package inplace

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"hash"
	"io"
	"sync"

	"github.com/xtsctl/xtsctl/blake2b"
	"github.com/xtsctl/xtsctl/internal/stream"
	"github.com/xtsctl/xtsctl/volume"
	"golang.org/x/crypto/chacha20poly1305"
)

// A volume run keeps its journal in the last 16 KiB of the target (the
// run area): records 0 and 1, then reserved space, and the anchor in the
// very last 512 bytes, so that it is found from the target's size alone. On an image file that
// is the end of the secondary header copy's 64 KiB, of which the copy
// uses 8; on a block device with room to spare it is past the volume.
// During the run the volume's header (with FlagEncrypting or
// FlagDecrypting) is the copy at its secondary offset; the primary copy's
// place holds data until the end of an encryption, and from the start of
// a decryption.
const runArea = 4 * blockSize

// backupHeaderGap is where a run keeps the second copy of the volume's
// header (version 2): this far into the secondary copy's 64 KiB region,
// which the copy itself uses 8 KiB of and the run area (on an image) the
// last 16 KiB. The primary copy's place holds data during the run.
const backupHeaderGap = 16 << 10

// runAreaAt is where the records and the anchor of a target of size bytes
// are.
func runAreaAt(size int64) (records, anchorOff int64) { return size - runArea, size - anchorSize }

// VolumeResult says what a volume run did.
type VolumeResult struct {
	Result
	Header volume.Header // the volume's header (encryption), or the one it had (decryption)
	// Digest: the end-to-end digest the volume records (encryption) or
	// of the plaintext written (decryption).
	Digest [blake2b.Size]byte
	// DigestComputed: Digest holds one (not with Options.NoDigest, nor for
	// a volume made without one, nor after a decryption that hashed only
	// part of the data because a run of it had NoDigest).
	DigestComputed bool
	// DigestChecked: decryption compared Digest with the one the volume
	// recorded; DigestMatch: they are equal. Not checked: none recorded,
	// or stale (the volume was written since).
	DigestChecked, DigestMatch bool
}

// Errors of volume runs.
var (
	// ErrAlreadyVolume: encrypting in place a target that is already an
	// xtsctl volume.
	ErrAlreadyVolume = errors.New("the target is already an xtsctl volume")
	// ErrNoRun: resuming where no interrupted run is found.
	ErrNoRun = errors.New("no interrupted in-place run")
	// ErrStartIncomplete: the interrupted encryption stopped before its
	// header was written, so before any data was converted: start again
	// (EncryptVolume does, with a new passphrase).
	ErrStartIncomplete = errors.New("the interrupted in-place encryption stopped before converting anything")
	// ErrHeaderLost: the header of a run that had converted data is gone.
	ErrHeaderLost = errors.New("the volume header of the interrupted in-place run is damaged or missing, and the run had converted data with its key: restore a header backup of it (xtsctl header restore) to resume")
	// ErrNotClean: the volume was not closed cleanly.
	ErrNotClean = errors.New("the volume was not closed cleanly: open it read-write once (which checks the sectors being written when it stopped) before decrypting it in place")
)

// InterruptedError: a new run was asked for where one was interrupted.
type InterruptedError struct{ Status *Status }

func (e *InterruptedError) Error() string {
	return fmt.Sprintf("an in-place %s of this target was interrupted (%s done): run the same command again to resume it", e.Status.Direction, e.Status.Percent())
}

// volumeRun holds what a volume run reads or makes before its engine runs.
type volumeRun struct {
	t    Target
	size int64
	a    *anchor
	asum [32]byte
	hs   *volume.Headers
	h    *volume.Header
	key  []byte
	e    *engine
	dc   *volume.DataCrypto
	opts Options
}

func (r *volumeRun) wipe() {
	clear(r.key)
	if r.dc != nil {
		r.dc.Wipe()
	}
	if r.e != nil {
		r.e.keys.wipe()
	}
}

// readAnchor reads the anchor at the end of the target (errNoAnchor: none).
func readAnchor(t io.ReaderAt, size int64) (*anchor, [32]byte, error) {
	if size < runArea {
		return nil, [32]byte{}, errNoAnchor
	}
	b := make([]byte, anchorSize)
	_, off := runAreaAt(size)
	if err := readAt(t, b, off); err != nil {
		return nil, [32]byte{}, err
	}
	a, sum, err := parseAnchor(b)
	if err == nil && (a.Kind != KindVolume || a.Records != size-runArea) {
		return nil, sum, errors.New("the in-place run's anchor is invalid")
	}
	return a, sum, err
}

// findHeader finds the volume header of a run: the copy at the anchor's
// HeaderOff (the secondary copy, which every header change of a run
// writes first), the run's second copy (BackupHdr, version 2), or a valid
// primary copy that says the secondary is there; of those that are valid
// as a whole and belong together (one UUID), the one of the highest
// generation (the secondary on a tie, then the second copy). A run writes
// its header whole and syncs it before it converts anything, so a torn
// one means the run never started. Without an anchor it is where
// ReadHeaders looks. It returns nil if there is none. The generations are
// noted, so that a header written after it gets a higher one.
func findHeader(t io.ReaderAt, size int64, a *anchor) *volume.Headers {
	parse := func(off int64) *volume.Header {
		b := make([]byte, volume.CopySize)
		if off < 0 || off+volume.CopySize > size || readAt(t, b, off) != nil {
			return nil
		}
		h, err := volume.ParseHeader(b)
		if err != nil {
			return nil
		}
		return h
	}
	if a == nil {
		hs, err := volume.ReadHeaders(t, size)
		var ie *volume.InPlaceError
		if err == nil || errors.As(err, &ie) {
			return hs
		}
		return nil
	}
	hs := &volume.Headers{DeviceSize: size}
	sec := parse(a.HeaderOff)
	if sec != nil && sec.SecondaryOffset != a.HeaderOff {
		sec = nil
	}
	if sec != nil {
		hs.Header = sec
		hs.Secondary = volume.CopyStatus{Name: "secondary", Offset: a.HeaderOff, Parsed: true, Generation: sec.Generation}
	}
	if a.BackupHdr != 0 {
		if b := parse(a.BackupHdr); b != nil && b.SecondaryOffset == a.HeaderOff && (hs.Header == nil || b.UUID == hs.Header.UUID) {
			if hs.Header == nil || b.Generation > hs.Header.Generation {
				hs.Header = b
			}
		}
	}
	if p := parse(0); p != nil && p.SecondaryOffset == a.HeaderOff && (hs.Header == nil || p.UUID == hs.Header.UUID) {
		hs.Primary = volume.CopyStatus{Name: "primary", Parsed: true, Generation: p.Generation}
		if hs.Header == nil || p.Generation > hs.Header.Generation {
			hs.Header = p
		}
	}
	if hs.Header == nil {
		return nil
	}
	return hs
}

// backupHeaderAt is where a new run keeps the second copy of the header
// of a volume laid out as l (0: none, a version-1 run).
func backupHeaderAt(l volume.Layout) int64 {
	if newRunVersion < 2 {
		return 0
	}
	return l.SecondaryOffset + backupHeaderGap
}

// writeBackupHeader writes h as the run's second header copy and syncs.
func (r *volumeRun) writeBackupHeader(h *volume.Header) error {
	if r.a.BackupHdr == 0 {
		return nil
	}
	b, err := h.MarshalBinary()
	if err != nil {
		return err
	}
	if err := writeAt(r.t, b, r.a.BackupHdr); err != nil {
		return err
	}
	return syncDev(r.t)
}

// repairHeaders rewrites the run's copies of its header (the secondary
// and the second copy) where they are not the header in force, which the
// passphrase has authenticated: a run keeps two copies until it ends.
func (r *volumeRun) repairHeaders() error {
	want, err := r.h.MarshalBinary()
	if err != nil {
		return err
	}
	copies := []int64{r.a.HeaderOff}
	if r.a.BackupHdr != 0 {
		copies = append(copies, r.a.BackupHdr)
	}
	for _, off := range copies {
		have := make([]byte, len(want))
		if readAt(r.t, have, off) == nil && string(have) == string(want) {
			continue
		}
		if err := writeAt(r.t, want, off); err != nil {
			return err
		}
		if err := syncDev(r.t); err != nil {
			return err
		}
	}
	return nil
}

// EncryptVolume turns the target into an xtsctl volume in place, made as
// volume.Create would make it from the target's content (with
// create.Passphrase in key slot 0). An image file grows by the volume's
// metadata; a block device must have it free at its end: room is how many
// bytes at the end are not data (cryptsetup's --reduce-device-size), and
// must be at least what the volume needs past its data. A target holding
// an interrupted run is refused (ResumeVolume continues it), except one
// whose run stopped before writing its header, which starts again.
func EncryptVolume(ctx context.Context, t Target, create volume.CreateOptions, room int64, opts Options) (*VolumeResult, error) {
	size, err := t.Size()
	if err != nil {
		return nil, &ReadError{Err: err}
	}
	r := &volumeRun{t: t, size: size, opts: opts}
	defer r.wipe()
	a, _, aerr := readAnchor(t, size)
	var length int64
	switch {
	case aerr == nil:
		if a.Direction != Encrypt {
			return nil, &DirectionError{Kind: a.Kind, Direction: a.Direction}
		}
		st, _ := Probe(t, size)
		if hs := findHeader(t, size, a); hs != nil {
			return nil, &InterruptedError{Status: st}
		}
		if st != nil && st.Recorded && st.Done > 0 {
			return nil, ErrHeaderLost
		}
		// The run stopped before its header was durable: nothing was
		// converted. Start again with its data length, checking that the
		// bytes after the data are only what that start could write.
		if err := checkStartLeftovers(t, size, a, room); err != nil {
			return nil, err
		}
		length = a.Length
		if t.Resizable() {
			if err := t.Truncate(length); err != nil {
				return nil, &WriteError{Err: err}
			}
			if err := syncDev(t); err != nil {
				return nil, err
			}
			size = length
		}
	case !errors.Is(aerr, errNoAnchor):
		return nil, aerr
	default:
		if _, err := volume.ReadHeaders(t, size); !errors.Is(err, volume.ErrNotVolume) {
			return nil, ErrAlreadyVolume
		}
		if t.Resizable() && room != 0 {
			return nil, ErrRoomOnImage
		}
		if room < 0 || room >= size {
			return nil, fmt.Errorf("the room to leave (%d bytes) is not within the target's %d bytes", room, size)
		}
		length = size - room
	}
	ss := sectorSizeOf(create)
	if length%int64(ss) != 0 {
		return nil, &SectorsError{Kind: KindVolume, Length: length, SectorSize: ss}
	}
	l, err := volume.NewLayout(length, ss, create.TagSize)
	if err != nil {
		return nil, &LayoutError{err}
	}
	final := l.Size
	if !t.Resizable() {
		final = size
		if size < l.Size {
			return nil, &NeedRoomError{What: "an xtsctl volume", Need: l.Size - length, Have: size - length}
		}
	} else if rs, ok := t.(interface{ Reserve(int64) error }); ok {
		if err := rs.Reserve(final); err != nil {
			return nil, &WriteError{Err: err}
		}
	}

	// The digest first: the data is converted from its end, the digest
	// hashes it from its start, and nothing may change before it is done.
	var digest [blake2b.Size]byte
	if !create.NoDigest {
		if digest, err = hashData(ctx, t, length, opts); err != nil {
			return nil, err
		}
	}
	// The new key slot's key derivation: a phase of its own (seconds of
	// Argon2id), so that no pass over the data is timed with it.
	if opts.Progress != nil {
		opts.Progress("kdf", 0, length)
	}
	h, key, err := volume.NewHeader(length, create)
	if err != nil {
		return nil, err
	}
	r.h, r.key = h, key
	if h.Layout != l {
		return nil, errors.New("inplace: the header's layout is not the one checked")
	}
	h.Flags |= volume.FlagEncrypting
	if !create.NoDigest {
		if err := h.SealDigest(key, &digest); err != nil {
			return nil, err
		}
	}
	if err := h.Authenticate(key); err != nil {
		return nil, err
	}
	records, anchorOff := runAreaAt(final)
	a = &anchor{Version: newRunVersion, Kind: KindVolume, Direction: Encrypt, Mode: modeShift, Length: length, Source: 0, Dest: l.DataOffset,
		OrigSize: size, FinalSize: final, Zone: min(l.DataOffset/chunk*chunk, maxZone), SectorSize: uint32(ss),
		HeaderOff: l.SecondaryOffset, Records: records, BackupHdr: backupHeaderAt(l)}
	if t.Resizable() {
		a.OrigSize = length
	}
	if a.RunID, err = newRunID(); err != nil {
		return nil, err
	}
	if err := a.check(); err != nil {
		return nil, fmt.Errorf("inplace: %w", err)
	}
	ab := a.marshal()
	_, r.asum, _ = parseAnchor(ab)
	r.a = a
	if err := r.newEngine(); err != nil {
		return nil, err
	}

	// The start, in three durable steps. The anchor (one sector, at the new
	// end of an image, which it grows) says the run exists and how long
	// the data is; then the first record; then the header, which makes the
	// run resumable.
	// Until the header is durable nothing else changed, and a run found
	// without one starts again (above).
	if err := writeAt(t, ab, anchorOff); err != nil {
		return nil, err
	}
	if err := syncDev(t); err != nil {
		return nil, err
	}
	if err := r.e.writeFirstRecord(); err != nil {
		return nil, err
	}
	if err := zero(t, records+2*blockSize, anchorOff-records-2*blockSize); err != nil {
		return nil, err
	}
	if err := syncDev(t); err != nil {
		return nil, err
	}
	if err := zero(t, l.SecondaryOffset+volume.CopySize, records-l.SecondaryOffset-volume.CopySize); err != nil {
		return nil, err
	}
	if err := volume.WriteHeaderCopy(t, h, l.SecondaryOffset); err != nil {
		return nil, &WriteError{Err: err}
	}
	if err := syncDev(t); err != nil {
		return nil, err
	}
	// The second copy, after the first is durable: until the end of the
	// run the primary copy's place holds data.
	if err := r.writeBackupHeader(h); err != nil {
		return nil, err
	}
	r.hs = &volume.Headers{Header: h, Secondary: volume.CopyStatus{Generation: h.Generation}, DeviceSize: final}
	return r.convert(ctx, &VolumeResult{})
}

// checkStartLeftovers checks, before an encryption that stopped before its
// header was written starts again, that the target is what such a start
// leaves: its size, and (an image) nothing but zeros after the data except
// where the start writes (the header's copies). The anchor is not
// authenticated (there is no key yet); these checks make sure that
// starting again only overwrites what a start would overwrite anyway.
func checkStartLeftovers(t Target, size int64, a *anchor, room int64) error {
	l, err := volume.NewLayout(a.Length, int(a.SectorSize), 0)
	if err != nil || a.Direction != Encrypt || a.Source != 0 || a.Dest != l.DataOffset ||
		a.BackupHdr != 0 && a.BackupHdr != a.HeaderOff+backupHeaderGap {
		return errors.New("the in-place run's anchor is invalid")
	}
	if size != a.FinalSize {
		return fmt.Errorf("%w: it is %d bytes, the run left %d", ErrNotThisTarget, size, a.FinalSize)
	}
	if !t.Resizable() {
		if size-room != a.Length {
			return &MismatchError{What: fmt.Sprintf("left %d bytes at the end of the device (--reduce-device-size %d)", size-a.Length, size-a.Length)}
		}
		return nil
	}
	records, _ := runAreaAt(size)
	buf := make([]byte, 1<<20)
	for off := a.Length; off < records; {
		n := min(int64(len(buf)), records-off)
		if err := readAt(t, buf[:n], off); err != nil {
			return err
		}
		for i := range n {
			pos := off + i
			inCopy := pos >= a.HeaderOff && pos < a.HeaderOff+volume.CopySize ||
				a.BackupHdr != 0 && pos >= a.BackupHdr && pos < a.BackupHdr+volume.CopySize
			if buf[i] != 0 && !inCopy {
				return fmt.Errorf("%w: it holds data after the data length of the interrupted run (byte %d)", ErrNotThisTarget, pos)
			}
		}
		off += n
	}
	return nil
}

// hashData computes the end-to-end digest of the first length bytes.
func hashData(ctx context.Context, t Target, length int64, opts Options) ([blake2b.Size]byte, error) {
	var digest [blake2b.Size]byte
	sum, _ := blake2b.New512(nil)
	progress := opts.progress("hashing", length)
	if progress != nil {
		progress(0) // the pass starts now: its clock with it
	}
	var done int64
	err := stream.Run(ctx, length, opts.workers(), stream.Stages{
		Load:    loadAll(func(_ int, buf []byte, off int64) error { return readAt(t, buf, off) }),
		Ordered: func(buf []byte) { sum.Write(buf) },
		Commit: func(_ int, buf []byte, _ int64) error {
			done += int64(len(buf))
			if progress != nil {
				progress(done)
			}
			return nil
		},
	})
	if err != nil {
		return digest, err
	}
	copy(digest[:], sum.Sum(nil))
	return digest, nil
}

func (r *volumeRun) newEngine() error {
	dc, err := volume.NewDataCrypto(r.h, r.key)
	if err != nil {
		return err
	}
	r.dc = dc
	r.e = &engine{g: geometryOf(r.a), a: r.a, asum: r.asum, keys: newRunKeys(r.key), t: r.t, rdev: r.t, workers: r.opts.workers()}
	return nil
}

// ResumeVolume continues the interrupted in-place run on the target, of
// either direction; unlock opens the volume's header (with the passphrase
// of the interrupted run).
func ResumeVolume(ctx context.Context, t Target, unlock func(*volume.Headers) ([]byte, int, error), opts Options) (*VolumeResult, error) {
	size, err := t.Size()
	if err != nil {
		return nil, &ReadError{Err: err}
	}
	r := &volumeRun{t: t, size: size, opts: opts}
	defer r.wipe()
	a, asum, err := readAnchor(t, size)
	if errors.Is(err, errNoAnchor) {
		return nil, ErrNoRun
	}
	if err != nil {
		return nil, err
	}
	r.a, r.asum = a, asum
	res := &VolumeResult{}
	res.Resumed = true
	r.hs = findHeader(t, size, a)
	if r.hs == nil {
		st := statusOf(t, a, asum)
		switch {
		case st.Recorded && st.Done > 0 && st.Done < st.Length, a.Direction == Decrypt && st.Recorded && st.Done == 0:
			return nil, ErrHeaderLost
		case a.Direction == Encrypt:
			return nil, ErrStartIncomplete
		}
		// A decryption removes its header once everything is converted,
		// then its records, then its anchor: it was tidying up (maybe in
		// the middle of zeroing the header).
		res.AlreadyDone, res.Length = true, a.Length
		if !t.Resizable() && a.HeaderOff >= a.Length && a.HeaderOff+volume.CopySize <= a.Records {
			if a.BackupHdr != 0 {
				if err := zero(t, a.BackupHdr, volume.CopySize); err != nil {
					return nil, err
				}
			}
			if err := zero(t, a.HeaderOff, volume.CopySize); err != nil {
				return nil, err
			}
			if err := syncDev(t); err != nil {
				return nil, err
			}
		}
		return res, r.clearRunArea()
	}
	r.h = r.hs.Header
	key, _, err := unlock(r.hs)
	if err != nil {
		return nil, err
	}
	r.key = key
	res.Header = *r.h
	inPlace := r.h.Flags & volume.FlagsInPlace
	switch {
	case a.Direction == Encrypt && inPlace == 0:
		// Finished; only the run area was left, and maybe the primary
		// copy still marked (the last header update was interrupted).
		res.AlreadyDone, res.Length = true, a.Length
		if d, ok, err := r.h.OpenDigest(key); err == nil && ok {
			res.Digest, res.DigestComputed = d, true
		}
		if hs, err := volume.ReadHeaders(t, size); err != nil || len(hs.Warnings) > 0 {
			if err := volume.WriteHeaders(t, r.hs, r.h); err != nil {
				return nil, &WriteError{Err: err}
			}
		}
		return res, r.clearRunArea()
	case a.Direction == Decrypt && inPlace == 0:
		// The header was never marked: nothing was converted.
		res.Resumed = false
		return r.startDecrypt(ctx, res)
	case a.Direction == Encrypt && inPlace != volume.FlagEncrypting, a.Direction == Decrypt && inPlace != volume.FlagDecrypting:
		return nil, errors.New("the volume's header and the in-place run disagree on its direction")
	}
	if err := r.checkAnchor(); err != nil {
		return nil, err
	}
	if err := r.newEngine(); err != nil {
		return nil, err
	}
	if err := r.e.loadRecords(); err != nil {
		if errors.Is(err, ErrWrongKey) {
			err = errors.New("the in-place run's records do not authenticate with this volume's key: they were not written by this run")
		}
		return nil, err
	}
	want := a.FinalSize
	if a.Direction == Decrypt {
		want = a.OrigSize
	}
	if size != want {
		return nil, fmt.Errorf("%w: it is %d bytes, the run left %d", ErrNotThisTarget, size, want)
	}
	if err := r.e.checkSample(); err != nil {
		return nil, err
	}
	if err := r.e.checkAhead(); err != nil {
		return nil, err
	}
	if err := r.checkBoundary(ctx); err != nil {
		return nil, err
	}
	if err := r.repairHeaders(); err != nil {
		return nil, err
	}
	res.ResumedAt = r.e.done()
	return r.convert(ctx, res)
}

// checkBoundary asks the tags where the run got to, and refuses a record
// in force that disagrees: the source of zone next (which the run reads
// next, and the first source any later zone's write covers) must hold no
// sector converted by the run. Encrypting, a converted sector is
// ciphertext whose tag verifies at its new place, and the source holds
// plaintext; decrypting, the source is ciphertext whose every tag
// verifies, and a converted sector over it is plaintext. Without tags
// (integrity none) the ahead MAC alone decides.
func (r *volumeRun) checkBoundary(ctx context.Context) error {
	l, e, a := r.h.Layout, r.e, r.a
	if l.Integrity == volume.IntegrityNone || e.rec.Next >= e.g.zones() {
		return nil
	}
	lo, hi := e.g.span(e.rec.Next)
	ss := int64(l.SectorSize)
	// The target range to look at, and the logical offset its first
	// sector has when read as converted data (encrypting) or as the
	// source (decrypting).
	from, to, x := a.Source+lo, a.Source+hi, lo
	if a.Direction == Encrypt {
		from = max(from, a.Dest)
		x = from - a.Dest
	}
	if from >= to {
		return nil
	}
	s := newTagScratch(r.dc, 1)[0]
	buf := make([]byte, chunk)
	defer clear(buf)
	for off := from; off < to; off += chunk {
		if err := ctx.Err(); err != nil {
			return err
		}
		b := buf[:min(chunk, to-off)]
		sc := s.fit(len(b))
		first := uint64((x + off - from) / ss)
		if err := readAt(r.t, b, off); err != nil {
			return err
		}
		if err := readAt(r.t, sc.stored, l.TagPosition(first)); err != nil {
			return err
		}
		bad := r.dc.Check(b, sc.stored, sc.computed, first)
		switch {
		case a.Direction == Encrypt && len(bad) < len(b)/int(ss):
			return fmt.Errorf("%w: the tags say data at byte %d was encrypted by it", ErrRolledBack, off+int64(bad0(bad, first, len(b)/int(ss)))*ss)
		case a.Direction == Decrypt && len(bad) > 0:
			return fmt.Errorf("%w: the data at byte %d that it has still to decrypt no longer matches its tag", ErrRolledBack, off+int64(bad[0].Sector-first)*ss)
		}
	}
	return nil
}

// bad0 is the index of the first of n sectors from first that is not in
// bad (which lists sectors in order).
func bad0(bad []volume.BadSector, first uint64, n int) int {
	for i := range n {
		if i >= len(bad) || bad[i].Sector != first+uint64(i) {
			return i
		}
	}
	return n
}

// checkAnchor checks that the anchor describes the run that the
// (authenticated) header is in the middle of.
func (r *volumeRun) checkAnchor() error {
	a, l := r.a, r.h.Layout
	ok := a.Length == l.DataLength && a.SectorSize == uint32(l.SectorSize) && a.HeaderOff == l.SecondaryOffset && a.Mode == modeShift &&
		(a.Version < 2 || a.BackupHdr == l.SecondaryOffset+backupHeaderGap)
	if a.Direction == Encrypt {
		ok = ok && a.Source == 0 && a.Dest == l.DataOffset && a.FinalSize >= l.Size
	} else {
		ok = ok && a.Source == l.DataOffset && a.Dest == 0 && a.OrigSize >= l.Size
	}
	if !ok {
		return errors.New("the in-place run's anchor does not describe this volume")
	}
	return nil
}

// DecryptVolume decrypts the volume on the target in place: afterwards
// the target holds the plaintext from its start (an image is cut to the
// data's length; on a block device what followed it is zeroed). Every
// sector's tag is checked before anything is written, and again as it is
// decrypted; the end-to-end digest at the end. An interrupted decryption
// is resumed.
func DecryptVolume(ctx context.Context, t Target, unlock func(*volume.Headers) ([]byte, int, error), opts Options) (*VolumeResult, error) {
	size, err := t.Size()
	if err != nil {
		return nil, &ReadError{Err: err}
	}
	a, _, aerr := readAnchor(t, size)
	switch {
	case aerr == nil && a.Direction == Decrypt:
		return ResumeVolume(ctx, t, unlock, opts)
	case aerr == nil:
		return nil, &DirectionError{Kind: a.Kind, Direction: a.Direction}
	case !errors.Is(aerr, errNoAnchor):
		return nil, aerr
	}
	hs, err := volume.ReadHeaders(t, size)
	if err != nil {
		return nil, err
	}
	r := &volumeRun{t: t, size: size, opts: opts, hs: hs, h: hs.Header}
	defer r.wipe()
	key, _, err := unlock(hs)
	if err != nil {
		return nil, err
	}
	r.key = key
	return r.startDecrypt(ctx, &VolumeResult{Header: *r.h})
}

// startDecrypt begins a decryption of the unlocked volume.
func (r *volumeRun) startDecrypt(ctx context.Context, res *VolumeResult) (*VolumeResult, error) {
	h, l, t := r.h, r.h.Layout, r.t
	if st, _ := volume.StateOf(t, h, r.key); !st.Valid || st.Dirty {
		return nil, ErrNotClean
	}
	if r.size < l.Size {
		return nil, &volume.TruncatedError{Expected: l.Size, Actual: r.size}
	}
	dc, err := volume.NewDataCrypto(h, r.key)
	if err != nil {
		return nil, err
	}
	r.dc = dc
	// Every tag first: a bad sector found half-way would leave the
	// target half decrypted.
	if err := r.checkTags(ctx); err != nil {
		return nil, err
	}
	records, anchorOff := runAreaAt(r.size)
	a := &anchor{Version: newRunVersion, Kind: KindVolume, Direction: Decrypt, Mode: modeShift, Length: l.DataLength, Source: l.DataOffset, Dest: 0,
		OrigSize: r.size, FinalSize: r.size, Zone: min(l.DataOffset/chunk*chunk, maxZone), SectorSize: uint32(l.SectorSize),
		HeaderOff: l.SecondaryOffset, Records: records, BackupHdr: backupHeaderAt(l)}
	if t.Resizable() {
		a.FinalSize = l.DataLength
	}
	if a.RunID, err = newRunID(); err != nil {
		return nil, err
	}
	if err := a.check(); err != nil {
		return nil, fmt.Errorf("inplace: %w", err)
	}
	ab := a.marshal()
	_, r.asum, _ = parseAnchor(ab)
	r.a = a
	r.e = &engine{g: geometryOf(a), a: a, asum: r.asum, keys: newRunKeys(r.key), t: t, rdev: t, workers: r.opts.workers()}
	// Whether the recorded digest still describes the data, from the
	// state area, which the first zone overwrites: the records carry it.
	st, _ := volume.StateOf(t, h, r.key)
	_, recorded, err := h.OpenDigest(r.key)
	if err != nil {
		return nil, err
	}
	r.decryptState(recorded && !st.DigestStale, true, nil)

	// The anchor and the first record, durable; then the header says a
	// decryption is in progress (both copies, crash-safely). Until then
	// nothing changed: a run found with an unmarked header starts again.
	if err := writeAt(t, ab, anchorOff); err != nil {
		return nil, err
	}
	if err := r.e.writeFirstRecord(); err != nil {
		return nil, err
	}
	if err := zero(t, records+2*blockSize, anchorOff-records-2*blockSize); err != nil {
		return nil, err
	}
	if err := syncDev(t); err != nil {
		return nil, err
	}
	marked := *h
	marked.Flags |= volume.FlagDecrypting
	if err := marked.Authenticate(r.key); err != nil {
		return nil, err
	}
	if err := volume.WriteHeaders(t, r.hs, &marked); err != nil {
		return nil, &WriteError{Err: err}
	}
	// The second copy: the first zone goes over the primary one.
	if err := r.writeBackupHeader(&marked); err != nil {
		return nil, err
	}
	r.h = &marked
	return r.convert(ctx, res)
}

// checkTags compares every sector with its tag, reading only.
func (r *volumeRun) checkTags(ctx context.Context) error {
	l := r.h.Layout
	if l.Integrity == volume.IntegrityNone {
		return nil
	}
	progress := r.opts.progress("checking", l.DataLength)
	if progress != nil {
		progress(0) // the pass starts now: its clock with it
	}
	scratch := newTagScratch(r.dc, stream.Slots(r.opts.workers()))
	var bad []volume.BadSector
	var mu sync.Mutex
	var done int64
	ss := int64(l.SectorSize)
	err := stream.Run(ctx, l.DataLength, r.opts.workers(), stream.Stages{
		Load: loadAll(func(slot int, buf []byte, off int64) error {
			s := scratch[slot].fit(len(buf))
			if err := readAt(r.t, buf, l.DataOffset+off); err != nil {
				return err
			}
			if err := readAt(r.t, s.stored, l.TagPosition(uint64(off/ss))); err != nil {
				return err
			}
			if b := r.dc.Check(buf, s.stored, s.computed, uint64(off/ss)); len(b) > 0 {
				mu.Lock()
				bad = append(bad, b...)
				mu.Unlock()
			}
			return nil
		}),
		Commit: func(_ int, buf []byte, _ int64) error {
			done += int64(len(buf))
			if progress != nil {
				progress(done)
			}
			return nil
		},
	})
	if err != nil {
		return err
	}
	if len(bad) > 0 {
		return &volume.IntegrityError{Sectors: bad[:min(len(bad), volume.MaxReported)]}
	}
	return nil
}

// tagScratch is the room for one chunk's tags: as stored, and computed.
type tagScratch struct {
	stored, computed []byte
	dc               *volume.DataCrypto
}

func newTagScratch(dc *volume.DataCrypto, slots int) []tagScratch {
	s := make([]tagScratch, slots)
	n := dc.TagBytes(chunk)
	for i := range s {
		s[i] = tagScratch{make([]byte, n), make([]byte, n), dc}
	}
	return s
}

// fit slices s to the tags of n bytes of data.
func (s tagScratch) fit(n int) tagScratch {
	k := s.dc.TagBytes(n)
	return tagScratch{s.stored[:k], s.computed[:k], s.dc}
}

// convert runs the engine with the volume's transform, then finishes.
func (r *volumeRun) convert(ctx context.Context, res *VolumeResult) (*VolumeResult, error) {
	l, ss := r.h.Layout, int64(r.h.SectorSize)
	dc, e := r.dc, r.e
	res.Length = l.DataLength
	scratch := newTagScratch(dc, stream.Slots(e.workers))
	if r.a.Direction == Encrypt {
		e.tr.work = func(slot int, buf []byte, x int64) {
			dc.Seal(buf, scratch[slot].fit(len(buf)).stored, uint64(x/ss))
		}
		if dc.TagBytes(chunk) > 0 {
			e.tr.written = func(slot int, buf []byte, x int64) error {
				return writeAt(r.t, scratch[slot].fit(len(buf)).stored, l.TagPosition(uint64(x/ss)))
			}
		}
	} else {
		if err := r.decryptTransform(); err != nil {
			return nil, err
		}
	}
	e.progress = r.opts.progress("converting", l.DataLength)
	if err := e.run(ctx); err != nil {
		return res, err
	}
	if r.a.Direction == Encrypt {
		return res, r.finishEncrypt(res)
	}
	return res, r.finishDecrypt(res)
}

// finishEncrypt writes what lies before the data and after it (the
// primary header copy, the state area, zeros where the plaintext was),
// then clears the in-progress flag (both copies, crash-safely), then the
// run area. Each step may be repeated.
func (r *volumeRun) finishEncrypt(res *VolumeResult) error {
	t, h, l := r.t, r.h, r.h.Layout
	// The plaintext that was before the data area goes, all of it.
	if err := zero(t, 0, l.DataOffset); err != nil {
		return err
	}
	tagEnd := l.DataOffset + l.DataLength
	if l.TagLength > 0 {
		if err := zero(t, tagEnd, l.TagOffset-tagEnd); err != nil {
			return err
		}
		tagEnd = l.TagPosition(uint64(l.Sectors()))
	}
	if err := zero(t, tagEnd, l.SecondaryOffset-tagEnd); err != nil {
		return err
	}
	if err := volume.InitState(t, h, r.key); err != nil {
		return &WriteError{Err: err}
	}
	if err := volume.WriteHeaderCopy(t, h, 0); err != nil {
		return &WriteError{Err: err}
	}
	if err := syncDev(t); err != nil {
		return err
	}
	// Two copies again (primary, secondary): the run's second one goes.
	if err := r.zeroBackupHeader(); err != nil {
		return err
	}
	done := *h
	done.Flags &^= volume.FlagEncrypting
	if err := done.Authenticate(r.key); err != nil {
		return err
	}
	hs := &volume.Headers{Header: h, Primary: volume.CopyStatus{Generation: h.Generation}, Secondary: volume.CopyStatus{Generation: h.Generation}}
	if err := volume.WriteHeaders(t, hs, &done); err != nil {
		return &WriteError{Err: err}
	}
	res.Header = done
	if d, ok, err := done.OpenDigest(r.key); err == nil && ok {
		res.Digest, res.DigestComputed = d, true
	}
	return r.clearRunArea()
}

// zeroBackupHeader zeroes the run's second header copy (the region is
// zero in a volume) and syncs.
func (r *volumeRun) zeroBackupHeader() error {
	if r.a.BackupHdr == 0 {
		return nil
	}
	if err := zero(r.t, r.a.BackupHdr, volume.CopySize); err != nil {
		return err
	}
	return syncDev(r.t)
}

// clearRunArea zeroes the run's second header copy, its records, then the
// anchor (the run's entry point), and syncs.
func (r *volumeRun) clearRunArea() error {
	size, err := r.t.Size()
	if err != nil {
		return &ReadError{Err: err}
	}
	records, anchorOff := runAreaAt(size)
	if r.a.BackupHdr+volume.CopySize <= records {
		if err := r.zeroBackupHeader(); err != nil {
			return err
		}
	}
	// The older record first, so that until the end the newest one says
	// how far the run got.
	newest := newestRecord(r.t, records)
	for _, slot := range []int64{1 - newest, newest} {
		if err := zero(r.t, records+slot*blockSize, blockSize); err != nil {
			return err
		}
		if err := syncDev(r.t); err != nil {
			return err
		}
	}
	if err := zero(r.t, records+2*blockSize, anchorOff-records-2*blockSize); err != nil {
		return err
	}
	if err := zero(r.t, anchorOff, anchorSize); err != nil {
		return err
	}
	return syncDev(r.t)
}

// newestRecord is the slot (0 or 1) of the intact record with the higher
// sequence number, judged by checksums only.
func newestRecord(t io.ReaderAt, records int64) int64 {
	buf := make([]byte, 2*blockSize)
	if readAt(t, buf, records) != nil {
		return 0
	}
	var best, seq int64 = 0, -1
	for i := range int64(2) {
		b := buf[i*blockSize : (i+1)*blockSize]
		sum := blake2b.Sum256(b[:rChecksum])
		if string(b[:8]) == recordMagic && string(sum[:]) == string(b[rChecksum:]) && int64(le64(b, rSequence)) > seq {
			best, seq = i, int64(le64(b, rSequence))
		}
	}
	return best
}

// The digest's state travels in the records of a decryption: whether the
// recorded digest applies and whether the plaintext was hashed (one byte),
// then the BLAKE2b state of the plaintext so far, sealed with
// XChaCha20-Poly1305 under a key of the run (the state of a plaintext hash
// tells as much as the digest, which the volume keeps encrypted too).
type decryptState struct {
	applies bool
	hashed  bool // every zone so far was hashed (no run had NoDigest)
	sum     hash.Hash
	mu      sync.Mutex
	snaps   map[int64][]byte // state after the zones before the key
}

func (r *volumeRun) decryptState(applies, hashed bool, sum hash.Hash) *decryptState {
	if sum == nil {
		sum, _ = blake2b.New512(nil)
	}
	hashed = hashed && !r.opts.NoDigest
	st := &decryptState{applies: applies, hashed: hashed, sum: sum, snaps: map[int64][]byte{}}
	next := r.e.rec.Next
	pos := r.e.g.length - r.e.g.remaining(next)
	b, _ := sum.(interface{ MarshalBinary() ([]byte, error) }).MarshalBinary()
	st.snaps[next] = b
	r.e.tr.ordered = nil
	if hashed {
		r.e.tr.ordered = func(buf []byte) {
			st.sum.Write(buf)
			pos += int64(len(buf))
			if pos%r.e.g.zone == 0 || pos == r.e.g.length {
				b, _ := st.sum.(interface{ MarshalBinary() ([]byte, error) }).MarshalBinary()
				st.mu.Lock()
				st.snaps[(pos+r.e.g.zone-1)/r.e.g.zone] = b
				st.mu.Unlock()
			}
		}
	}
	r.e.tr.seal = func(next int64) ([]byte, error) {
		st.mu.Lock()
		b, ok := st.snaps[next]
		for k := range st.snaps {
			if k <= next {
				delete(st.snaps, k)
			}
		}
		st.mu.Unlock()
		if !ok && st.hashed {
			return nil, fmt.Errorf("inplace: no digest state for zone %d", next)
		}
		if !st.hashed {
			b = st.snaps[next] // not hashing: the state is a placeholder
			if b == nil {
				b, _ = st.sum.(interface{ MarshalBinary() ([]byte, error) }).MarshalBinary()
			}
		}
		return sealState(r.e.keys.seal, r.a.RunID, next, applies, st.hashed, b)
	}
	return st
}

// The first byte of a sealed state: whether the recorded digest applies,
// and whether the plaintext so far was hashed.
const (
	stateApplies byte = 1 << 0
	stateHashed  byte = 1 << 1
)

func sealState(key []byte, runID [16]byte, next int64, applies, hashed bool, state []byte) ([]byte, error) {
	a, err := chacha20poly1305.NewX(key)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, chacha20poly1305.NonceSizeX, chacha20poly1305.NonceSizeX+1+len(state)+chacha20poly1305.Overhead)
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	plain := append([]byte{0}, state...)
	if applies {
		plain[0] |= stateApplies
	}
	if hashed {
		plain[0] |= stateHashed
	}
	return a.Seal(nonce, nonce, plain, stateAD(runID, next)), nil
}

func openState(key []byte, runID [16]byte, next int64, sealed []byte) (applies, hashed bool, state []byte, err error) {
	a, err := chacha20poly1305.NewX(key)
	if err != nil {
		return false, false, nil, err
	}
	n := chacha20poly1305.NonceSizeX
	if len(sealed) < n+1+chacha20poly1305.Overhead {
		return false, false, nil, errors.New("the in-place run's digest state is missing")
	}
	plain, err := a.Open(nil, sealed[:n], sealed[n:], stateAD(runID, next))
	if err != nil || plain[0]&^(stateApplies|stateHashed) != 0 {
		return false, false, nil, errors.New("the in-place run's digest state does not decrypt")
	}
	return plain[0]&stateApplies != 0, plain[0]&stateHashed != 0, plain[1:], nil
}

func stateAD(runID [16]byte, next int64) []byte {
	ad := append([]byte("digest state "), runID[:]...)
	var b [8]byte
	put64(b[:], 0, uint64(next))
	return append(ad, b[:]...)
}

// decryptTransform reads, checks and decrypts each chunk, and hashes the
// plaintext in order from the state the record in force carries.
func (r *volumeRun) decryptTransform() error {
	l, ss, dc := r.h.Layout, int64(r.h.SectorSize), r.dc
	e := r.e
	if e.tr.seal == nil {
		// Resumed: the state comes from the record.
		applies, hashed, state, err := openState(e.keys.seal, r.a.RunID, e.rec.Next, e.rec.Sealed)
		if err != nil {
			return err
		}
		sum, _ := blake2b.New512(nil)
		if err := sum.(interface{ UnmarshalBinary([]byte) error }).UnmarshalBinary(state); err != nil {
			return errors.New("the in-place run's digest state is invalid")
		}
		r.decryptState(applies, hashed, sum)
	}
	scratch := newTagScratch(dc, stream.Slots(e.workers))
	e.tr.read = func(slot int, buf []byte, x int64) error {
		if err := readAt(r.t, buf, l.DataOffset+x); err != nil {
			return err
		}
		first := uint64(x / ss)
		if s := scratch[slot].fit(len(buf)); len(s.stored) > 0 {
			if err := readAt(r.t, s.stored, l.TagPosition(first)); err != nil {
				return err
			}
			if bad := dc.Check(buf, s.stored, s.computed, first); len(bad) > 0 {
				clear(buf)
				return &volume.IntegrityError{Sectors: bad}
			}
		}
		dc.Decrypt(buf, first)
		return nil
	}
	return nil
}

// DigestMismatchError: the decrypted plaintext does not hash to the digest
// the volume recorded. The target holds the plaintext all the same.
type DigestMismatchError struct{ Recorded, Computed [blake2b.Size]byte }

func (e *DigestMismatchError) Error() string {
	return fmt.Sprintf("end-to-end digest mismatch: the volume recorded %x..., the decrypted data hashes to %x...", e.Recorded[:8], e.Computed[:8])
}

// finishDecrypt compares the digest, then removes what followed the
// plaintext: an image is cut to its length (which takes the run area with
// it); on a block device the rest of the volume is zeroed, the run area
// last.
func (r *volumeRun) finishDecrypt(res *VolumeResult) error {
	e, t, l := r.e, r.t, r.h.Layout
	applies, hashed, state, err := openState(e.keys.seal, r.a.RunID, e.rec.Next, e.rec.Sealed)
	if err != nil {
		return err
	}
	sum, _ := blake2b.New512(nil)
	if err := sum.(interface{ UnmarshalBinary([]byte) error }).UnmarshalBinary(state); err != nil {
		return errors.New("the in-place run's digest state is invalid")
	}
	var mismatch error
	if hashed {
		copy(res.Digest[:], sum.Sum(nil))
		res.DigestComputed = true
	}
	if recorded, ok, err := r.h.OpenDigest(r.key); err == nil && ok && applies && hashed {
		res.DigestChecked = true
		res.DigestMatch = recorded == res.Digest
		if !res.DigestMatch {
			mismatch = &DigestMismatchError{Recorded: recorded, Computed: res.Digest}
		}
	}
	if t.Resizable() {
		if err := t.Truncate(l.DataLength); err != nil {
			return &WriteError{Err: err}
		}
		if err := syncDev(t); err != nil {
			return err
		}
		return mismatch
	}
	// A block device: the rest of the volume, then its header copy, then
	// the run area (records, anchor). A run found without its header is
	// tidying up if its records say everything is converted, damaged
	// otherwise.
	records, _ := runAreaAt(r.size)
	for _, z := range [][2]int64{{l.DataLength, l.SecondaryOffset}, {l.SecondaryOffset + volume.CopySize, min(l.Size, records)}} {
		if z[1] > z[0] {
			if err := zero(t, z[0], z[1]-z[0]); err != nil {
				return err
			}
		}
	}
	if err := syncDev(t); err != nil {
		return err
	}
	if err := zero(t, l.SecondaryOffset, volume.CopySize); err != nil {
		return err
	}
	if err := syncDev(t); err != nil {
		return err
	}
	if err := r.clearRunArea(); err != nil {
		return err
	}
	return mismatch
}
