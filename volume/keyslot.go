package volume

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math"
	"runtime"
	"time"

	"github.com/xtsctl/xtsctl/blake2b"
	"github.com/xtsctl/xtsctl/internal/bytesize"
	"github.com/xtsctl/xtsctl/internal/kdfcal"
	"github.com/xtsctl/xtsctl/internal/secret"
	"github.com/xtsctl/xtsctl/internal/sysmem"
	"golang.org/x/crypto/argon2"
	"golang.org/x/crypto/chacha20poly1305"
)

// Byte offsets in a key slot (docs/FORMAT.md, "Key slot").
const (
	slotOffState    = 0
	slotOffKDF      = 4
	slotOffTime     = 8
	slotOffMemory   = 12
	slotOffThreads  = 16
	slotOffAEAD     = 20
	slotOffSalt     = 24
	slotOffNonce    = 56
	slotOffWrapped  = 80
	slotOffChecksum = 480

	slotActive   = 1
	kdfArgon2id  = 1
	aeadXChaCha  = 1
	saltSize     = 32
	wrapOverhead = chacha20poly1305.Overhead
	maxWrapped   = 64 + wrapOverhead
)

// KDFParams are the Argon2id costs of one key slot.
type KDFParams struct {
	Time      uint32 // passes over the memory, at least 1
	MemoryKiB uint32 // memory in KiB, at least 8 per thread
	Threads   uint8  // parallelism (lanes), at least 1
}

// Bounds on what a slot may ask for: unlocking must not be a way to make
// xtsctl allocate without limit.
const (
	MaxKDFMemoryKiB = 4 << 20 // 4 GiB
	MaxKDFTime      = 1000
)

func (p KDFParams) Check() error {
	switch {
	case p.Threads < 1:
		return errors.New("argon2id: parallelism must be at least 1")
	case p.Time < 1 || p.Time > MaxKDFTime:
		return fmt.Errorf("argon2id: %d passes (want 1..%d)", p.Time, MaxKDFTime)
	case p.MemoryKiB < 8*uint32(p.Threads) || p.MemoryKiB > MaxKDFMemoryKiB:
		return fmt.Errorf("argon2id: memory %d KiB (want %d KiB..4 GiB)", p.MemoryKiB, 8*uint32(p.Threads))
	}
	return nil
}

func (p KDFParams) String() string {
	return fmt.Sprintf("argon2id, %d %s, %d KiB, %d %s", p.Time, pluralNoun(int64(p.Time), "pass", "passes"), p.MemoryKiB, p.Threads, pluralNoun(int64(p.Threads), "thread", "threads"))
}

// Work is the Argon2id cost that grows with both memory and passes: the
// memory filled, KiB × passes.
func (p KDFParams) Work() uint64 { return uint64(p.MemoryKiB) * uint64(p.Time) }

// MaxKDFWork bounds memory × passes (in KiB-passes) of a slot that xtsctl
// writes, or runs when unlocking without being told to: 128 GiB-passes,
// around a minute of Argon2id on a current machine (a slot calibrated to
// the default 2 s is a few GiB-passes). The format allows up to
// 4 GiB × 1000 passes; only an explicit override goes there.
const MaxKDFWork = 128 << 20

// MinKDFMemoryKiB is the least memory a new slot should use: cryptsetup's
// default floor for Argon2 on small machines. Less makes guessing cheap
// on GPUs.
const MinKDFMemoryKiB = 32 << 10

// MaxUnlockWork bounds the memory × passes (KiB-passes) of all the slots
// one unlock runs, when it tries every slot: twice what xtsctl writes into
// one slot, so a passphrase in the second of two of the costliest slots
// xtsctl makes still opens unasked, while eight slots rewritten to the
// per-slot bound cost two of them, not eight (a few minutes rather than
// a quarter of an hour). Slots are tried cheapest first, so slots made
// expensive by someone who can write the image do not use up the budget
// before the genuine ones run.
const MaxUnlockWork = 2 * MaxKDFWork

// KDFLimits bound the Argon2id costs that unlocking runs. A slot's costs
// are read from the image, which anyone who can write it may have set: a
// slot asking for 4 GiB × 1000 passes would hold the machine for hours
// before "wrong passphrase", and eight slots each just under a per-slot
// bound would multiply it. They are checked before the KDF runs. Start
// from DefaultKDFLimits: a zero field allows nothing.
type KDFLimits struct {
	MaxMemoryKiB uint32 // per slot
	MaxWork      uint64 // memory KiB × passes, per slot
	// MaxTotalWork bounds memory KiB × passes summed over the slots one
	// unlock runs: a slot that would take the sum above it is skipped.
	MaxTotalWork uint64
}

// UnlimitedKDF runs whatever a slot asks for (within the format's bounds).
var UnlimitedKDF = KDFLimits{MaxMemoryKiB: math.MaxUint32, MaxWork: math.MaxUint64, MaxTotalWork: math.MaxUint64}

// DefaultKDFLimits are the limits used unless the user overrides them:
// what xtsctl writes at most (MaxKDFWork, 4 GiB) per slot, MaxUnlockWork
// over one unlock, and no more memory than three quarters of what this
// machine has available.
func DefaultKDFLimits() KDFLimits {
	l := KDFLimits{MaxMemoryKiB: MaxKDFMemoryKiB, MaxWork: MaxKDFWork, MaxTotalWork: MaxUnlockWork}
	if avail := sysmem.AvailableKiB(); avail > 0 {
		l.MaxMemoryKiB = uint32(min(uint64(l.MaxMemoryKiB), avail/4*3))
	}
	return l
}

// KDFCostError: a key slot asks for more than the limits allow; its KDF
// was not run.
type KDFCostError struct {
	Slot   int
	KDF    KDFParams
	Limits KDFLimits
	// Spent is the work (KiB × passes) the same unlock had run for other
	// slots when this one was checked, which Limits.MaxTotalWork counts.
	Spent uint64
}

// OverTotal reports whether the slot was skipped only because of the
// slots the unlock ran before it: tried alone (UnlockOptions.Slot), it
// runs.
func (e *KDFCostError) OverTotal() bool {
	return e.Spent > 0 && e.Limits.checkAfter(e.KDF, 0) == nil
}

func (e *KDFCostError) Error() string {
	var why string
	switch {
	case e.KDF.MemoryKiB > e.Limits.MaxMemoryKiB:
		why = fmt.Sprintf("more than the %s of memory this machine can spare", bytesize.Exact(int64(e.Limits.MaxMemoryKiB)<<10))
	case e.KDF.Work() > e.Limits.MaxWork:
		why = fmt.Sprintf("more work (memory × passes) than the %s·passes xtsctl runs unasked", workString(e.Limits.MaxWork))
	case e.Spent == 0:
		why = fmt.Sprintf("more work (memory × passes) than the %s·passes one unlock runs unasked", workString(e.Limits.MaxTotalWork))
	default:
		why = fmt.Sprintf("which after the %s·passes run for other key slots is more than the %s·passes one unlock runs unasked", workString(e.Spent), workString(e.Limits.MaxTotalWork))
	}
	return fmt.Sprintf("key slot %d asks for Argon2id with %s × %d passes × %d threads, %s", e.Slot, bytesize.Exact(int64(e.KDF.MemoryKiB)<<10), e.KDF.Time, e.KDF.Threads, why)
}

// workString writes KiB × passes as a size (the "GiB" of "GiB·passes").
func workString(kib uint64) string {
	if kib > math.MaxInt64>>10 {
		return "unlimited"
	}
	return bytesize.Exact(int64(kib) << 10)
}

// Check returns a *KDFCostError (with Slot -1) if p exceeds the per-slot
// limits.
func (l KDFLimits) Check(p KDFParams) error {
	return l.checkAfter(p, 0)
}

// checkAfter is Check for a slot run after spent KiB × passes of other
// slots in the same unlock: the total bound counts them.
func (l KDFLimits) checkAfter(p KDFParams, spent uint64) error {
	if p.MemoryKiB > l.MaxMemoryKiB || p.Work() > l.MaxWork || spent+p.Work() > l.MaxTotalWork {
		return &KDFCostError{Slot: -1, KDF: p, Limits: l, Spent: spent}
	}
	return nil
}

// KeySlot is one passphrase's copy of the master key, wrapped.
type KeySlot struct {
	Active  bool
	KDF     KDFParams
	Salt    [saltSize]byte
	Nonce   [chacha20poly1305.NonceSizeX]byte
	Wrapped [maxWrapped]byte // the first KeySize+16 bytes are used
}

var errSlotChecksum = errors.New("checksum mismatch")

func parseSlot(b []byte, keySize int) (KeySlot, error) {
	if allZero(b) {
		return KeySlot{}, nil
	}
	sum := blake2b.Sum256(b[:slotOffChecksum])
	if !bytes.Equal(sum[:], b[slotOffChecksum:SlotSize]) {
		return KeySlot{}, errSlotChecksum
	}
	s := KeySlot{
		Active: le32(b, slotOffState) == slotActive,
		KDF: KDFParams{
			Time:      le32(b, slotOffTime),
			MemoryKiB: le32(b, slotOffMemory),
			Threads:   uint8(le32(b, slotOffThreads)),
		},
	}
	switch {
	case !s.Active:
		return KeySlot{}, fmt.Errorf("unknown slot state %d", le32(b, slotOffState))
	case le32(b, slotOffKDF) != kdfArgon2id:
		return KeySlot{}, fmt.Errorf("unknown key derivation function %d", le32(b, slotOffKDF))
	case le32(b, slotOffAEAD) != aeadXChaCha:
		return KeySlot{}, fmt.Errorf("unknown key wrapping %d", le32(b, slotOffAEAD))
	case le32(b, slotOffThreads) > 255:
		return KeySlot{}, fmt.Errorf("argon2id parallelism %d is above 255", le32(b, slotOffThreads))
	case !allZero(b[slotOffWrapped+keySize+wrapOverhead : slotOffChecksum]):
		return KeySlot{}, errors.New("reserved bytes are not zero")
	}
	if err := s.KDF.Check(); err != nil {
		return KeySlot{}, err
	}
	copy(s.Salt[:], b[slotOffSalt:])
	copy(s.Nonce[:], b[slotOffNonce:])
	copy(s.Wrapped[:keySize+wrapOverhead], b[slotOffWrapped:])
	return s, nil
}

// marshal encodes the slot into b (SlotSize bytes, zeroed by the caller).
func (s *KeySlot) marshal(b []byte, keySize int) error {
	if !s.Active {
		if *s != (KeySlot{}) {
			return errors.New("an empty slot must be all zero")
		}
		return nil
	}
	if err := s.KDF.Check(); err != nil {
		return err
	}
	if !allZero(s.Wrapped[keySize+wrapOverhead:]) {
		return errors.New("wrapped key longer than the key size")
	}
	s.params(b)
	copy(b[slotOffNonce:], s.Nonce[:])
	copy(b[slotOffWrapped:], s.Wrapped[:keySize+wrapOverhead])
	sum := blake2b.Sum256(b[:slotOffChecksum])
	copy(b[slotOffChecksum:], sum[:])
	return nil
}

// params writes the slot's parameters (state, KDF, AEAD, salt): the part
// of the slot bound to the wrapped key as associated data.
func (s *KeySlot) params(b []byte) {
	put32(b, slotOffState, slotActive)
	put32(b, slotOffKDF, kdfArgon2id)
	put32(b, slotOffTime, s.KDF.Time)
	put32(b, slotOffMemory, s.KDF.MemoryKiB)
	put32(b, slotOffThreads, uint32(s.KDF.Threads))
	put32(b, slotOffAEAD, aeadXChaCha)
	copy(b[slotOffSalt:], s.Salt[:])
}

// associatedData binds a wrapped key to its slot parameters, its volume and
// its slot number: a slot copied to another volume or index does not open.
func (s *KeySlot) associatedData(uuid [16]byte, index, keySize int) []byte {
	ad := make([]byte, slotOffNonce+16+8)
	s.params(ad)
	copy(ad[slotOffNonce:], uuid[:])
	put32(ad, slotOffNonce+16, uint32(index))
	put32(ad, slotOffNonce+20, uint32(keySize))
	return ad
}

// kdfTestHook, when set by a test, replaces the costs of every new slot so
// that tests do not spend seconds and gigabytes per passphrase.
var kdfTestHook func(KDFParams) KDFParams

// argon2IDKey is argon2.IDKey; tests replace it to see which slots run
// and to hold a run while they cancel it.
var argon2IDKey = argon2.IDKey

// abandonedKDFTestHook, when set by a test, is called once an Argon2id
// run that unwrapCtx stopped waiting for has ended and its output was
// wiped.
var abandonedKDFTestHook func()

func wrappingKey(passphrase []byte, salt []byte, p KDFParams) []byte {
	var stack secret.Stack
	stack.Reserve()
	defer stack.Burn()
	return argon2IDKey(passphrase, salt, p.Time, p.MemoryKiB, p.Threads, chacha20poly1305.KeySize)
}

// wrappingKeyCtx is wrappingKey that returns ctx's cause (context.Cause)
// as soon as ctx is cancelled (SIGINT, SIGTERM), even in the middle of
// the run.
//
// x/crypto/argon2 cannot be stopped part-way, and splitting the run at its
// passes would mean an Argon2 of our own (the passes share state that the
// package does not expose). So the run goes on a goroutine of its own with
// its own copies of the passphrase and salt (the caller wipes its
// passphrase once this returns), and on cancellation it is abandoned: it
// runs to its end, bounded like every run by the KDF limits, and then
// wipes its copy of the passphrase and the key it derived, which nobody
// reads. The caller is stopping, and the process exits with it (the
// command line's interrupted exit), which ends the run and frees its
// memory; a caller that stays pays at most the one slot's bounded run in
// the background. Argon2's own memory, freed to the garbage collector, is
// not wiped, as in every unlock.
func wrappingKeyCtx(ctx context.Context, passphrase, salt []byte, p KDFParams) ([]byte, error) {
	if ctx.Done() == nil {
		return wrappingKey(passphrase, salt, p), nil
	}
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	pass, salt := bytes.Clone(passphrase), bytes.Clone(salt)
	done := make(chan []byte) // unbuffered: a key is handed over or wiped, never left in a buffer
	go func() {
		wk := wrappingKey(pass, salt, p)
		clear(pass)
		select {
		case done <- wk:
		case <-ctx.Done():
			clear(wk)
			if abandonedKDFTestHook != nil {
				abandonedKDFTestHook()
			}
		}
	}()
	select {
	case wk := <-done:
		return wk, nil
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// newSlot wraps key under passphrase with fresh salt and nonce.
func newSlot(passphrase, key []byte, uuid [16]byte, index int, p KDFParams) (KeySlot, error) {
	if kdfTestHook != nil {
		p = kdfTestHook(p)
	}
	if err := p.Check(); err != nil {
		return KeySlot{}, err
	}
	if p.Work() > MaxKDFWork {
		// xtsctl would refuse to unlock it unasked (DefaultKDFLimits).
		return KeySlot{}, fmt.Errorf("argon2id: %s × %d passes is more work than xtsctl runs when unlocking (%s·passes)", bytesize.Exact(int64(p.MemoryKiB)<<10), p.Time, bytesize.Exact(int64(MaxKDFWork)<<10))
	}
	s := KeySlot{Active: true, KDF: p}
	if _, err := rand.Read(s.Salt[:]); err != nil {
		return KeySlot{}, err
	}
	if _, err := rand.Read(s.Nonce[:]); err != nil {
		return KeySlot{}, err
	}
	var stack secret.Stack
	stack.Reserve()
	defer stack.Burn()
	wk := wrappingKey(passphrase, s.Salt[:], p)
	aead, err := chacha20poly1305.NewX(wk)
	clear(wk)
	if err != nil {
		return KeySlot{}, err
	}
	defer secret.WipeObject(aead)
	aead.Seal(s.Wrapped[:0], s.Nonce[:], key, s.associatedData(uuid, index, len(key)))
	return s, nil
}

// errWrongPassphrase: the slot is intact but the passphrase does not open it.
var errWrongPassphrase = errors.New("wrong passphrase")

// unwrap recovers the master key; an intact slot that does not open means a
// wrong passphrase (the slot checksum has already told damage apart). It
// returns ctx's cause if ctx is cancelled before the KDF has run.
func (s *KeySlot) unwrap(ctx context.Context, passphrase []byte, uuid [16]byte, index, keySize int) ([]byte, error) {
	var stack secret.Stack
	stack.Reserve()
	defer stack.Burn()
	wk, err := wrappingKeyCtx(ctx, passphrase, s.Salt[:], s.KDF)
	if err != nil {
		return nil, err
	}
	aead, err := chacha20poly1305.NewX(wk)
	clear(wk)
	if err != nil {
		return nil, err
	}
	defer secret.WipeObject(aead)
	key, err := aead.Open(nil, s.Nonce[:], s.Wrapped[:keySize+wrapOverhead], s.associatedData(uuid, index, keySize))
	if err != nil {
		return nil, errWrongPassphrase
	}
	return key, nil
}

// DefaultKDFTime is how long unlocking one slot takes on the machine that
// makes it, as with cryptsetup's --iter-time default.
const DefaultKDFTime = 2 * time.Second

// defaultKDFMemoryKiB is the memory Argon2id uses when RAM allows (1 GiB,
// cryptsetup's maximum).
const defaultKDFMemoryKiB = 1 << 20

// DefaultKDFMemory is the memory in KiB Argon2id uses by default:
// defaultKDFMemoryKiB, or half the available RAM if that is less.
func DefaultKDFMemory() uint32 {
	if avail := sysmem.AvailableKiB(); avail > 0 {
		return uint32(min(defaultKDFMemoryKiB, avail/2))
	}
	return defaultKDFMemoryKiB
}

// MinKDFPasses is the fewest passes calibration gives a new slot: one
// pass over as much memory as the time allows is what RFC 9106 recommends
// first for Argon2id (LUKS2 keyslots take at least 4, as cryptsetup's).
const MinKDFPasses = 1

// CalibrateKDF picks Argon2id costs that take about target to unlock on
// this machine, as cryptsetup's PBKDF benchmark does (internal/kdfcal):
// threads up to 4 (no more than the CPUs), memory up to DefaultKDFMemory
// and then more passes; the memory is lowered only when one pass at its
// most would take longer than target. A memoryKiB other than 0 is what the
// user chose: it stays, and only the passes are calibrated, even when one
// pass takes longer than target. It returns the costs and what unlocking
// takes with them here.
func CalibrateKDF(target time.Duration, memoryKiB uint32) (KDFParams, time.Duration) {
	threads := uint8(min(4, max(1, runtime.NumCPU())))
	b := kdfcal.Bounds{MinPasses: MinKDFPasses, MaxPasses: MaxKDFTime, MinMemoryKiB: 32, MaxMemoryKiB: DefaultKDFMemory(), Threads: threads}
	if memoryKiB != 0 {
		b.MinMemoryKiB, b.MaxMemoryKiB = memoryKiB, memoryKiB
		// Argon2 needs 8 KiB per lane: a tiny chosen memory gets fewer.
		threads = uint8(max(1, min(uint32(threads), memoryKiB/8)))
		b.Threads = threads
	}
	if kdfTestHook != nil {
		return kdfTestHook(KDFParams{Time: 1, MemoryKiB: max(b.MaxMemoryKiB, 8*uint32(threads)), Threads: threads}), 0
	}
	r := kdfcal.Calibrate(target, b, kdfcal.Argon2id(threads))
	return KDFParams{Time: r.Passes, MemoryKiB: r.MemoryKiB, Threads: r.Threads}, r.Took
}

// pluralNoun picks the singular for n == 1.
func pluralNoun(n int64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
