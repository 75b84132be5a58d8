package volume

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/xtsctl/xtsctl/internal/bytesize"
)

// Device is what the volume code reads and writes: an image file or a block
// device (*os.File), or a test double.
type Device interface {
	io.ReaderAt
	io.WriterAt
	Sync() error
}

// CopyStatus describes one header copy as found on the device.
type CopyStatus struct {
	Name       string // "primary" or "secondary"
	Offset     int64  // where it was read
	Err        error  // nil if the copy is valid as a whole
	Parsed     bool   // the header block itself is intact
	Generation uint64 // if Parsed
	// DamagedSlots lists the slots failing their own checksum (when the
	// block is intact but the slot area does not match its checksum).
	DamagedSlots []int

	hdr   *Header           // the parsed block, if Parsed
	slots [MaxSlots]KeySlot // the slots that parsed
	bad   [MaxSlots]bool    // slots that did not
	raw   [CopySize]byte    // the bytes read
}

// Headers is what ReadHeaders found on a device: both copies and the header
// in use.
type Headers struct {
	Header    *Header // the header in use
	Primary   CopyStatus
	Secondary CopyStatus
	// Warnings say what was wrong and what was done about it (a damaged
	// copy, copies that disagree). Callers show them to the user.
	Warnings []string
	// Damaged lists the slots unusable in both copies (best-effort mode).
	Damaged []int
	// DeviceSize is the size of the device in bytes.
	DeviceSize int64
}

// TruncatedError reports a device smaller than its header says.
type TruncatedError struct{ Expected, Actual int64 }

func (e *TruncatedError) Error() string {
	return fmt.Sprintf("volume is truncated: the header says %d bytes, the image has %d", e.Expected, e.Actual)
}

// InPlaceError reports a volume that an in-place conversion (package
// inplace) was stopped in the middle of: part of its data area is
// plaintext, part ciphertext, and nothing but that conversion may read or
// write it until it is finished.
type InPlaceError struct{ Encrypting bool }

func (e *InPlaceError) Error() string {
	if e.Encrypting {
		return "an in-place encryption of this image was interrupted: it is not a usable volume until that encryption is finished"
	}
	return "an in-place decryption of this volume was interrupted: it is not usable until that decryption is finished"
}

// HeadersDamagedError reports that neither header copy can be read.
type HeadersDamagedError struct{ Primary, Secondary error }

func (e *HeadersDamagedError) Error() string {
	return fmt.Sprintf("both header copies are damaged (primary: %v; secondary: %v)", e.Primary, e.Secondary)
}

// ReadHeaders reads both header copies of a device of the given size and
// picks the header to use: the valid copy with the highest generation (the
// primary on a tie). When neither copy is valid as a whole but a header
// block is intact, it is used with each key slot taken from whichever copy
// has it intact (best effort, with a warning).
//
// Errors: ErrNotVolume, *VersionError, *FeatureError, *HeadersDamagedError;
// *TruncatedError and *InPlaceError come with the Headers found (for info,
// and for package inplace, which alone continues such a volume).
func ReadHeaders(r io.ReaderAt, size int64) (*Headers, error) {
	hs := &Headers{DeviceSize: size}
	p, s := &hs.Primary, &hs.Secondary
	p.Name, s.Name = "primary", "secondary"
	p.read(r, 0, size)

	// The secondary copy ends the volume: the primary says where. When it
	// cannot (its header block is unusable, or it claims a volume larger
	// than the image: cut short, or rewritten to hide an intact secondary
	// at the real end), the copy is looked for near the image's end.
	var truncated error
	switch {
	case !p.Parsed:
		hs.findSecondary(r, size, nil)
	case p.hdr.Size > size:
		truncated = &TruncatedError{Expected: p.hdr.Size, Actual: size}
		hs.findSecondary(r, size, p.hdr)
	default:
		s.read(r, p.hdr.SecondaryOffset, size)
		s.checkPlace()
	}
	if truncated != nil {
		switch {
		case s.Err != nil:
			s.Err = fmt.Errorf("not found (the primary copy says the volume is %d bytes, the image has %d)", p.hdr.Size, size)
		case s.hdr.Size <= size:
			// The secondary describes a volume the image holds: the
			// primary's claim is what is wrong.
			p.Err = fmt.Errorf("it says the volume is %d bytes, but the image has %d and its secondary copy fits it", p.hdr.Size, size)
			truncated = nil
		}
		// Otherwise both copies describe the volume the image was cut
		// from: truncated, with its header found.
	}

	// A newer version or unknown features: this code must neither trust
	// nor rewrite a header it does not understand. Only when the other copy
	// is an intact header of a version we read is the odd copy taken for damage (a
	// flipped bit in its version field).
	for _, c := range []*CopyStatus{p, s} {
		var ve *VersionError
		var fe *FeatureError
		if !errors.As(c.Err, &ve) && !errors.As(c.Err, &fe) {
			continue
		}
		if other := hs.other(c); !other.Parsed {
			return nil, c.Err
		}
	}
	if errors.Is(p.Err, ErrNotVolume) && !s.Parsed {
		if hasMagicAt(s) {
			return nil, &HeadersDamagedError{Primary: p.Err, Secondary: s.Err}
		}
		return nil, ErrNotVolume
	}

	switch {
	case p.Err == nil && s.Err == nil:
		hs.Header = p.hdr
		if s.Generation > p.Generation {
			hs.Header = s.hdr
		}
		if p.raw != s.raw {
			hs.warnf("the header copies differ (generations %d and %d): an update was interrupted; using the %s copy",
				p.Generation, s.Generation, hs.which())
		}
	case p.Err == nil:
		hs.Header = p.hdr
		if truncated == nil {
			hs.warnf("the secondary header copy at byte %d is damaged (%v); using the primary", s.Offset, s.Err)
		}
	case s.Err == nil:
		hs.Header = s.hdr
		hs.warnf("the primary header copy is damaged (%v); using the secondary copy at byte %d", p.Err, s.Offset)
	default:
		if err := hs.bestEffort(); err != nil {
			return nil, err
		}
	}
	if hs.Header.UUID != otherCopy(hs).uuid() && otherCopy(hs).Parsed {
		hs.warnf("the %s header copy belongs to another volume (UUID %s)", otherCopy(hs).Name, uuidString(otherCopy(hs).uuid()))
	}
	if f := hs.Header.Flags & FlagsInPlace; f != 0 {
		return hs, &InPlaceError{Encrypting: f == FlagEncrypting}
	}
	if truncated == nil && hs.Header.Size > size {
		truncated = &TruncatedError{Expected: hs.Header.Size, Actual: size}
	}
	return hs, truncated
}

func hasMagicAt(c *CopyStatus) bool { return string(c.raw[:len(Magic)]) == Magic }

// SecondaryWindow is how far below the image's end ReadHeaders looks for
// the secondary copy when the primary cannot say where it is: an image
// that grew (copied onto a larger partition or logical volume, whose
// sizes are rounded to MiB or 4 MiB extents) or shrank by less than the
// unused tail of the copy's 64 KiB still has its secondary found. Only
// multiples of CopyRegion are candidates, as only there can a copy be.
const SecondaryWindow = 16 << 20

// checkPlace takes a copy that does not say it lives where it was read
// for damage: a copy is found only at its own place.
func (c *CopyStatus) checkPlace() {
	if c.Parsed && c.hdr.SecondaryOffset != c.Offset {
		c.Err = fmt.Errorf("it says it lives at byte %d, not %d", c.hdr.SecondaryOffset, c.Offset)
		c.Parsed, c.hdr = false, nil
	}
}

// findSecondary looks for the secondary copy when the primary cannot say
// where it is: at every multiple of CopyRegion from the last one where a
// copy fits in the image down to SecondaryWindow below it, nearest the end
// first. A candidate counts
// only if it parses and says it lives where it was found. With primary (a
// header block that parsed but claims more than the image holds), a copy
// of its volume (UUID) is preferred; without it, copies of two different
// volumes in the window (an image copied over an older volume's end) are
// refused rather than guessed between. The copy found is authenticated
// like any other, by its MAC once unlocked. Without a candidate, the
// secondary's status is that of the first place (nearest the end) where
// the magic was found, or "not found".
func (hs *Headers) findSecondary(r io.ReaderAt, size int64, primary *Header) {
	s := &hs.Secondary
	if size < CopySize+CopyRegion {
		s.Offset, s.Err = max(size-CopySize, 0), errors.New("beyond the end of the image")
		return
	}
	top := (size - CopySize) / CopyRegion * CopyRegion
	bottom := max(CopyRegion, top-SecondaryWindow)
	var found, damaged *CopyStatus
	var others []string
	var magic [len(Magic)]byte
	for off := top; off >= bottom; off -= CopyRegion {
		// Only the magic at each place: a few pages read, not the window
		// (every detection of an image that is no volume comes here).
		if _, err := r.ReadAt(magic[:], off); err != nil {
			s.Offset, s.Err = off, fmt.Errorf("cannot read: %w", err)
			return
		}
		if string(magic[:]) != Magic {
			continue
		}
		c := &CopyStatus{Name: s.Name}
		c.read(r, off, size)
		c.checkPlace()
		switch {
		case !c.Parsed:
			if damaged == nil {
				damaged = c
			}
		case found == nil && (primary == nil || c.hdr.UUID == primary.UUID):
			found = c
		case primary == nil && c.hdr.UUID != found.hdr.UUID:
			others = append(others, fmt.Sprintf("byte %d (UUID %s)", off, uuidString(c.hdr.UUID)))
		}
	}
	switch {
	case found != nil && len(others) > 0:
		s.Offset = found.Offset
		s.Err = fmt.Errorf("the last %s of the image hold header copies of different volumes, at byte %d (UUID %s) and %s: cannot tell which is this volume's",
			bytesize.Exact(SecondaryWindow), found.Offset, uuidString(found.hdr.UUID), strings.Join(others, ", "))
	case found != nil:
		*s = *found
	case damaged != nil:
		*s = *damaged
	default:
		s.Offset = top
		s.Err = fmt.Errorf("not found at byte %d nor in the %s before it", top, bytesize.Exact(SecondaryWindow))
	}
}

func (hs *Headers) which() string {
	if hs.Header == hs.Primary.hdr {
		return "primary"
	}
	return "secondary"
}

func (hs *Headers) other(c *CopyStatus) *CopyStatus {
	if c == &hs.Primary {
		return &hs.Secondary
	}
	return &hs.Primary
}

func otherCopy(hs *Headers) *CopyStatus {
	if hs.Header == hs.Primary.hdr {
		return &hs.Secondary
	}
	return &hs.Primary
}

func (c *CopyStatus) uuid() [16]byte {
	if c.hdr == nil {
		return [16]byte{}
	}
	return c.hdr.UUID
}

func (hs *Headers) warnf(format string, args ...any) {
	hs.Warnings = append(hs.Warnings, fmt.Sprintf(format, args...))
}

// read reads and parses the copy at off.
func (c *CopyStatus) read(r io.ReaderAt, off, size int64) {
	c.Offset = off
	if off == 0 && size < CopySize {
		c.Err = ErrNotVolume // too small to hold a header
		return
	}
	if off < 0 || off+CopySize > size {
		c.Err = errors.New("beyond the end of the image")
		return
	}
	if _, err := r.ReadAt(c.raw[:], off); err != nil {
		c.Err = fmt.Errorf("cannot read: %w", err)
		return
	}
	h, err := parseBlock(c.raw[:HeaderBlockSize])
	if err != nil {
		c.Err = err
		return
	}
	c.Parsed, c.hdr, c.Generation = true, h, h.Generation
	err = h.parseSlots(c.raw[slotAreaOffset:], c.raw[offSlotChecksum:offSlotChecksum+32])
	var sa *SlotAreaError
	if errors.As(err, &sa) {
		c.DamagedSlots = sa.Damaged
	}
	c.Err = err
	// Keep the slots that parse on their own, for best-effort unlocking.
	for i := range MaxSlots {
		s, err := parseSlot(c.raw[slotAreaOffset+i*SlotSize:][:SlotSize], h.KeySize)
		c.slots[i], c.bad[i] = s, err != nil
	}
	h.Slots = c.slots
}

// bestEffort builds a header when neither copy is valid as a whole: the
// intact header block with the highest generation, each slot from a copy
// where it is intact.
func (hs *Headers) bestEffort() error {
	p, s := &hs.Primary, &hs.Secondary
	if !p.Parsed && !s.Parsed {
		return &HeadersDamagedError{Primary: p.Err, Secondary: s.Err}
	}
	base, other := p, s
	if !p.Parsed || s.Parsed && s.Generation > p.Generation {
		base, other = s, p
	}
	h := *base.hdr
	for i := range MaxSlots {
		switch {
		case !base.bad[i]:
			h.Slots[i] = base.slots[i]
		case other.Parsed && other.hdr.UUID == h.UUID && !other.bad[i]:
			h.Slots[i] = other.slots[i]
		default:
			h.Slots[i] = KeySlot{}
			hs.Damaged = append(hs.Damaged, i)
		}
	}
	hs.Header = &h
	hs.warnf("both header copies are damaged (primary: %v; secondary: %v); using the intact parts", p.Err, s.Err)
	if len(hs.Damaged) > 0 {
		hs.warnf("%s damaged in both header copies", slotsAre(hs.Damaged))
	}
	return nil
}

// Errors of Unlock.
var (
	ErrWrongPassphrase = errors.New("wrong passphrase: no key slot opens with it")
	ErrNoKeySlots      = errors.New("the volume has no passphrase: every key slot is empty")
)

// SlotsDamagedError: the passphrase opened no intact slot, and some slots
// are damaged in both copies (one of them may have been the right one).
type SlotsDamagedError struct{ Slots []int }

func (e *SlotsDamagedError) Error() string {
	return fmt.Sprintf("the passphrase opens no intact key slot, and %s damaged in both header copies", slotsAre(e.Slots))
}

// UnlockOptions say how Unlock tries the key slots.
type UnlockOptions struct {
	// Slot is the only slot to try (0..7), or -1 for every active slot.
	Slot int
	// Limits bound the KDF costs Unlock runs (DefaultKDFLimits, or
	// UnlimitedKDF when the user says so). A slot beyond them is skipped.
	Limits KDFLimits
	// Trying, if not nil, is called before a slot's KDF runs (to say so
	// when it will take long).
	Trying func(slot int, p KDFParams)
	// Context, if not nil, stops the unlock when it is cancelled (the
	// command line's SIGINT, SIGTERM, SIGHUP): before the next slot, and
	// in the middle of a slot's Argon2id (wrappingKeyCtx says how). The
	// error is then the context's cause (context.Cause: a
	// context.Canceled, or what the canceller said). It is an option
	// rather than a parameter so that it travels with the rest to the
	// callers that unlock on a caller's behalf (OpenWithPassphrase,
	// ChangeSlots, package inplace, the format layer).
	Context context.Context
}

// SlotsTooCostlyError: the passphrase opened no slot that could be tried,
// and these slots were skipped because of their KDF costs.
type SlotsTooCostlyError struct{ Slots []*KDFCostError }

func (e *SlotsTooCostlyError) Error() string {
	msg := "the passphrase opens no key slot within the KDF cost limits: " + e.Slots[0].Error()
	if len(e.Slots) > 1 {
		msg += fmt.Sprintf(" (and %d more slots above the limits)", len(e.Slots)-1)
	}
	return msg
}

// ErrNoSuchSlot: UnlockOptions.Slot names a slot that is empty.
var ErrNoSuchSlot = errors.New("that key slot is empty")

// Unlock finds the key slot that passphrase opens, with the default limits
// on KDF costs, and returns the master key (the caller wipes it) and the
// slot number. The header's MAC is then checked with the key.
func (hs *Headers) Unlock(passphrase []byte) (key []byte, slot int, err error) {
	return hs.UnlockWith(passphrase, UnlockOptions{Slot: -1, Limits: DefaultKDFLimits()})
}

// UnlockWith is Unlock with options. Slots are tried cheapest first (the
// Argon2id work, memory × passes; by number among equals), so slots that
// someone who can write the image made expensive run last. Slots whose
// KDF costs exceed opts.Limits, per slot or with the work of the slots
// already run over this call, are not tried; if no other slot opens, the
// error is a *SlotsTooCostlyError naming them. If opts.Context is
// cancelled, the error is its cause.
func (hs *Headers) UnlockWith(passphrase []byte, opts UnlockOptions) (key []byte, slot int, err error) {
	h := hs.Header
	ctx := opts.Context
	if ctx == nil {
		ctx = context.Background()
	}
	var order []int
	for i := range h.Slots {
		if h.Slots[i].Active && (opts.Slot < 0 || i == opts.Slot) {
			order = append(order, i)
		}
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(h.Slots[a].KDF.Work(), h.Slots[b].KDF.Work()) })
	tried := len(order)
	var costly []*KDFCostError
	var spent uint64
	for _, i := range order {
		s := &h.Slots[i]
		if err := opts.Limits.checkAfter(s.KDF, spent); err != nil {
			ce := err.(*KDFCostError)
			ce.Slot = i
			costly = append(costly, ce)
			continue
		}
		if ctx.Err() != nil {
			return nil, 0, context.Cause(ctx)
		}
		if opts.Trying != nil {
			opts.Trying(i, s.KDF)
		}
		spent += s.KDF.Work()
		key, err := s.unwrap(ctx, passphrase, h.UUID, i, h.KeySize)
		if errors.Is(err, errWrongPassphrase) {
			continue
		}
		if err != nil {
			return nil, 0, err
		}
		if err := h.checkMAC(key); err != nil {
			clear(key)
			return nil, 0, err
		}
		return key, i, nil
	}
	slices.SortFunc(costly, func(a, b *KDFCostError) int { return cmp.Compare(a.Slot, b.Slot) })
	switch {
	case len(costly) > 0:
		return nil, 0, &SlotsTooCostlyError{Slots: costly}
	case opts.Slot >= 0 && slices.Contains(hs.Damaged, opts.Slot):
		return nil, 0, &SlotsDamagedError{Slots: []int{opts.Slot}}
	case opts.Slot >= 0 && tried == 0:
		return nil, 0, fmt.Errorf("key slot %d: %w", opts.Slot, ErrNoSuchSlot)
	case len(hs.Damaged) > 0:
		return nil, 0, &SlotsDamagedError{Slots: slices.Clone(hs.Damaged)}
	case tried == 0:
		return nil, 0, ErrNoKeySlots
	case opts.Slot >= 0:
		return nil, 0, fmt.Errorf("%w (key slot %d: only that slot was tried)", ErrWrongPassphrase, opts.Slot)
	}
	return nil, 0, ErrWrongPassphrase
}

// CheckKey checks a master key against the header (through its MAC).
func (hs *Headers) CheckKey(key []byte) error {
	if len(key) != hs.Header.KeySize {
		return fmt.Errorf("master key is %d bytes, the volume's is %d", len(key), hs.Header.KeySize)
	}
	return hs.Header.checkMAC(key)
}

// writeHeader writes h as the volume's new header, to both copies, so that
// a crash at any moment leaves a volume that opens with the old header or
// the new one:
//
//  1. h gets a generation above that of every copy on the device;
//  2. the secondary copy is written and synced: until this completes, the
//     primary (older generation, intact) is the one in use;
//  3. the primary copy is written and synced: the secondary (newest, intact)
//     is in use until this completes.
//
// A torn write damages only the copy being written, which its checksums
// reveal; the other copy is complete. Writing both copies also repairs a
// damaged one.
func writeHeader(dev Device, hs *Headers, h *Header) error {
	h.Generation = max(hs.Primary.Generation, hs.Secondary.Generation, hs.Header.Generation) + 1
	b, err := h.MarshalBinary()
	if err != nil {
		return err
	}
	for _, off := range []int64{h.SecondaryOffset, 0} {
		if _, err := dev.WriteAt(b, off); err != nil {
			return fmt.Errorf("cannot write header: %w", err)
		}
		if err := dev.Sync(); err != nil {
			return fmt.Errorf("cannot sync header: %w", err)
		}
	}
	return nil
}
