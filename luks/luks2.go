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

func checksumHash(alg string) func() hash.Hash {
	switch alg {
	case "sha1", "sha256", "sha512", "sha384", "sha224":
		return hashByName(alg)
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
	if newHash == nil {
		return nil, unsupported(FeatureChecksum, fmt.Sprintf("%q", alg), "sha256 (or sha1, sha224, sha384, sha512)")
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
		if isNoMagic(perr) && isNoMagic(serr) {
			return nil, ErrNotLUKS
		}
		return nil, fmt.Errorf("no valid LUKS2 header copy: %w; %w", perr, serr)
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

// parseMetadata checks the JSON area as cryptsetup's LUKS2_hdr_validate
// does, with every number bounded, and extracts the header it describes.
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
	h, err := metadataHeader(root, hdrSize, devSize)
	if err != nil {
		return nil, corrupt(where, "%v", err)
	}
	h.meta = root
	h.checkSlots()
	return h, nil
}

// canonicalID parses an object key that names a keyslot, segment, digest
// or token: a decimal number without leading zeros, below max.
func canonicalID(key string, max int) (int, bool) {
	n, err := strconv.Atoi(key)
	if err != nil || n < 0 || n >= max || strconv.Itoa(n) != key {
		return 0, false
	}
	return n, true
}

func b64(v *jvalue, path, key string, minLen, maxLen int) ([]byte, error) {
	s, err := jgetString(v, path, key)
	if err != nil {
		return nil, err
	}
	if len(s) > base64.StdEncoding.EncodedLen(maxLen) {
		return nil, fmt.Errorf("%s.%s: longer than %d bytes", path, key, maxLen)
	}
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("%s.%s: %v", path, key, err)
	}
	if len(b) < minLen || len(b) > maxLen {
		return nil, fmt.Errorf("%s.%s: %d bytes, want %d..%d", path, key, len(b), minLen, maxLen)
	}
	return b, nil
}

func idList(v *jvalue, path, key string, exists map[int]bool, max int) ([]int, error) {
	ss, err := jgetStrings(v, path, key)
	if err != nil {
		return nil, err
	}
	out := make([]int, 0, len(ss))
	for _, s := range ss {
		id, ok := canonicalID(s, max)
		if !ok || !exists[id] {
			return nil, fmt.Errorf("%s.%s: %q names nothing that exists", path, key, s)
		}
		out = append(out, id)
	}
	return out, nil
}

func metadataHeader(root *jvalue, hdrSize, devSize uint64) (*Header, error) {
	if root.kind != jObject {
		return nil, fmt.Errorf("top level is a %s, want object", root.kind)
	}
	sections := map[string]*jvalue{}
	for _, s := range []string{"keyslots", "tokens", "segments", "digests", "config"} {
		v, err := jfield(root, "", s, jObject)
		if err != nil {
			return nil, err
		}
		sections[s] = v
	}
	h := &Header{Version: 2, MetadataSize: hdrSize}

	// config first: it bounds the keyslots area.
	cfg := sections["config"]
	jsonSize, err := jgetDecimal(cfg, "config", "json_size")
	if err != nil {
		return nil, err
	}
	if jsonSize != hdrSize-binHeaderSize {
		return nil, fmt.Errorf("config.json_size %d does not match the binary header's %d-byte JSON area", jsonSize, hdrSize-binHeaderSize)
	}
	ksSize, err := jgetDecimal(cfg, "config", "keyslots_size")
	if err != nil {
		return nil, err
	}
	if ksSize%4096 != 0 || ksSize > maxKeyslotsSize {
		return nil, fmt.Errorf("config.keyslots_size %d is not a multiple of 4096 up to 128 MiB", ksSize)
	}
	h.KeyslotsSize = ksSize
	h.HeaderSize = 2*hdrSize + ksSize
	if h.HeaderSize > devSize {
		return nil, fmt.Errorf("header and keyslots area (%d bytes) do not fit the %d-byte device", h.HeaderSize, devSize)
	}
	if cfg.get("flags") != nil {
		if h.Flags, err = jgetStrings(cfg, "config", "flags"); err != nil {
			return nil, err
		}
	}
	if req := cfg.get("requirements"); req != nil {
		if req.kind != jObject {
			return nil, fmt.Errorf("config.requirements: %s, want object", req.kind)
		}
		if req.get("mandatory") != nil {
			if h.Requirements, err = jgetStrings(req, "config.requirements", "mandatory"); err != nil {
				return nil, err
			}
		}
	}

	// Keyslots: structure, and every area inside the keyslots area with no
	// two overlapping (validate_intervals).
	slots := map[int]bool{}
	type interval struct {
		id       int
		off, end uint64
	}
	var areas []interval
	for _, m := range sections["keyslots"].obj {
		id, ok := canonicalID(m.key, maxKeyslots2)
		if !ok {
			return nil, fmt.Errorf("keyslot name %q is not a number below %d", m.key, maxKeyslots2)
		}
		k, err := parseKeyslot(id, m.val)
		if err != nil {
			return nil, err
		}
		if k.Area.Size == 0 || k.Area.Offset < 2*hdrSize || k.Area.Offset > h.HeaderSize ||
			k.Area.Size > h.HeaderSize-k.Area.Offset {
			return nil, fmt.Errorf("keyslot %d: area [%d, +%d) is not inside the keyslots area [%d, %d)", id, k.Area.Offset, k.Area.Size, 2*hdrSize, h.HeaderSize)
		}
		areas = append(areas, interval{id, k.Area.Offset, k.Area.Offset + k.Area.Size})
		slots[id] = true
		h.Keyslots = append(h.Keyslots, k)
	}
	sort.Slice(areas, func(i, j int) bool { return areas[i].off < areas[j].off })
	for i := 1; i < len(areas); i++ {
		if areas[i].off < areas[i-1].end {
			return nil, fmt.Errorf("keyslot %d's area overlaps keyslot %d's", areas[i].id, areas[i-1].id)
		}
	}
	sort.Slice(h.Keyslots, func(i, j int) bool { return h.Keyslots[i].ID < h.Keyslots[j].ID })

	// Segments.
	segs := map[int]*jvalue{}
	var segIDs []int
	for _, m := range sections["segments"].obj {
		id, ok := canonicalID(m.key, maxSegments2)
		if !ok {
			return nil, fmt.Errorf("segment name %q is not a number below %d", m.key, maxSegments2)
		}
		if m.val.kind != jObject {
			return nil, fmt.Errorf("segment %d: %s, want object", id, m.val.kind)
		}
		segs[id] = m.val
		segIDs = append(segIDs, id)
	}
	if len(segIDs) == 0 {
		return nil, fmt.Errorf("no data segment")
	}
	sort.Ints(segIDs)
	h.Segments = len(segIDs)
	segExists := map[int]bool{}
	var parsed []Segment
	for _, id := range segIDs {
		s, err := parseSegment(id, segs[id])
		if err != nil {
			return nil, err
		}
		// The keyslots area must end before the first data byte, unless
		// the header is detached (offset 0).
		if s.Offset != 0 && s.Offset < h.HeaderSize {
			return nil, fmt.Errorf("segment %d at offset %d overlaps the header and keyslots area (%d bytes)", id, s.Offset, h.HeaderSize)
		}
		segExists[id] = true
		parsed = append(parsed, s)
	}
	h.Segment = parsed[0] // the lowest ID: "0" in every header cryptsetup makes

	// Digests.
	for _, m := range sections["digests"].obj {
		id, ok := canonicalID(m.key, maxKeyslots2)
		if !ok {
			return nil, fmt.Errorf("digest name %q is not a number below %d", m.key, maxKeyslots2)
		}
		d, err := parseDigest(id, m.val, slots, segExists)
		if err != nil {
			return nil, err
		}
		h.Digests = append(h.Digests, d)
	}
	sort.Slice(h.Digests, func(i, j int) bool { return h.Digests[i].ID < h.Digests[j].ID })
	for _, s := range parsed {
		if !digestsCover(h.Digests, s.ID) {
			return nil, fmt.Errorf("segment %d has no digest", s.ID)
		}
	}
	for i := range h.Keyslots {
		h.Keyslots[i].Digest = -1
		for _, d := range h.Digests {
			if containsInt(d.Keyslots, h.Keyslots[i].ID) {
				h.Keyslots[i].Digest = d.ID
				break
			}
		}
	}

	// Tokens: listed, not run.
	for _, m := range sections["tokens"].obj {
		id, ok := canonicalID(m.key, maxTokens2)
		if !ok {
			return nil, fmt.Errorf("token name %q is not a number below %d", m.key, maxTokens2)
		}
		path := "tokens." + m.key
		if m.val.kind != jObject {
			return nil, fmt.Errorf("%s: %s, want object", path, m.val.kind)
		}
		typ, err := jgetString(m.val, path, "type")
		if err != nil {
			return nil, err
		}
		ks, err := idList(m.val, path, "keyslots", slots, maxKeyslots2)
		if err != nil {
			return nil, err
		}
		h.Tokens = append(h.Tokens, Token{ID: id, Type: typ, Keyslots: ks})
	}
	sort.Slice(h.Tokens, func(i, j int) bool { return h.Tokens[i].ID < h.Tokens[j].ID })

	h.Cipher = h.Segment.Cipher
	// 0 (unknown) when no keyslot holds the volume key any more: it can
	// still be opened with the key itself (VerifyKey).
	h.KeySize = 0
	if d := segmentDigest(h.Digests, h.Segment.ID); d != nil {
		// The volume key size is that of the keyslots bound to the
		// segment's digest (cryptsetup's LUKS2_get_volume_key_size).
		for _, k := range h.Keyslots {
			if containsInt(d.Keyslots, k.ID) {
				h.KeySize = k.KeySize
				break
			}
		}
	}
	return h, nil
}

func digestsCover(ds []Digest, seg int) bool { return segmentDigest(ds, seg) != nil }

func segmentDigest(ds []Digest, seg int) *Digest {
	for i := range ds {
		if containsInt(ds[i].Segments, seg) {
			return &ds[i]
		}
	}
	return nil
}

func parseKeyslot(id int, v *jvalue) (Keyslot, error) {
	path := "keyslots." + strconv.Itoa(id)
	k := Keyslot{ID: id, Priority: PriorityNormal, Digest: -1}
	if v.kind != jObject {
		return k, fmt.Errorf("%s: %s, want object", path, v.kind)
	}
	var err error
	if k.Type, err = jgetString(v, path, "type"); err != nil {
		return k, err
	}
	ks, err := jgetUint(v, path, "key_size", maxKeyBytes)
	if err != nil {
		return k, err
	}
	k.KeySize = int(ks)
	// Every keyslot, whatever its type, has an area (hdr_validate_areas).
	area, err := jfield(v, path, "area", jObject)
	if err != nil {
		return k, err
	}
	apath := path + ".area"
	if k.Area.Offset, err = jgetDecimal(area, apath, "offset"); err != nil {
		return k, err
	}
	if k.Area.Size, err = jgetDecimal(area, apath, "size"); err != nil {
		return k, err
	}
	if k.Area.Type, err = jgetString(area, apath, "type"); err != nil {
		return k, err
	}
	if p := v.get("priority"); p != nil {
		n, err := jgetUint(v, path, "priority", 2)
		if err != nil {
			return k, err
		}
		k.Priority = Priority(n)
	}
	if k.Type != "luks2" {
		return k, nil // listed; slotProblem says why it cannot be used
	}
	// luks2_keyslot_validate: raw area, luks1 AF, a kdf object.
	if k.Area.Type == "raw" {
		if k.Area.Cipher, err = jgetString(area, apath, "encryption"); err != nil {
			return k, err
		}
		aks, err := jgetUint(area, apath, "key_size", maxKeyBytes)
		if err != nil {
			return k, err
		}
		k.Area.KeySize = int(aks)
	}
	af, err := jfield(v, path, "af", jObject)
	if err != nil {
		return k, err
	}
	if k.AF.Type, err = jgetString(af, path+".af", "type"); err != nil {
		return k, err
	}
	if k.AF.Type == "luks1" {
		if k.AF.Hash, err = jgetString(af, path+".af", "hash"); err != nil {
			return k, err
		}
		st, err := jgetUint(af, path+".af", "stripes", 1<<20)
		if err != nil {
			return k, err
		}
		k.AF.Stripes = int(st)
	}
	kdf, err := jfield(v, path, "kdf", jObject)
	if err != nil {
		return k, err
	}
	kpath := path + ".kdf"
	if k.KDF.Type, err = jgetString(kdf, kpath, "type"); err != nil {
		return k, err
	}
	const u32 = 1<<32 - 1
	switch k.KDF.Type {
	case "pbkdf2":
		if k.KDF.Hash, err = jgetString(kdf, kpath, "hash"); err != nil {
			return k, err
		}
		n, err := jgetUint(kdf, kpath, "iterations", u32)
		if err != nil {
			return k, err
		}
		k.KDF.Iterations = uint32(n)
	case "argon2i", "argon2id":
		t, err := jgetUint(kdf, kpath, "time", u32)
		if err != nil {
			return k, err
		}
		m, err := jgetUint(kdf, kpath, "memory", u32)
		if err != nil {
			return k, err
		}
		c, err := jgetUint(kdf, kpath, "cpus", u32)
		if err != nil {
			return k, err
		}
		k.KDF.Time, k.KDF.MemoryKiB, k.KDF.Threads = uint32(t), uint32(m), uint32(c)
	default:
		return k, nil // an unknown KDF: slotProblem refuses the slot
	}
	if k.KDF.Salt, err = b64(kdf, kpath, "salt", 0, 1024); err != nil {
		return k, err
	}
	if len(k.KDF.Salt) != keyslotSaltLen {
		k.Err = corrupt(fmt.Sprintf("keyslot %d", id), "%d-byte KDF salt, want %d", len(k.KDF.Salt), keyslotSaltLen)
	}
	return k, nil
}

func parseSegment(id int, v *jvalue) (Segment, error) {
	path := "segments." + strconv.Itoa(id)
	s := Segment{ID: id}
	var err error
	if s.Type, err = jgetString(v, path, "type"); err != nil {
		return s, err
	}
	if s.Offset, err = jgetDecimal(v, path, "offset"); err != nil {
		return s, err
	}
	size, err := jgetString(v, path, "size")
	if err != nil {
		return s, err
	}
	if size == "dynamic" {
		s.Dynamic = true
	} else if s.Size, err = parseDecimal(size, path+".size"); err != nil {
		return s, err
	} else if s.Size == 0 {
		return s, fmt.Errorf("%s.size: 0", path)
	}
	if s.Offset%512 != 0 || s.Size%512 != 0 {
		return s, fmt.Errorf("%s: offset %d or size %d is not a multiple of 512", path, s.Offset, s.Size)
	}
	if s.Offset > 1<<62 || s.Size > 1<<62 {
		return s, fmt.Errorf("%s: offset %d or size %d is implausibly large", path, s.Offset, s.Size)
	}
	if v.get("flags") != nil {
		if s.Flags, err = jgetStrings(v, path, "flags"); err != nil {
			return s, err
		}
	}
	if s.Type != "crypt" {
		return s, nil // Supported refuses it
	}
	tweak, err := jgetString(v, path, "iv_tweak")
	if err != nil {
		return s, err
	}
	if s.IVTweak, err = parseDecimal(tweak, path+".iv_tweak"); err != nil {
		return s, err
	}
	if s.Cipher, err = jgetString(v, path, "encryption"); err != nil {
		return s, err
	}
	ss, err := jgetUint(v, path, "sector_size", 1<<32-1)
	if err != nil {
		return s, err
	}
	if ss < 512 || ss > 4096 || ss&(ss-1) != 0 {
		return s, fmt.Errorf("%s.sector_size %d is not a power of two in 512..4096", path, ss)
	}
	s.SectorSize = int(ss)
	if s.Size%ss != 0 {
		return s, fmt.Errorf("%s: size %d is not a multiple of the %d-byte sector", path, s.Size, ss)
	}
	if in := v.get("integrity"); in != nil {
		if in.kind != jObject {
			return s, fmt.Errorf("%s.integrity: %s, want object", path, in.kind)
		}
		if s.Integrity, err = jgetString(in, path+".integrity", "type"); err != nil {
			return s, err
		}
	}
	return s, nil
}

func parseDigest(id int, v *jvalue, slots, segs map[int]bool) (Digest, error) {
	path := "digests." + strconv.Itoa(id)
	d := Digest{ID: id}
	if v.kind != jObject {
		return d, fmt.Errorf("%s: %s, want object", path, v.kind)
	}
	var err error
	if d.Type, err = jgetString(v, path, "type"); err != nil {
		return d, err
	}
	if d.Keyslots, err = idList(v, path, "keyslots", slots, maxKeyslots2); err != nil {
		return d, err
	}
	if d.Segments, err = idList(v, path, "segments", segs, maxSegments2); err != nil {
		return d, err
	}
	if d.Type != "pbkdf2" {
		return d, nil // slots bound to it are refused
	}
	if d.Hash, err = jgetString(v, path, "hash"); err != nil {
		return d, err
	}
	n, err := jgetUint(v, path, "iterations", 1<<32-1)
	if err != nil {
		return d, err
	}
	if n == 0 {
		return d, fmt.Errorf("%s.iterations: 0", path)
	}
	d.Iterations = uint32(n)
	if d.Salt, err = b64(v, path, "salt", 1, maxDigestSaltLen); err != nil {
		return d, err
	}
	if d.Value, err = b64(v, path, "digest", minDigestLen, 64); err != nil {
		return d, err
	}
	return d, nil
}
