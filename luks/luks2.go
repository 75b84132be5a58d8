package luks

import (
	"bytes"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"math"
	"sort"
	"strconv"
)

// LUKS2 binary header (LUKS2 On-Disk Format Specification, section 2).
// Each copy is a 4096-byte binary header followed by the JSON area; the
// secondary copy starts right after the primary, at hdr_size.
const (
	binHeaderSize = 4096
	saltLen2      = 64
	checksumLen   = 64

	offMagic     = 0
	offVersion   = 6
	offHdrSize   = 8
	offSeqID     = 16
	offLabel     = 24
	offCsumAlg   = 72
	offSalt      = 104
	offUUID      = 168
	offSubsystem = 208
	offHdrOffset = 256
	offChecksum  = 448

	labelLen   = 48
	csumAlgLen = 32
	uuidLen    = 40

	maxKeyslots2     = 32
	maxSegments2     = 32
	maxTokens2       = 32
	maxKeyslotsSize  = 128 << 20 // LUKS2_MAX_KEYSLOTS_SIZE
	maxKeyBytes      = 512       // bound on key_size fields before anything else looks at them
	keyslotSaltLen   = 32        // cryptsetup refuses any other keyslot salt length
	minDigestLen     = 16
	maxDigestSaltLen = 1024
)

// metadataSizes are the sizes a LUKS2 header copy may have, which are
// also the offsets at which the secondary copy may start (LUKS2_HDR2_OFFSETS).
var metadataSizes = []uint64{
	16 << 10, 32 << 10, 64 << 10, 128 << 10, 256 << 10,
	512 << 10, 1 << 20, 2 << 20, 4 << 20,
}

func validMetadataSize(n uint64) bool {
	for _, s := range metadataSizes {
		if n == s {
			return true
		}
	}
	return false
}

// copyData is one header copy that passed its checksum and whose
// metadata parsed.
type copyData struct {
	h     *Header
	seqID uint64
	salt  [saltLen2]byte
}

// checksumHash returns the hash of a header checksum algorithm: any hash
// this package has whose digest fits the 64-byte checksum field (cryptsetup
// takes any its crypto backend has).
func checksumHash(alg string) func() hash.Hash {
	if h := hashByName(alg); h != nil && h().Size() <= checksumLen {
		return h
	}
	return nil
}

// readCopy reads the header copy at off. Only magic, version, offset and
// size are looked at before the checksum over the whole copy is verified.
func readCopy(r io.ReaderAt, devSize, off uint64, secondary bool) (*copyData, error) {
	name := "primary header"
	want := magic1
	if secondary {
		name, want = "secondary header", magic2
	}
	if off >= devSize {
		e := corrupt(name, "offset %d is beyond the %d-byte device", off, devSize)
		e.cause = errNoMagic
		return nil, e
	}
	bin := make([]byte, min(binHeaderSize, devSize-off))
	if err := readFull(r, bin, int64(off)); err != nil {
		return nil, err
	}
	if len(bin) < 6 || !bytes.Equal(bin[offMagic:offMagic+6], want) {
		e := corrupt(name, "no %s magic at offset %d", want[:4], off)
		e.cause = errNoMagic
		return nil, e
	}
	if len(bin) < binHeaderSize {
		return nil, corrupt(name, "the %d-byte device ends inside the binary header", devSize)
	}
	if v := binary.BigEndian.Uint16(bin[offVersion:]); v != 2 {
		return nil, fmt.Errorf("%s: %w", name, unsupported(FeatureVersion, strconv.Itoa(int(v)), "want 1 or 2"))
	}
	if o := binary.BigEndian.Uint64(bin[offHdrOffset:]); o != off {
		return nil, corrupt(name, "says it is at offset %d but was found at %d", o, off)
	}
	size := binary.BigEndian.Uint64(bin[offHdrSize:])
	if !validMetadataSize(size) {
		return nil, corrupt(name, "header size %d is not one LUKS2 allows (16 KiB .. 4 MiB, a power of two)", size)
	}
	if secondary && size != off {
		return nil, corrupt(name, "header size %d does not match its offset %d", size, off)
	}
	if off+size > devSize {
		return nil, corrupt(name, "%d bytes at offset %d run past the %d-byte device", size, off, devSize)
	}
	alg := cstring(bin[offCsumAlg : offCsumAlg+csumAlgLen])
	newHash := checksumHash(alg)
	switch {
	case newHash == nil && cryptsetupHash(alg):
		return nil, fmt.Errorf("%s: %w", name, &UnsupportedError{Feature: FeatureChecksum, Value: fmt.Sprintf("%q", alg),
			Keyslot: -1, Hint: "sha256, or another of " + supportedHashes, CryptsetupOpens: true})
	case newHash == nil:
		return nil, corrupt(name, "unknown checksum algorithm %q", alg)
	}
	area := make([]byte, size-binHeaderSize)
	if err := readFull(r, area, int64(off+binHeaderSize)); err != nil {
		return nil, err
	}
	stored := append([]byte(nil), bin[offChecksum:offChecksum+checksumLen]...)
	sum := headerChecksum(newHash, bin, area)
	if subtle.ConstantTimeCompare(sum, stored[:len(sum)]) != 1 || !allZero(stored[len(sum):]) {
		return nil, corrupt(name, "checksum mismatch")
	}

	// Authenticated (as far as a checksum goes): now interpret it.
	h, err := parseMetadata(area, size, devSize)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	h.SeqID = binary.BigEndian.Uint64(bin[offSeqID:])
	h.Label = cstring(bin[offLabel : offLabel+labelLen])
	h.Subsystem = cstring(bin[offSubsystem : offSubsystem+labelLen])
	h.UUID = cstring(bin[offUUID : offUUID+uuidLen])
	h.checksumAlg = alg
	c := &copyData{h: h, seqID: h.SeqID}
	copy(c.salt[:], bin[offSalt:offSalt+saltLen2])
	return c, nil
}

// headerChecksum hashes the binary header with its checksum field zeroed,
// then the whole JSON area.
func headerChecksum(newHash func() hash.Hash, bin, area []byte) []byte {
	var zero [checksumLen]byte
	h := newHash()
	h.Write(bin[:offChecksum])
	h.Write(zero[:])
	h.Write(bin[offChecksum+checksumLen:])
	h.Write(area)
	return h.Sum(nil)
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// readLUKS2 finds both copies: the secondary at the primary's size when
// the primary is good, else at each offset the format allows, as
// cryptsetup does. The copy with the higher seqid wins; on a tie, the
// primary.
func readLUKS2(r io.ReaderAt, devSize uint64) (*Header, error) {
	prim, perr := readCopy(r, devSize, 0, false)
	var sec *copyData
	var serr error
	secOff := uint64(0)
	if perr == nil {
		secOff = prim.h.MetadataSize
		sec, serr = readCopy(r, devSize, secOff, true)
	} else {
		e := corrupt("secondary header", "not found at any offset LUKS2 allows")
		e.cause = errNoMagic
		serr = e
		for _, off := range metadataSizes {
			if off >= devSize {
				break
			}
			c, err := readCopy(r, devSize, off, true)
			if err == nil {
				sec, serr, secOff = c, nil, off
				break
			}
			// Remember the most telling failure: a SKUL header that
			// failed its checks says more than empty space.
			if !isNoMagic(err) {
				serr, secOff = err, off
			}
		}
	}
	if prim == nil && sec == nil {
		return nil, noValidCopy(perr, serr)
	}
	copies := []Copy{
		{Name: "primary", Offset: 0, State: CopyDamaged, Err: perr},
		{Name: "secondary", Offset: secOff, State: CopyDamaged, Err: serr},
	}
	if perr == nil {
		copies[0] = Copy{Name: "primary", Offset: 0, SeqID: prim.seqID, State: CopyOK}
	} else if isNoMagic(perr) {
		copies[0].State = CopyMissing
	}
	if serr == nil {
		copies[1] = Copy{Name: "secondary", Offset: secOff, SeqID: sec.seqID, State: CopyOK}
	} else if isNoMagic(serr) {
		copies[1].State = CopyMissing
	}
	use := prim
	switch {
	case prim == nil:
		use = sec
		copies[1].Used = true
	case sec == nil:
		copies[0].Used = true
	case sec.seqID > prim.seqID:
		use = sec
		copies[1].Used = true
		copies[0].State = CopyStale
	default:
		copies[0].Used = true
		if sec.seqID < prim.seqID {
			copies[1].State = CopyStale
		}
	}
	h := use.h
	h.Copies = copies
	if prim != nil {
		h.salts[0] = prim.salt
	}
	if sec != nil {
		h.salts[1] = sec.salt
	}
	return h, nil
}

func isNoMagic(err error) bool { return errors.Is(err, errNoMagic) }

// noValidCopy is the error when neither copy reads, of one class only, so
// that a caller can say what is wrong: ErrNotLUKS when neither is there; a
// copy's *UnsupportedError when a copy is sound but asks for what this
// package does not do (a LUKS version, a checksum algorithm); a copy's
// I/O error; else a *CorruptError naming both copies' problems (a damaged
// header, which only a backup brings back).
func noValidCopy(perr, serr error) error {
	if isNoMagic(perr) && isNoMagic(serr) {
		return ErrNotLUKS
	}
	for _, err := range []error{perr, serr} {
		if errors.Is(err, ErrUnsupported) {
			return err
		}
	}
	for _, err := range []error{perr, serr} {
		if !errors.Is(err, ErrCorrupt) {
			return err // reading failed
		}
	}
	return corrupt("LUKS2 header", "no valid header copy: %v; %v", perr, serr)
}

// parseMetadata reads a JSON area as cryptsetup does: the JSON text from
// its first byte, which must be '{', up to its first NUL, with only NULs
// after it; parsed as json-c parses it and validated by cryptsetup's rules
// (validateMetadata); then the header it describes, which the device
// (devSize bytes) must hold whole: both copies and the keyslots area.
func parseMetadata(area []byte, hdrSize, devSize uint64) (*Header, error) {
	const where = "LUKS2 metadata"
	if len(area) == 0 || area[0] != '{' {
		return nil, corrupt(where, "JSON area does not start with '{'")
	}
	n := bytes.IndexByte(area, 0)
	if n < 0 {
		return nil, corrupt(where, "JSON area is not NUL-terminated")
	}
	if !allZero(area[n:]) {
		return nil, corrupt(where, "bytes after the JSON text are not all zero")
	}
	root, err := parseJSON(area[:n])
	if err != nil {
		return nil, corrupt(where, "%v", err)
	}
	if err := validateMetadata(root, hdrSize-binHeaderSize); err != nil {
		return nil, corrupt(where, "%v", err)
	}
	h := metadataHeader(root, hdrSize)
	if h.HeaderSize > devSize {
		return nil, corrupt("LUKS2 header", "the %d-byte device is shorter than the two header copies and the keyslots area (%d bytes)", devSize, h.HeaderSize)
	}
	h.meta = root
	h.checkSlots()
	return h, nil
}

// metadataHeader extracts the header a validated JSON tree describes.
// Objects are numbered as cryptsetup numbers them (atoi of their names).
// What cryptsetup reads only when it uses a keyslot or digest (KDF salts,
// digest values) is checked here too, but a problem there makes only that
// keyslot or digest unusable (Keyslot.Err, Digest.Err), as in cryptsetup.
func metadataHeader(root *jvalue, hdrSize uint64) *Header {
	h := &Header{Version: 2, MetadataSize: hdrSize}
	cfg := root.get("config")
	_, h.KeyslotsSize, _ = configSizes(cfg)
	h.HeaderSize = 2*hdrSize + h.KeyslotsSize
	for _, f := range cfg.get("flags").elems() {
		h.Flags = append(h.Flags, f.cs())
	}
	h.Requirements = mandatoryRequirements(root)

	// The data segment is cryptsetup's default segment: the reencryption
	// target (backup-final) while one is in progress, else segment 0.
	segs := root.get("segments")
	def := "0"
	for _, m := range segs.obj {
		if hasFlag(m.val, "backup-final") {
			def = nameOf(atoi(m.key))
			break
		}
	}
	h.Segments = len(segs.obj)
	for _, m := range segs.obj {
		s := segmentOf(m)
		if m.key == def {
			h.Segment = s
		} else {
			h.OtherSegments = append(h.OtherSegments, s)
		}
	}
	sort.SliceStable(h.OtherSegments, func(i, j int) bool { return h.OtherSegments[i].ID < h.OtherSegments[j].ID })

	digests := root.get("digests")
	for _, m := range digests.obj {
		h.Digests = append(h.Digests, digestOf(m))
	}
	// LUKS2_digest_by_keyslot: a keyslot's digest is the first that names
	// it.
	firstDigest := map[string]string{}
	for _, d := range digests.obj {
		for _, e := range d.val.get("keyslots").elems() {
			if _, ok := firstDigest[e.stringValue()]; !ok {
				firstDigest[e.stringValue()] = d.key
			}
		}
	}
	byName := index(digests)
	for pos, m := range root.get("keyslots").obj {
		k := keyslotOf(pos, m)
		if d, ok := firstDigest[nameOf(k.ID)]; ok {
			k.Digest = atoi(d)
			dv := byName[nameOf(k.Digest)]
			k.Unbound = dv != nil && len(dv.get("segments").elems()) == 0
		}
		h.Keyslots = append(h.Keyslots, k)
	}
	sort.SliceStable(h.Keyslots, func(i, j int) bool { return h.Keyslots[i].ID < h.Keyslots[j].ID })
	sort.SliceStable(h.Digests, func(i, j int) bool { return h.Digests[i].ID < h.Digests[j].ID })
	for _, m := range root.get("tokens").obj {
		t := Token{ID: atoi(m.key), Type: m.val.get("type").cs(), Runnable: TokenRunnable(m.val.get("type").cs())}
		for _, e := range m.val.get("keyslots").elems() {
			t.Keyslots = append(t.Keyslots, atoi(e.cs()))
		}
		h.Tokens = append(h.Tokens, t)
	}
	sort.SliceStable(h.Tokens, func(i, j int) bool { return h.Tokens[i].ID < h.Tokens[j].ID })

	h.Cipher = h.Segment.Cipher
	h.KeySize = volumeKeySize(root, nameOf(h.Segment.ID))
	h.indexDigests()
	return h
}

// volumeKeySize is cryptsetup's LUKS2_get_volume_key_size: the key_size of
// the first keyslot of the first digest of the segment; 0 if there is none
// (no keyslot holds the volume key any more).
func volumeKeySize(root *jvalue, seg string) int {
	for _, d := range root.get("digests").obj {
		if !containsName(d.val.get("segments"), seg) || len(d.val.get("keyslots").elems()) == 0 {
			continue
		}
		k := root.get("keyslots").get(d.val.get("keyslots").arr[0].cs())
		return int(uint32(k.get("key_size").int64Value()))
	}
	return 0
}

// containsName reports whether an array of names holds name (LUKS2_array_jobj).
func containsName(arr *jvalue, name string) bool {
	for _, e := range arr.elems() {
		if e.stringValue() == name {
			return true
		}
	}
	return false
}

func segmentOf(m jmember) Segment {
	v := m.val
	s := Segment{ID: atoi(m.key), Type: v.get("type").cs()}
	s.Offset, _ = strToUint64(v.get("offset").s)
	if size := v.get("size"); size.cs() == "dynamic" {
		s.Dynamic = true
	} else {
		s.Size, _ = strToUint64(size.s)
	}
	for _, f := range v.get("flags").elems() {
		s.Flags = append(s.Flags, f.cs())
	}
	if s.Type != "crypt" {
		return s
	}
	s.IVTweak, _ = strToUint64(v.get("iv_tweak").s)
	s.Cipher = v.get("encryption").cs()
	s.SectorSize = int(v.get("sector_size").int64Value())
	if in := v.get("integrity"); in != nil {
		s.Integrity = in.get("type").cs()
	}
	return s
}

func digestOf(m jmember) Digest {
	v := m.val
	d := Digest{ID: atoi(m.key), name: m.key, Type: v.get("type").cs()}
	for _, e := range v.get("keyslots").elems() {
		d.Keyslots = append(d.Keyslots, atoi(e.cs()))
	}
	for _, e := range v.get("segments").elems() {
		d.Segments = append(d.Segments, atoi(e.cs()))
	}
	where := fmt.Sprintf("digest %d", d.ID)
	if d.Type != "pbkdf2" {
		d.Err = &UnsupportedError{Feature: FeatureDigest, Value: fmt.Sprintf("%q", d.Type), Keyslot: -1, Hint: "digest " + nameOf(d.ID) + "; only pbkdf2 digests exist"}
		return d
	}
	// In the order cryptsetup's PBKDF2_digest_verify reads them.
	hash, iter := v.get("hash"), v.get("iterations")
	if hash == nil || iter == nil {
		d.Err = corrupt(where, "no hash or iterations")
		return d
	}
	d.Hash = hash.stringValue()
	d.Iterations = uint32(iter.int64Value()) // an unsigned int in cryptsetup
	var err error
	if d.Salt, err = base64Field(v, "salt"); err != nil {
		d.Err = corrupt(where, "salt: %v", err)
		return d
	}
	if d.Value, err = base64Field(v, "digest"); err != nil {
		d.Err = corrupt(where, "digest: %v", err)
		return d
	}
	// cryptsetup 2.6.1 takes any key for a digest whose salt or value has
	// the wrong length (it returns success on that path); such a digest
	// checks nothing, so it is refused here.
	hsize := 0
	if nh := hashByName(d.Hash); nh != nil {
		hsize = nh().Size()
	}
	switch n := len(d.Value); {
	case len(d.Salt) != keyslotSaltLen:
		d.Err = corrupt(where, "%d-byte salt, want %d", len(d.Salt), keyslotSaltLen)
	case hashByName(d.Hash) == nil:
		d.Err = &UnsupportedError{Feature: FeatureHash, Value: d.Hash + " (digest)", Keyslot: -1, Hint: supportedHashes,
			CryptsetupOpens: cryptsetupHash(d.Hash)}
	case n < luks1DigestSize || n > 64 || n != luks1DigestSize && n != hsize:
		d.Err = corrupt(where, "%d-byte digest, want %d or %d (%s)", n, luks1DigestSize, hsize, d.Hash)
	case d.Iterations == 0:
		d.Err = corrupt(where, "0 iterations")
	}
	return d
}

// base64Field decodes a base64 string member (at most 1 KiB decoded).
func base64Field(v *jvalue, key string) ([]byte, error) {
	f := v.get(key)
	if f == nil {
		return nil, errJSONMissing
	}
	s := f.stringValue()
	if len(s) > base64.StdEncoding.EncodedLen(1024) {
		return nil, fmt.Errorf("longer than 1 KiB")
	}
	return base64.StdEncoding.Strict().DecodeString(s)
}

var errJSONMissing = errors.New("missing")

// keyslotOf extracts a validated keyslot object (its digest is the
// caller's to find).
func keyslotOf(pos int, m jmember) Keyslot {
	v := m.val
	k := Keyslot{ID: atoi(m.key), name: m.key, pos: pos, Type: v.get("type").cs(), Priority: PriorityNormal, Digest: -1}
	k.KeySize = int(uint32(v.get("key_size").int64Value()))
	if p := v.get("priority"); p != nil {
		k.Priority = Priority(p.intValue())
	}
	area := v.get("area")
	k.Area.Type = area.get("type").cs()
	k.Area.Offset, _ = strToUint64(area.get("offset").s)
	k.Area.Size, _ = strToUint64(area.get("size").s)
	if k.Type != "luks2" {
		return k // listed; slotProblem says why it cannot be used
	}
	// Validated: a raw area, a luks1 AF, a kdf object.
	k.Area.Cipher = area.get("encryption").cs()
	k.Area.KeySize = int(area.get("key_size").intValue())
	af := v.get("af")
	k.AF = AF{Type: af.get("type").cs(), Hash: af.get("hash").cs(), Stripes: int(af.get("stripes").intValue())}
	kdf := v.get("kdf")
	k.KDF.Type = kdf.get("type").cs()
	where := fmt.Sprintf("keyslot %d", k.ID)
	switch k.KDF.Type {
	case "pbkdf2":
		k.KDF.Hash = kdf.get("hash").cs()
		k.KDF.Iterations = uint32(kdf.get("iterations").intValue())
	case "argon2i", "argon2id":
		k.KDF.Time = uint32(kdf.get("time").intValue())
		k.KDF.MemoryKiB = uint32(kdf.get("memory").intValue())
		k.KDF.Threads = uint32(kdf.get("cpus").intValue())
	default:
		return k // an unknown KDF: slotProblem refuses the keyslot
	}
	salt, err := base64Field(kdf, "salt")
	switch {
	case err != nil:
		k.useErr = corrupt(where, "KDF salt: %v", err)
	case len(salt) != keyslotSaltLen:
		k.useErr = corrupt(where, "%d-byte KDF salt, want %d", len(salt), keyslotSaltLen)
	}
	k.KDF.Salt = salt
	// json_object_get_int of a negative or huge number, as cryptsetup
	// reads these, gives a count no KDF takes.
	for _, f := range []string{"iterations", "time", "memory", "cpus"} {
		if n := kdf.get(f); n != nil && (n.int64Value() < 0 || n.int64Value() > math.MaxInt32) && k.useErr == nil {
			k.useErr = corrupt(where, "KDF %s %s out of range", f, n.s)
		}
	}
	return k
}
