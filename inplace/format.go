package inplace

import (
	"bytes"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/xtsctl/xtsctl/blake2b"
)

// The two on-disk blocks of a run (docs/INPLACE.md, byte by byte): the
// anchor, which says what the run is and where its parts are, with an
// unkeyed checksum only (info reads it without a key); and the records,
// two of them alternating, which say how far the run got, authenticated
// with a key derived from the key of the run. Nothing the anchor says is
// acted on before a record that authenticates vouches for it (the record
// carries the anchor's checksum), except where docs/INPLACE.md says why
// it is safe.
const (
	blockSize = 4096
	// anchorSize: one 512-byte sector, which reaches the disk whole or
	// not at all. So the write that starts a run (at the new end of an
	// image, which it grows) and the one that ends it cannot tear it.
	anchorSize = 512

	anchorMagic = "XTSIPANC"
	recordMagic = "XTSIPREC"
	// formatVer is the version new runs write. Version 2 added the
	// records' ahead MAC and end sample, the finished record (plain) and
	// the second header copy of a volume run; runs of version 1 (started
	// by an older xtsctl) are still resumed, without those.
	formatVer    = 2
	minFormatVer = 1

	// anchor fields
	aVersion    = 8
	aKind       = 12
	aDirection  = 16
	aMode       = 20
	aRunID      = 24
	aLength     = 40
	aSource     = 48
	aDest       = 56
	aOrigSize   = 64
	aFinalSize  = 72
	aZone       = 80
	aSectorSize = 88
	aIVMode     = 92
	aIVOffset   = 96
	aOffset     = 104
	aHeaderOff  = 112
	aRecords    = 120 // offset of record slot 0 in the device holding the records
	aDataSlots  = 128 // offset of data slot 0 (journal mode)
	aBackupHdr  = 136 // volume, version 2: offset of the second header copy kept during the run
	aReserved   = 144
	aChecksum   = anchorSize - 32

	// record fields
	rRunID      = 8
	rSequence   = 24
	rAnchorSum  = 32
	rNext       = 64
	rFlags      = 72
	rDataLen    = 80
	rDataMAC    = 88
	rSampleOff  = 120
	rSampleLen  = 128
	rSampleMAC  = 136
	rSealedLen  = 168
	rSealed     = 172
	maxSealed   = 512
	rAheadOff   = rSealed + maxSealed // version 2
	rAheadLen   = rAheadOff + 8
	rAheadMAC   = rAheadLen + 8
	rEndOff     = rAheadMAC + macSize // version 2, finished records
	rEndLen     = rEndOff + 8
	rEndMAC     = rEndLen + 8
	rReserved   = rEndMAC + macSize
	rMAC        = blockSize - 96
	rChecksum   = blockSize - 32
	macSize     = 32
	maxSequence = uint64(1) << 62

	recordHasData  uint32 = 1 << 0 // the data slot of this record holds zone Next, converted
	recordFinished uint32 = 1 << 1 // plain, version 2: the run is finished, its finish steps done
)

// Kind is what the target holds around the data.
type Kind uint32

const (
	KindPlain  Kind = 1 // headerless (cryptsetup plain mode)
	KindVolume Kind = 2 // an xtsctl volume
)

func (k Kind) String() string {
	switch k {
	case KindPlain:
		return "plain"
	case KindVolume:
		return "volume"
	}
	return fmt.Sprintf("kind %d", uint32(k))
}

// Direction says which way a run converts.
type Direction uint32

const (
	Encrypt Direction = 1
	Decrypt Direction = 2
)

func (d Direction) String() string {
	switch d {
	case Encrypt:
		return "encryption"
	case Decrypt:
		return "decryption"
	}
	return fmt.Sprintf("direction %d", uint32(d))
}

// Verb is the command that runs d: "encrypt" or "decrypt".
func (d Direction) Verb() string {
	if d == Decrypt {
		return "decrypt"
	}
	return "encrypt"
}

// mode is how zones are made safe.
type mode uint32

const (
	// modeShift: the data moves by at least a zone, so a zone's
	// destination never covers source not yet converted: writing it needs
	// no copy, and a record after it says it is done.
	modeShift mode = 1
	// modeJournal: the zone is converted into a data slot of the journal
	// first, synced with a record naming it; then written in place.
	modeJournal mode = 2
)

// newRunVersion is the format version a new run writes: formatVer; a
// variable so that the tests can make runs as a version-1 xtsctl did and
// resume them.
var newRunVersion uint32 = formatVer

// anchor describes a run: what is converted, from where to where.
type anchor struct {
	Version    uint32 // format version: formatVer for new runs
	Kind       Kind
	Direction  Direction
	Mode       mode
	RunID      [16]byte
	Length     int64 // bytes of data converted
	Source     int64 // where the data is in the target before the run
	Dest       int64 // where it is after
	OrigSize   int64 // the target's size before the run
	FinalSize  int64 // after the run (images change size, devices do not)
	Zone       int64 // bytes per zone
	SectorSize uint32
	IVMode     uint32 // plain
	IVOffset   uint64 // plain: cryptsetup --skip
	Offset     uint64 // plain: cryptsetup --offset
	HeaderOff  int64  // volume: where the header copy used during the run is
	Records    int64  // where record slot 0 is (slot 1 follows)
	DataSlots  int64  // journal mode: where data slot 0 is (slot 1 follows, Zone bytes on)
	BackupHdr  int64  // volume: where the second header copy of the run is (0: none, version 1)
}

func (a *anchor) marshal() []byte {
	b := make([]byte, anchorSize)
	copy(b, anchorMagic)
	put32(b, aVersion, a.Version)
	put32(b, aKind, uint32(a.Kind))
	put32(b, aDirection, uint32(a.Direction))
	put32(b, aMode, uint32(a.Mode))
	copy(b[aRunID:], a.RunID[:])
	put64(b, aLength, uint64(a.Length))
	put64(b, aSource, uint64(a.Source))
	put64(b, aDest, uint64(a.Dest))
	put64(b, aOrigSize, uint64(a.OrigSize))
	put64(b, aFinalSize, uint64(a.FinalSize))
	put64(b, aZone, uint64(a.Zone))
	put32(b, aSectorSize, a.SectorSize)
	put32(b, aIVMode, a.IVMode)
	put64(b, aIVOffset, a.IVOffset)
	put64(b, aOffset, a.Offset)
	put64(b, aHeaderOff, uint64(a.HeaderOff))
	put64(b, aRecords, uint64(a.Records))
	put64(b, aDataSlots, uint64(a.DataSlots))
	put64(b, aBackupHdr, uint64(a.BackupHdr))
	sum := blake2b.Sum256(b[:aChecksum])
	copy(b[aChecksum:], sum[:])
	return b
}

// errNoAnchor: the block is not an anchor (no magic): no run.
var errNoAnchor = errors.New("no in-place run")

// maxBytes bounds every size and offset an anchor may state, as the volume
// format bounds its own (1 PiB of data, plus room).
const maxBytes = int64(1) << 52

// parseAnchor checks an anchor's magic, version, checksum and that its
// numbers are within bounds and consistent; it does not authenticate it.
func parseAnchor(b []byte) (*anchor, [32]byte, error) {
	var sum [32]byte
	if len(b) != anchorSize || string(b[:8]) != anchorMagic {
		return nil, sum, errNoAnchor
	}
	v := le32(b, aVersion)
	if v < minFormatVer || v > formatVer {
		return nil, sum, fmt.Errorf("in-place run format version %d (this xtsctl reads versions %d to %d)", v, minFormatVer, formatVer)
	}
	sum = blake2b.Sum256(b[:aChecksum])
	if !bytes.Equal(sum[:], b[aChecksum:]) {
		return nil, sum, errors.New("the in-place run's anchor is damaged (checksum mismatch)")
	}
	a := &anchor{
		Version: v, Kind: Kind(le32(b, aKind)), Direction: Direction(le32(b, aDirection)), Mode: mode(le32(b, aMode)),
		Length: int64(le64(b, aLength)), Source: int64(le64(b, aSource)), Dest: int64(le64(b, aDest)),
		OrigSize: int64(le64(b, aOrigSize)), FinalSize: int64(le64(b, aFinalSize)), Zone: int64(le64(b, aZone)),
		SectorSize: le32(b, aSectorSize), IVMode: le32(b, aIVMode), IVOffset: le64(b, aIVOffset), Offset: le64(b, aOffset),
		HeaderOff: int64(le64(b, aHeaderOff)), Records: int64(le64(b, aRecords)), DataSlots: int64(le64(b, aDataSlots)),
		BackupHdr: int64(le64(b, aBackupHdr)),
	}
	copy(a.RunID[:], b[aRunID:])
	if err := a.check(); err != nil || !allZero(b[aReserved:aChecksum]) || v < 2 && a.BackupHdr != 0 {
		return nil, sum, fmt.Errorf("the in-place run's anchor is invalid: %v", cmpOr(err, errors.New("reserved bytes are not zero")))
	}
	return a, sum, nil
}

func cmpOr(err, other error) error {
	if err != nil {
		return err
	}
	return other
}

// check bounds every number, so that arithmetic on them cannot overflow
// and a zone is a whole number of chunks and sectors.
func (a *anchor) check() error {
	in := func(v int64) bool { return v >= 0 && v <= maxBytes }
	switch {
	case a.Version < minFormatVer || a.Version > formatVer:
		return fmt.Errorf("unknown version %d", a.Version)
	case a.Kind != KindPlain && a.Kind != KindVolume:
		return fmt.Errorf("unknown kind %d", uint32(a.Kind))
	case a.Direction != Encrypt && a.Direction != Decrypt:
		return fmt.Errorf("unknown direction %d", uint32(a.Direction))
	case a.Mode != modeShift && a.Mode != modeJournal:
		return fmt.Errorf("unknown mode %d", uint32(a.Mode))
	case !in(a.Length) || !in(a.Source) || !in(a.Dest) || !in(a.OrigSize) || !in(a.FinalSize) ||
		!in(a.HeaderOff) || !in(a.Records) || !in(a.DataSlots) || !in(a.Zone) || !in(a.BackupHdr):
		return errors.New("a size or offset is out of range")
	case a.Length == 0 || a.Zone <= 0 || a.Zone%chunk != 0 || a.Zone > maxZone:
		return errors.New("bad data length or zone size")
	case a.IVMode > 1:
		return fmt.Errorf("unknown IV mode %d", a.IVMode)
	case a.SectorSize != 512 && a.SectorSize != 1024 && a.SectorSize != 2048 && a.SectorSize != 4096:
		return fmt.Errorf("bad sector size %d", a.SectorSize)
	case a.Length%int64(a.SectorSize) != 0 || a.Source%int64(a.SectorSize) != 0 && a.Kind == KindVolume:
		return errors.New("the data is not whole sectors")
	case a.Mode == modeShift && abs(a.Dest-a.Source) < a.Zone:
		return errors.New("a zone is larger than the shift")
	}
	return nil
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// record is how far a run got: every zone before Next is converted and in
// place; with HasData, zone Next is converted in the data slot of the
// record's parity (journal mode) and may be partly in place. Finished: the
// run is over (plain runs keep this record in their journal, so that the
// same command run again converts nothing).
type record struct {
	Sequence  uint64
	Next      int64
	HasData   bool
	Finished  bool
	DataLen   int64
	DataMAC   [macSize]byte
	SampleOff int64 // a sample of the target that the run wrote, or left alone,
	SampleLen int64 // and that stays so while this record is in force
	SampleMAC [macSize]byte
	Sealed    []byte // volume decryption: the sealed state of the digest
	// The source of the first zone the run has not touched (version 2),
	// all of it: what the run reads next, which no write of the run
	// changes before a later record is in force. A target that went on
	// further than this record (an older record put back, the newest
	// one destroyed) no longer matches it.
	AheadOff, AheadLen int64
	AheadMAC           [macSize]byte
	// Finished records: a second sample, the end of the data.
	EndOff, EndLen int64
	EndMAC         [macSize]byte
}

func (r *record) marshal(a *anchor, anchorSum [32]byte, k *runKeys) ([]byte, error) {
	if len(r.Sealed) > maxSealed {
		return nil, errors.New("inplace: sealed state too long")
	}
	b := make([]byte, blockSize)
	copy(b, recordMagic)
	copy(b[rRunID:], a.RunID[:])
	put64(b, rSequence, r.Sequence)
	copy(b[rAnchorSum:], anchorSum[:])
	put64(b, rNext, uint64(r.Next))
	var flags uint32
	if r.HasData {
		flags |= recordHasData
	}
	if r.Finished {
		flags |= recordFinished
	}
	put32(b, rFlags, flags)
	put64(b, rDataLen, uint64(r.DataLen))
	copy(b[rDataMAC:], r.DataMAC[:])
	put64(b, rSampleOff, uint64(r.SampleOff))
	put64(b, rSampleLen, uint64(r.SampleLen))
	copy(b[rSampleMAC:], r.SampleMAC[:])
	put32(b, rSealedLen, uint32(len(r.Sealed)))
	copy(b[rSealed:], r.Sealed)
	put64(b, rAheadOff, uint64(r.AheadOff))
	put64(b, rAheadLen, uint64(r.AheadLen))
	copy(b[rAheadMAC:], r.AheadMAC[:])
	put64(b, rEndOff, uint64(r.EndOff))
	put64(b, rEndLen, uint64(r.EndLen))
	copy(b[rEndMAC:], r.EndMAC[:])
	mac := k.mac(k.record, b[:rMAC])
	copy(b[rMAC:], mac[:])
	sum := blake2b.Sum256(b[:rChecksum])
	copy(b[rChecksum:], sum[:])
	return b, nil
}

// Errors that tell a damaged record from one written with another key.
var (
	errRecordDamaged = errors.New("damaged")
	// ErrWrongKey: the run's records are intact but do not authenticate
	// under the key given: it is not the key of the interrupted run.
	ErrWrongKey = errors.New("the interrupted run was started with a different key or passphrase")
)

// parseRecord checks record slot `slot` of the run described by a (whose
// checksum is anchorSum) under k. An empty slot is (nil, nil).
func parseRecord(b []byte, slot int, a *anchor, anchorSum [32]byte, k *runKeys) (*record, error) {
	if allZero(b) {
		return nil, nil
	}
	sum := blake2b.Sum256(b[:rChecksum])
	if string(b[:8]) != recordMagic || !bytes.Equal(sum[:], b[rChecksum:]) {
		return nil, errRecordDamaged
	}
	mac := k.mac(k.record, b[:rMAC])
	if subtle.ConstantTimeCompare(mac[:], b[rMAC:rMAC+macSize]) != 1 {
		return nil, ErrWrongKey
	}
	// Authenticated: written by xtsctl with this key. It must belong to
	// this run and this anchor.
	flags := le32(b, rFlags)
	r := &record{
		Sequence: le64(b, rSequence), Next: int64(le64(b, rNext)), HasData: flags&recordHasData != 0,
		Finished: flags&recordFinished != 0,
		DataLen:  int64(le64(b, rDataLen)), SampleOff: int64(le64(b, rSampleOff)), SampleLen: int64(le64(b, rSampleLen)),
		AheadOff: int64(le64(b, rAheadOff)), AheadLen: int64(le64(b, rAheadLen)),
		EndOff: int64(le64(b, rEndOff)), EndLen: int64(le64(b, rEndLen)),
	}
	copy(r.DataMAC[:], b[rDataMAC:])
	copy(r.SampleMAC[:], b[rSampleMAC:])
	copy(r.AheadMAC[:], b[rAheadMAC:])
	copy(r.EndMAC[:], b[rEndMAC:])
	n := le32(b, rSealedLen)
	known := recordHasData
	if a.Version >= 2 {
		known |= recordFinished
	}
	switch {
	case !bytes.Equal(b[rRunID:rRunID+16], a.RunID[:]) || !bytes.Equal(b[rAnchorSum:rAnchorSum+32], anchorSum[:]):
		return nil, errors.New("belongs to another run")
	case r.Sequence >= maxSequence || r.Sequence%2 != uint64(slot):
		return nil, fmt.Errorf("impossible sequence number %d", r.Sequence)
	case flags&^known != 0 || n > maxSealed || !allZero(b[rFlags+4:rDataLen]) ||
		!allZero(b[rSealed+int(min(n, maxSealed)):rAheadOff]) || !allZero(b[rReserved:rMAC]) || !allZero(b[rMAC+macSize:rChecksum]),
		a.Version < 2 && !allZero(b[rAheadOff:rReserved]):
		return nil, errors.New("unknown flags or non-zero reserved bytes")
	}
	r.Sealed = bytes.Clone(b[rSealed : rSealed+int(n)])
	return r, nil
}

// runKeys authenticate a run; they are derived from the key that the run
// converts with (a plain key file, a volume's master key), one per use.
type runKeys struct {
	record, data, sample, seal []byte
}

const (
	purposeRecords = "xtsctl in-place v1: records"
	purposeData    = "xtsctl in-place v1: journal data"
	purposeSample  = "xtsctl in-place v1: target sample"
	purposeSeal    = "xtsctl in-place v1: digest state"
)

func newRunKeys(key []byte) *runKeys {
	derive := func(purpose string, n int) []byte {
		k := make([]byte, n)
		blake2b.SumKeyed(k, key, []byte(purpose))
		return k
	}
	return &runKeys{
		record: derive(purposeRecords, 64),
		data:   derive(purposeData, 64),
		sample: derive(purposeSample, 64),
		seal:   derive(purposeSeal, 32),
	}
}

func (k *runKeys) wipe() {
	if k != nil {
		clear(k.record)
		clear(k.data)
		clear(k.sample)
		clear(k.seal)
	}
}

func (k *runKeys) mac(key []byte, msg ...[]byte) (out [macSize]byte) {
	blake2b.SumKeyed(out[:], key, bytes.Join(msg, nil))
	return out
}

func le32(b []byte, off int) uint32     { return binary.LittleEndian.Uint32(b[off:]) }
func le64(b []byte, off int) uint64     { return binary.LittleEndian.Uint64(b[off:]) }
func put32(b []byte, off int, v uint32) { binary.LittleEndian.PutUint32(b[off:], v) }
func put64(b []byte, off int, v uint64) { binary.LittleEndian.PutUint64(b[off:], v) }

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
