package luks

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/xtsctl/xtsctl/internal/dmtable"
	"github.com/xtsctl/xtsctl/xts"
)

// ReadWriterAt is a header device open for writing: an *os.File. If it
// also has a Sync method, writes are synced at every step that crash
// safety relies on.
type ReadWriterAt interface {
	io.ReaderAt
	io.WriterAt
}

func syncFile(f any) error {
	if s, ok := f.(interface{ Sync() error }); ok {
		return s.Sync()
	}
	return nil
}

// copyParams are the binary header fields of a LUKS2 copy.
type copyParams struct {
	hdrSize     uint64
	seqID       uint64
	label       string
	subsystem   string
	uuid        string
	checksumAlg string
}

// serializeCopy builds one header copy: the binary header with its
// checksum, then the JSON text NUL-padded to the JSON area.
func serializeCopy(p copyParams, meta []byte, secondary bool, salt [saltLen2]byte) ([]byte, error) {
	if uint64(len(meta)) > p.hdrSize-binHeaderSize-1 {
		return nil, fmt.Errorf("LUKS2 metadata of %d bytes does not fit the %d-byte JSON area", len(meta), p.hdrSize-binHeaderSize)
	}
	// The fields hold what a header read gives back (cstring): up to their
	// whole width, a NUL only when shorter, as cryptsetup reads them.
	if len(p.label) > labelLen || len(p.subsystem) > labelLen || len(p.uuid) > uuidLen || len(p.checksumAlg) > csumAlgLen {
		return nil, fmt.Errorf("label and subsystem are at most %d bytes", labelLen-1)
	}
	b := make([]byte, p.hdrSize)
	off := uint64(0)
	copy(b[offMagic:], magic1)
	if secondary {
		off = p.hdrSize
		copy(b[offMagic:], magic2)
	}
	binary.BigEndian.PutUint16(b[offVersion:], 2)
	binary.BigEndian.PutUint64(b[offHdrSize:], p.hdrSize)
	binary.BigEndian.PutUint64(b[offSeqID:], p.seqID)
	copy(b[offLabel:offLabel+labelLen], p.label)
	copy(b[offCsumAlg:offCsumAlg+csumAlgLen], p.checksumAlg)
	copy(b[offSalt:], salt[:])
	copy(b[offUUID:offUUID+uuidLen], p.uuid)
	copy(b[offSubsystem:offSubsystem+labelLen], p.subsystem)
	binary.BigEndian.PutUint64(b[offHdrOffset:], off)
	copy(b[binHeaderSize:], meta)
	newHash := checksumHash(p.checksumAlg)
	if newHash == nil {
		return nil, unsupported(FeatureChecksum, p.checksumAlg, "")
	}
	sum := headerChecksum(newHash, b[:binHeaderSize], b[binHeaderSize:])
	copy(b[offChecksum:], sum)
	return b, nil
}

// writeCopies writes both copies with meta and sequence number p.seqID.
//
// Crash safety: each copy is written in one WriteAt and synced before the
// other is started, so at any moment at most one copy is torn, and a torn
// copy fails its checksum. The copy that is not the one in use (damaged,
// missing, stale, or simply the second) is written first: if the machine
// stops while it is written, the copy in use still holds the old state;
// once it is written, its higher seqid makes it win, so the new state is
// read while the other copy is rewritten. When both copies are good this
// is cryptsetup's order (primary, then secondary); when the primary is the
// damaged one, cryptsetup's order would, for a moment, leave no good copy
// at all, and ours does not.
func writeCopies(f ReadWriterAt, p copyParams, meta []byte, salts [2][saltLen2]byte, primaryFirst bool) error {
	for i := range salts {
		if salts[i] == ([saltLen2]byte{}) {
			// A copy that was damaged gets a new salt, as cryptsetup's
			// recovery gives it.
			if _, err := io.ReadFull(rand.Reader, salts[i][:]); err != nil {
				return err
			}
		}
	}
	order := []bool{false, true}
	if !primaryFirst {
		order = []bool{true, false}
	}
	for _, secondary := range order {
		idx := 0
		if secondary {
			idx = 1
		}
		b, err := serializeCopy(p, meta, secondary, salts[idx])
		if err != nil {
			return err
		}
		off := int64(0)
		if secondary {
			off = int64(p.hdrSize)
		}
		if _, err := f.WriteAt(b, off); err != nil {
			return err
		}
		if err := syncFile(f); err != nil {
			return err
		}
	}
	return nil
}

// commit writes meta as the new metadata of h, crash-safely, after
// checking that the header on disk is still the one h was read from. On
// success h is replaced by the header read back from disk.
func (h *Header) commit(f ReadWriterAt, devSize int64, meta *jvalue) error {
	if h.Version != 2 || h.meta == nil {
		return unsupported(FeatureVersion, "1 (writing)", "only LUKS2 headers are written")
	}
	cur, err := h.current(f, devSize)
	if err != nil {
		return err
	}
	text := meta.marshal()
	// Never write what we would not read back.
	area := make([]byte, h.MetadataSize-binHeaderSize)
	if len(text) >= len(area) {
		return fmt.Errorf("LUKS2 metadata of %d bytes does not fit the %d-byte JSON area", len(text), len(area))
	}
	copy(area, text)
	nh, err := parseMetadata(area, h.MetadataSize, uint64(devSize))
	if err != nil {
		return fmt.Errorf("new metadata does not validate: %w", err)
	}
	if err := nh.Supported(); err != nil {
		return err
	}
	p := copyParams{
		hdrSize: h.MetadataSize, seqID: h.SeqID + 1, label: h.Label,
		subsystem: h.Subsystem, uuid: h.UUID, checksumAlg: h.checksumAlg,
	}
	salts := h.salts
	for i, c := range cur.Copies {
		if c.State != CopyOK && c.State != CopyStale {
			salts[i] = [saltLen2]byte{}
		}
	}
	if err := writeCopies(f, p, text, salts, cur.Copies[1].State == CopyOK); err != nil {
		return err
	}
	back, err := ReadHeader(f, devSize)
	if err != nil {
		return fmt.Errorf("reading back the header just written: %w", err)
	}
	if back.SeqID != p.seqID || back.Copies[0].State != CopyOK || back.Copies[1].State != CopyOK {
		return fmt.Errorf("the header read back is not the one just written")
	}
	*h = *back
	return nil
}

// current reads the header on disk and checks that it is still h: same
// UUID, same seqid. Every write checks this before it writes anything,
// keyslot areas included, so that a header changed meanwhile (cryptsetup
// adding a keyslot in the area we would pick) is never overwritten.
func (h *Header) current(f io.ReaderAt, devSize int64) (*Header, error) {
	cur, err := ReadHeader(f, devSize)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrHeaderChanged, err)
	}
	if cur.Version != 2 || cur.UUID != h.UUID || cur.SeqID != h.SeqID {
		return nil, ErrHeaderChanged
	}
	return cur, nil
}

// writeArea writes b at off in the keyslots area and syncs.
func writeArea(f ReadWriterAt, b []byte, off uint64) error {
	if _, err := f.WriteAt(b, int64(off)); err != nil {
		return err
	}
	return syncFile(f)
}

// wipeArea overwrites a keyslot area with random bytes.
func wipeArea(f ReadWriterAt, a Area) error {
	b := make([]byte, a.Size)
	if _, err := io.ReadFull(rand.Reader, b); err != nil {
		return err
	}
	return writeArea(f, b, a.Offset)
}

// Defaults of the LUKS2 headers Format writes: those of cryptsetup 2.6.1
// for a file (luksFormat --type luks2 without layout options).
const (
	DefaultMetadataSize = 16 << 10 // per copy: 4 KiB binary header + 12 KiB JSON
	DefaultDataOffset   = 16 << 20 // the keyslots area fills the rest
	DefaultSectorSize   = 4096
	DefaultKeySize      = 64 // AES-256-XTS
	DefaultKDFTime      = 2 * time.Second
	areaHash            = "sha256" // AF and digest hash cryptsetup uses by default
)

// KeyslotOptions are the parameters of a new keyslot.
type KeyslotOptions struct {
	// Argon2 sets the Argon2id costs; nil calibrates them to KDFTime and
	// KDFMemoryKiB with CalibrateArgon2id.
	Argon2       *Argon2Params
	KDFTime      time.Duration // 0: 2 s, cryptsetup's default
	KDFMemoryKiB uint32        // 0: calibrated, at most 1 GiB and half the available memory; else exactly this
	// Keyslot is the ID to use (cryptsetup --key-slot); nil picks the
	// lowest free one. AddKeyslot only.
	Keyslot  *int
	Priority Priority // 0 is PriorityNormal here; set PriorityPrefer to prefer
	// Limits bound the volume key digest check (AddKeyslot,
	// ChangeKeyslot); nil means DefaultLimits().
	Limits *Limits
}

func (o *KeyslotOptions) argon2() (Argon2Params, error) {
	if o.Argon2 != nil {
		return *o.Argon2, o.Argon2.Check()
	}
	t := o.KDFTime
	if t == 0 {
		t = DefaultKDFTime
	}
	if m := o.KDFMemoryKiB; m != 0 {
		if err := (Argon2Params{Time: MinArgon2Passes, MemoryKiB: m, Threads: 1}).Check(); err != nil {
			return Argon2Params{}, err
		}
	}
	p, _ := CalibrateArgon2id(t, o.KDFMemoryKiB)
	return p, p.Check()
}

// newKeyslot derives a keyslot key from the passphrase, splits and
// encrypts the volume key, and returns the keyslot's JSON and the
// material to write at area offset.
func newKeyslot(key, passphrase []byte, kp Argon2Params, areaOff, areaSize uint64, prio Priority) (*jvalue, []byte, error) {
	salt := make([]byte, keyslotSaltLen)
	if _, err := io.ReadFull(rand.Reader, salt); err != nil {
		return nil, nil, err
	}
	kdf := KDF{Type: "argon2id", Time: kp.Time, MemoryKiB: kp.MemoryKiB, Threads: kp.Threads, Salt: salt}
	dk, err := kdf.derive(passphrase, len(key))
	if err != nil {
		return nil, nil, err
	}
	defer clear(dk)
	mat := make([]byte, afMaterialSize(len(key), stripesLUKS))
	if err := afSplit(mat, key, stripesLUKS, hashByName(areaHash), rand.Reader); err != nil {
		return nil, nil, err
	}
	if err := encryptArea(dk, mat); err != nil {
		return nil, nil, err
	}
	ks := jobj(
		jmember{"type", jstr("luks2")},
		jmember{"key_size", jnum(uint64(len(key)))},
		jmember{"af", jobj(
			jmember{"type", jstr("luks1")},
			jmember{"stripes", jnum(stripesLUKS)},
			jmember{"hash", jstr(areaHash)},
		)},
		jmember{"area", jobj(
			jmember{"type", jstr("raw")},
			jmember{"offset", jstr(strconv.FormatUint(areaOff, 10))},
			jmember{"size", jstr(strconv.FormatUint(areaSize, 10))},
			jmember{"encryption", jstr(dmtable.DefaultCipher)},
			jmember{"key_size", jnum(uint64(len(key)))},
		)},
		jmember{"kdf", jobj(
			jmember{"type", jstr("argon2id")},
			jmember{"time", jnum(uint64(kp.Time))},
			jmember{"memory", jnum(uint64(kp.MemoryKiB))},
			jmember{"cpus", jnum(uint64(kp.Threads))},
			jmember{"salt", jstr(base64.StdEncoding.EncodeToString(salt))},
		)},
	)
	if prio != PriorityNormal {
		ks.set("priority", jnum(uint64(prio)))
	}
	return ks, mat, nil
}

// areaSize is the area cryptsetup allocates for a keyslot of keyLen bytes.
func areaSize(keyLen int) uint64 {
	return (uint64(keyLen)*stripesLUKS + 4095) &^ 4095
}

// findAreaGap finds the first free keyslot area of the given size, as
// cryptsetup's LUKS2_find_area_gap does: first fit from the end of the
// second copy.
func (h *Header) findAreaGap(size uint64) (uint64, bool) {
	type iv struct{ off, end uint64 }
	var used []iv
	for _, k := range h.Keyslots {
		used = append(used, iv{k.Area.Offset, k.Area.Offset + k.Area.Size})
	}
	sort.Slice(used, func(i, j int) bool { return used[i].off < used[j].off })
	off := 2 * h.MetadataSize
	for _, u := range used {
		if off+size <= u.off {
			break
		}
		off = max(off, u.end)
	}
	if off+size > 2*h.MetadataSize+h.KeyslotsSize {
		return 0, false
	}
	return off, true
}

// FormatOptions are the parameters of a new LUKS2 volume. The zero value
// gives cryptsetup 2.6.1's defaults for a file.
type FormatOptions struct {
	KeySize    int    // volume key bytes: 64 (AES-256-XTS, the default) or 32 (AES-128-XTS)
	SectorSize int    // 4096 (default), 2048, 1024 or 512
	UUID       string // "" for a random one
	Label      string // at most 47 bytes
	Subsystem  string // at most 47 bytes
	// DataOffset is where the data starts, in bytes (cryptsetup --offset
	// × 512); 0 means 16 MiB. The keyslots area fills the space before it,
	// up to 128 MiB.
	DataOffset uint64
	// Key is the volume key; nil generates a random one.
	Key []byte
	// DigestIterations of the volume key digest; 0 calibrates them to
	// 125 ms, as cryptsetup does.
	DigestIterations uint32
	Keyslot          KeyslotOptions
}

// ImageSize returns the size of an image that holds dataLen bytes of
// plaintext with these options: the data offset plus dataLen rounded up
// to whole sectors (encrypt --type luks2 IN OUT makes OUT this size).
func (o FormatOptions) ImageSize(dataLen int64) int64 {
	off, ss := int64(o.DataOffset), int64(o.SectorSize)
	if off == 0 {
		off = DefaultDataOffset
	}
	if ss == 0 {
		ss = DefaultSectorSize
	}
	return off + max((dataLen+ss-1)/ss, 1)*ss
}

var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

func newUUID() (string, error) {
	var u [16]byte
	if _, err := io.ReadFull(rand.Reader, u[:]); err != nil {
		return "", err
	}
	u[6] = u[6]&0x0f | 0x40 // version 4
	u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16]), nil
}

// Format writes a new LUKS2 header with one keyslot (keyslot 0, Argon2id)
// for passphrase to f, a device or image of devSize bytes, and returns it
// with the volume key. The data area is not touched: the caller encrypts
// into it (Encrypt) or leaves it as it is. The layout is cryptsetup 2.6.1's
// for a file: two 16 KiB copies, keyslot areas from 32 KiB, data at 16 MiB.
func Format(f ReadWriterAt, devSize int64, passphrase []byte, opt FormatOptions) (*Header, []byte, error) {
	opt = opt.withDefaults()
	if err := opt.Check(); err != nil {
		return nil, nil, err
	}
	const meta = DefaultMetadataSize
	ksSize := min(opt.DataOffset-min(opt.DataOffset, 2*meta), maxKeyslotsSize) &^ 4095
	aSize := areaSize(opt.KeySize)
	switch {
	case devSize < 0 || uint64(devSize) < opt.DataOffset+uint64(opt.SectorSize):
		return nil, nil, fmt.Errorf("a %d-byte device is too small: the data starts at byte %d and needs at least one %d-byte sector", devSize, opt.DataOffset, opt.SectorSize)
	case (uint64(devSize)-opt.DataOffset)%uint64(opt.SectorSize) != 0:
		return nil, nil, fmt.Errorf("the %d bytes after the data offset are not a whole number of %d-byte sectors", uint64(devSize)-opt.DataOffset, opt.SectorSize)
	}
	uuid := opt.UUID
	if uuid == "" {
		var err error
		if uuid, err = newUUID(); err != nil {
			return nil, nil, err
		}
	}
	kp, err := opt.Keyslot.argon2()
	if err != nil {
		return nil, nil, err
	}
	return format(f, devSize, passphrase, opt, uuid, kp, ksSize, aSize)
}

func (o FormatOptions) withDefaults() FormatOptions {
	if o.KeySize == 0 {
		o.KeySize = DefaultKeySize
	}
	if o.SectorSize == 0 {
		o.SectorSize = DefaultSectorSize
	}
	if o.DataOffset == 0 {
		o.DataOffset = DefaultDataOffset
	}
	return o
}

// Check reports what Format would refuse in the options themselves (key
// and sector size, a given key, the data offset, label, subsystem, UUID,
// explicit Argon2 costs), before any device or passphrase is at hand.
func (o FormatOptions) Check() error {
	opt := o.withDefaults()
	switch {
	case opt.KeySize != 32 && opt.KeySize != 64:
		return fmt.Errorf("key size %d bits, want 256 (AES-128-XTS) or 512 (AES-256-XTS)", opt.KeySize*8)
	case opt.SectorSize < 512 || opt.SectorSize > 4096 || opt.SectorSize&(opt.SectorSize-1) != 0:
		return fmt.Errorf("sector size %d, want 512, 1024, 2048 or 4096", opt.SectorSize)
	case opt.Key != nil && len(opt.Key) != opt.KeySize:
		return fmt.Errorf("volume key of %d bytes for a %d-bit key size", len(opt.Key), opt.KeySize*8)
	case opt.DataOffset%uint64(opt.SectorSize) != 0:
		return fmt.Errorf("data offset %d is not a multiple of the %d-byte sector", opt.DataOffset, opt.SectorSize)
	case len(opt.Label) >= labelLen || len(opt.Subsystem) >= labelLen:
		return fmt.Errorf("label and subsystem are at most %d bytes", labelLen-1)
	case strings.ContainsRune(opt.Label, 0) || strings.ContainsRune(opt.Subsystem, 0):
		return fmt.Errorf("label and subsystem cannot contain NUL bytes")
	case opt.UUID != "" && !uuidRE.MatchString(opt.UUID):
		return fmt.Errorf("UUID %q is not of the form xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx in lower-case hex", opt.UUID)
	}
	const meta = DefaultMetadataSize
	ksSize := min(opt.DataOffset-min(opt.DataOffset, 2*meta), maxKeyslotsSize) &^ 4095
	if aSize := areaSize(opt.KeySize); ksSize < aSize {
		return fmt.Errorf("data offset %d leaves no room for a keyslot (at least %d bytes)", opt.DataOffset, 2*meta+aSize)
	}
	if opt.Keyslot.Argon2 != nil {
		return opt.Keyslot.Argon2.Check()
	}
	return nil
}

// format writes the header Format checked the options of.
func format(f ReadWriterAt, devSize int64, passphrase []byte, opt FormatOptions, uuid string, kp Argon2Params, ksSize, aSize uint64) (*Header, []byte, error) {
	const meta = DefaultMetadataSize
	key := opt.Key
	if key == nil {
		key = make([]byte, opt.KeySize)
		if _, err := io.ReadFull(rand.Reader, key); err != nil {
			return nil, nil, err
		}
	} else {
		key = bytes.Clone(key)
	}
	iter := opt.DigestIterations
	if iter == 0 {
		iter = digestIterations(areaHash)
	}
	dsalt := make([]byte, 32)
	if _, err := io.ReadFull(rand.Reader, dsalt); err != nil {
		return nil, nil, err
	}
	dval, err := pbkdf2Key(hashByName(areaHash), key, dsalt, int(iter), hashByName(areaHash)().Size())
	if err != nil {
		return nil, nil, err
	}
	prio := opt.Keyslot.Priority
	if prio == PriorityIgnore {
		prio = PriorityNormal
	}
	ks, mat, err := newKeyslot(key, passphrase, kp, 2*meta, aSize, prio)
	if err != nil {
		return nil, nil, err
	}
	root := jobj(
		jmember{"keyslots", jobj(jmember{"0", ks})},
		jmember{"tokens", jobj()},
		jmember{"segments", jobj(jmember{"0", jobj(
			jmember{"type", jstr("crypt")},
			jmember{"offset", jstr(strconv.FormatUint(opt.DataOffset, 10))},
			jmember{"size", jstr("dynamic")},
			jmember{"iv_tweak", jstr("0")},
			jmember{"encryption", jstr(dmtable.DefaultCipher)},
			jmember{"sector_size", jnum(uint64(opt.SectorSize))},
		)})},
		jmember{"digests", jobj(jmember{"0", jobj(
			jmember{"type", jstr("pbkdf2")},
			jmember{"keyslots", jarr(jstr("0"))},
			jmember{"segments", jarr(jstr("0"))},
			jmember{"hash", jstr(areaHash)},
			jmember{"iterations", jnum(uint64(iter))},
			jmember{"salt", jstr(base64.StdEncoding.EncodeToString(dsalt))},
			jmember{"digest", jstr(base64.StdEncoding.EncodeToString(dval))},
		)})},
		jmember{"config", jobj(
			jmember{"json_size", jstr(strconv.FormatUint(meta-binHeaderSize, 10))},
			jmember{"keyslots_size", jstr(strconv.FormatUint(ksSize, 10))},
		)},
	)
	text := root.marshal()

	// Zero both copies first, so that an interrupted format leaves no old
	// header that would still open; fill the keyslots area with random
	// bytes and zero what lies between it and the data, as cryptsetup does.
	if _, err := f.WriteAt(make([]byte, 2*meta), 0); err != nil {
		return nil, nil, err
	}
	if err := syncFile(f); err != nil {
		return nil, nil, err
	}
	fill := make([]byte, 1<<20)
	for off := uint64(0); off < ksSize; off += uint64(len(fill)) {
		n := min(uint64(len(fill)), ksSize-off)
		if _, err := io.ReadFull(rand.Reader, fill[:n]); err != nil {
			return nil, nil, err
		}
		if off == 0 {
			copy(fill, mat) // keyslot 0's area starts the keyslots area
		}
		if _, err := f.WriteAt(fill[:n], int64(2*meta+off)); err != nil {
			return nil, nil, err
		}
	}
	clear(fill)
	if gap := opt.DataOffset - (2*meta + ksSize); gap > 0 {
		if _, err := f.WriteAt(make([]byte, gap), int64(2*meta+ksSize)); err != nil {
			return nil, nil, err
		}
	}
	if err := syncFile(f); err != nil {
		return nil, nil, err
	}
	p := copyParams{hdrSize: meta, seqID: 1, label: opt.Label, subsystem: opt.Subsystem, uuid: uuid, checksumAlg: "sha256"}
	if err := writeCopies(f, p, text, [2][saltLen2]byte{}, false); err != nil {
		return nil, nil, err
	}
	h, err := ReadHeader(f, devSize)
	if err != nil {
		return nil, nil, fmt.Errorf("reading back the header just written: %w", err)
	}
	if err := h.VerifyKey(key, nil); err != nil {
		return nil, nil, fmt.Errorf("reading back the header just written: %w", err)
	}
	return h, key, nil
}

// writable checks that h is a LUKS2 header this package may rewrite: one
// it decrypts, whose keyslots, digests, segments and tokens are named by
// their numbers' canonical spelling (the edits find them by number) and
// whose data segment has a usable digest (the key to write is checked
// against it).
func (h *Header) writable() error {
	if h.Version != 2 || h.meta == nil {
		return unsupported(FeatureVersion, "1 (writing)", "only LUKS2 headers are written")
	}
	if err := h.Supported(); err != nil {
		return err
	}
	for _, sec := range []string{"keyslots", "digests", "segments", "tokens"} {
		for _, m := range h.meta.get(sec).obj {
			if m.key != nameOf(atoi(m.key)) {
				return unsupported(FeatureNames, fmt.Sprintf("(%s %q)", sec[:len(sec)-1], m.key), "cryptsetup cannot change such a header either")
			}
		}
	}
	switch d := h.digest(h.segmentDigest(h.Segment.ID)); {
	case d == nil:
		return corrupt("header", "no digest for the data segment")
	case d.Err != nil:
		return d.Err
	}
	return nil
}

// AddKeyslot adds a keyslot holding key (the volume key, checked against
// the digest first) for passphrase, like cryptsetup luksAddKey, and returns
// its ID. The key material is written into a free area before the header
// names it, so a crash leaves the old header or the new one, both valid.
func (h *Header) AddKeyslot(f ReadWriterAt, devSize int64, key, passphrase []byte, opt KeyslotOptions) (int, error) {
	if err := h.writable(); err != nil {
		return -1, err
	}
	if err := h.VerifyKey(key, opt.Limits); err != nil {
		return -1, err
	}
	var id int
	if opt.Keyslot == nil {
		for id = 0; id < maxKeyslots2 && h.Keyslot(id) != nil; id++ {
		}
		if id == maxKeyslots2 {
			return -1, fmt.Errorf("all %d keyslots are in use", maxKeyslots2)
		}
	} else if id = *opt.Keyslot; id < 0 || id >= maxKeyslots2 {
		return -1, fmt.Errorf("keyslot %d: LUKS2 has keyslots 0..%d", id, maxKeyslots2-1)
	} else if h.Keyslot(id) != nil {
		return -1, fmt.Errorf("keyslot %d is in use", id)
	}
	aSize := areaSize(len(key))
	off, ok := h.findAreaGap(aSize)
	if !ok {
		return -1, fmt.Errorf("no free %d-byte area left in the %d-byte keyslots area", aSize, h.KeyslotsSize)
	}
	kp, err := opt.argon2()
	if err != nil {
		return -1, err
	}
	prio := opt.Priority
	if prio == PriorityIgnore {
		prio = PriorityNormal
	}
	ks, mat, err := newKeyslot(key, passphrase, kp, off, aSize, prio)
	if err != nil {
		return -1, err
	}
	meta := h.meta.clone()
	meta.get("keyslots").set(strconv.Itoa(id), ks)
	d := meta.get("digests").get(nameOf(h.segmentDigest(h.Segment.ID)))
	d.get("keyslots").arr = append(d.get("keyslots").arr, jstr(strconv.Itoa(id)))
	if _, err := h.current(f, devSize); err != nil {
		return -1, err
	}
	if err := writeArea(f, mat, off); err != nil {
		return -1, err
	}
	if err := h.commit(f, devSize, meta); err != nil {
		return -1, err
	}
	return id, nil
}

// RemoveOptions are the options of RemoveKeyslot.
type RemoveOptions struct {
	// AllowLast removes the last keyslot that opens the data segment too,
	// leaving a volume nobody can unlock without a header backup.
	AllowLast bool
}

// RemoveKeyslot removes a keyslot, like cryptsetup luksKillSlot: its area
// is overwritten with random bytes, then the header stops naming it. This
// is cryptsetup's order, chosen so that a crash never leaves the key
// material of a removed keyslot on the disk; a crash in between leaves a
// valid header that still lists a keyslot that no longer opens, and every
// other keyslot opens as before.
func (h *Header) RemoveKeyslot(f ReadWriterAt, devSize int64, id int, opt RemoveOptions) error {
	if err := h.writable(); err != nil {
		return err
	}
	k := h.Keyslot(id)
	if k == nil {
		return fmt.Errorf("keyslot %d is not active", id)
	}
	d := h.digest(h.segmentDigest(h.Segment.ID))
	if containsInt(d.Keyslots, id) && len(d.Keyslots) == 1 && !opt.AllowLast {
		return fmt.Errorf("keyslot %d: %w", id, ErrLastKeyslot)
	}
	name := strconv.Itoa(id)
	meta := h.meta.clone()
	meta.get("keyslots").del(name)
	for _, sec := range []string{"digests", "tokens"} {
		for _, m := range meta.get(sec).obj {
			ks := m.val.get("keyslots")
			out := ks.arr[:0:0]
			for _, e := range ks.arr {
				if e.s != name {
					out = append(out, e)
				}
			}
			ks.arr = out
		}
	}
	// Like cryptsetup (LUKS2_digests_erase_unused), a digest left with no
	// keyslot and no segment goes too.
	digests := meta.get("digests")
	for i := 0; i < len(digests.obj); i++ {
		d := digests.obj[i].val
		if len(d.get("keyslots").arr) == 0 && len(d.get("segments").arr) == 0 {
			digests.obj = append(digests.obj[:i], digests.obj[i+1:]...)
			i--
		}
	}
	if _, err := h.current(f, devSize); err != nil {
		return err
	}
	if err := wipeArea(f, k.Area); err != nil {
		return err
	}
	return h.commit(f, devSize, meta)
}

// ChangeKeyslot replaces the passphrase of keyslot id (cryptsetup
// luksChangeKey), keeping its ID and priority: the new key material goes
// to a free area, the header then points the keyslot at it, and the old
// area is wiped. A crash leaves the old passphrase or the new one working.
// key is the volume key (from Unlock with the old passphrase).
func (h *Header) ChangeKeyslot(f ReadWriterAt, devSize int64, id int, key, passphrase []byte, opt KeyslotOptions) error {
	if err := h.writable(); err != nil {
		return err
	}
	old := h.Keyslot(id)
	if old == nil {
		return fmt.Errorf("keyslot %d is not active", id)
	}
	if old.Type != "luks2" {
		return unsupportedSlot(id, FeatureKeyslotType, fmt.Sprintf("%q", old.Type), "")
	}
	if err := h.VerifyKey(key, opt.Limits); err != nil {
		return err
	}
	if d := h.digest(h.segmentDigest(h.Segment.ID)); !containsInt(d.Keyslots, id) {
		return fmt.Errorf("keyslot %d does not hold the volume key", id)
	}
	aSize := areaSize(len(key))
	off, ok := h.findAreaGap(aSize)
	if !ok {
		return fmt.Errorf("no free %d-byte area left for a crash-safe change: remove a keyslot, or add a new one and remove this one", aSize)
	}
	kp, err := opt.argon2()
	if err != nil {
		return err
	}
	ks, mat, err := newKeyslot(key, passphrase, kp, off, aSize, old.Priority)
	if err != nil {
		return err
	}
	meta := h.meta.clone()
	oldJSON := meta.get("keyslots").get(strconv.Itoa(id))
	// Keep fields this package does not write (e.g. from a newer
	// cryptsetup), replacing only what describes the key material.
	for _, field := range []string{"type", "key_size", "af", "area", "kdf"} {
		oldJSON.set(field, ks.get(field))
	}
	if _, err := h.current(f, devSize); err != nil {
		return err
	}
	if err := writeArea(f, mat, off); err != nil {
		return err
	}
	oldArea := old.Area
	if err := h.commit(f, devSize, meta); err != nil {
		return err
	}
	return wipeArea(f, oldArea)
}

// Backup writes a header backup, as cryptsetup luksHeaderBackup does: the
// first HeaderSize bytes of the header device (LUKS2: both copies and the
// keyslots area; LUKS1: the header and all key material, with the unused
// bytes after the header zeroed), padded to a multiple of 4096. It checks
// that what it copies is still this header.
func (h *Header) Backup(hdr io.ReaderAt, w io.Writer) (int64, error) {
	n := (h.HeaderSize + 4095) &^ 4095
	b := make([]byte, n)
	if err := readFull(hdr, b[:h.HeaderSize], 0); err != nil {
		return 0, err
	}
	again, err := ReadHeader(bytes.NewReader(b), int64(n))
	if err != nil || again.UUID != h.UUID || again.SeqID != h.SeqID || again.Version != h.Version {
		return 0, ErrHeaderChanged
	}
	if h.Version == 1 && binary.BigEndian.Uint32(b[luks1SlotBase+40:]) == 8 {
		clear(b[luks1HeaderSize:4096])
	}
	m, err := w.Write(b)
	return int64(m), err
}

// ErrUUIDMismatch refuses to restore a backup over a volume with another UUID.
var ErrUUIDMismatch = errors.New("the backup is of another volume (UUID differs)")

// RestoreOptions are the options of Restore.
type RestoreOptions struct {
	// NoHeader allows restoring onto a device whose header cannot be read
	// at all (both copies damaged), where the backup's UUID cannot be
	// compared with anything.
	NoHeader bool
}

// Restore writes a LUKS2 header backup (from Backup or cryptsetup
// luksHeaderBackup) back onto f, a device of devSize bytes, and returns the
// restored header. It refuses a backup of another UUID, of another header
// and keyslots size or data offset, or with mandatory requirements.
//
// The keyslots area is written first, then both copies, with a sequence
// number above the one on the device so the restored header wins as soon
// as one copy is whole. A crash while the keyslots area is written leaves
// the old header over partly restored key material: keyslots changed since
// the backup may not open until Restore is run again.
func Restore(f ReadWriterAt, devSize int64, backup io.ReaderAt, backupSize int64, opt RestoreOptions) (*Header, error) {
	b, err := ReadHeader(backup, backupSize)
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	if b.Version != 2 {
		return nil, unsupported(FeatureVersion, "1 (restore)", "only LUKS2 backups are restored")
	}
	if len(b.Requirements) > 0 {
		return nil, fmt.Errorf("backup: %w", b.Supported())
	}
	seq := b.SeqID
	cur, cerr := ReadHeader(f, devSize)
	switch {
	case cerr != nil && !opt.NoHeader:
		return nil, fmt.Errorf("the device has no readable LUKS header to check the backup against: %w", cerr)
	case cerr == nil && cur.UUID != b.UUID:
		return nil, fmt.Errorf("%w: device %s, backup %s", ErrUUIDMismatch, cur.UUID, b.UUID)
	case cerr == nil && (cur.Version != 2 || cur.HeaderSize != b.HeaderSize || cur.MetadataSize != b.MetadataSize):
		return nil, fmt.Errorf("the device's header and keyslots area differ in size from the backup's")
	case cerr == nil && cur.Segment.Offset != b.Segment.Offset:
		return nil, fmt.Errorf("the data offset differs: device %d, backup %d", cur.Segment.Offset, b.Segment.Offset)
	case cerr == nil:
		seq = max(seq, cur.SeqID)
	}
	if uint64(devSize) < b.HeaderSize {
		return nil, fmt.Errorf("a %d-byte device cannot hold the %d-byte header", devSize, b.HeaderSize)
	}
	p := copyParams{
		hdrSize: b.MetadataSize, seqID: seq + 1, label: b.Label,
		subsystem: b.Subsystem, uuid: b.UUID, checksumAlg: b.checksumAlg,
	}
	// The copies must be writable before anything is written: a restore
	// that stopped after the keyslots area would leave the old header over
	// the backup's key material.
	text := b.meta.marshal()
	if _, err := serializeCopy(p, text, false, b.salts[0]); err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	area := make([]byte, b.KeyslotsSize)
	if err := readFull(backup, area, int64(2*b.MetadataSize)); err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	if err := writeArea(f, area, 2*b.MetadataSize); err != nil {
		return nil, err
	}
	// As in commit: the copy that may be the only good one is written last.
	primaryFirst := cerr != nil || cur.Copies[1].State == CopyOK
	if err := writeCopies(f, p, text, b.salts, primaryFirst); err != nil {
		return nil, err
	}
	return ReadHeader(f, devSize)
}

// Rollback says how restoring backup over cur (the header on the device,
// of the same volume) changes its keyslots: back lists the keyslots whose
// passphrase the backup brings back (removed or changed since it was
// taken), gone those it drops (added since), each in order. A keyslot is
// the same where its KDF salt is: a new passphrase always gets a new salt.
func Rollback(cur, backup *Header) (back, gone []int) {
	salts := map[int][]byte{}
	for _, k := range cur.Keyslots {
		salts[k.ID] = k.KDF.Salt
	}
	for _, k := range backup.Keyslots {
		if salt, ok := salts[k.ID]; !ok || !bytes.Equal(salt, k.KDF.Salt) {
			back = append(back, k.ID)
		}
		delete(salts, k.ID)
	}
	for id := range salts {
		gone = append(gone, id)
	}
	slices.Sort(back)
	slices.Sort(gone)
	return back, gone
}

// encryptArea encrypts keyslot material in place, the inverse of decryptArea.
func encryptArea(key, mat []byte) error {
	c, err := xts.NewCipher(key)
	if err != nil {
		return err
	}
	defer c.Wipe()
	c.EncryptSectors(mat, mat, 512, 0, 1)
	return nil
}
