package luks

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// validateMetadata checks a LUKS2 JSON tree by the rules cryptsetup 2.6.1
// checks on load (LUKS2_hdr_validate and the keyslot handlers' validate in
// lib/luks2), in its order, so that a header cryptsetup refuses is refused
// here and one it reads is read: the five sections and their types, each
// object's required fields with their JSON types and ranges, and the
// bindings between them (digests name keyslots and segments that exist,
// every crypt segment has a digest, every luks2 keyslot is in exactly one
// digest, keyslot areas lie inside the keyslots area without overlapping,
// segments do not overlap and only the last is "dynamic", the keyslots area
// ends before the data). What it refuses is a damaged header; the error
// names the rule. jsonSize is the binary header's JSON area size.
//
// Fields cryptsetup reads without checking on load (a keyslot's priority,
// a digest's hash, iterations and salt, KDF salts) are left to the
// keyslots and digests that use them (slotProblem): a header with such a
// field wrong still loads, as in cryptsetup, and only what needs the field
// fails.
func validateMetadata(root *jvalue, jsonSize uint64) error {
	if root.kind != jObject {
		return fmt.Errorf("the JSON area holds a %s, not an object", root.kind)
	}
	for _, check := range []func(*jvalue) error{
		validateRequirements,
		validateTokens,
		validateDigests,
		validateSegments,
		validateKeyslots,
		validateConfig,
		validateAreas,
	} {
		if err := check(root); err != nil {
			return err
		}
	}
	if err := validateJSONSize(root, jsonSize); err != nil {
		return err
	}
	return validateKeyslotTypes(root)
}

// section returns a top-level section, which must be an object.
func section(root *jvalue, name string) (*jvalue, error) {
	v := root.get(name)
	switch {
	case v == nil:
		return nil, fmt.Errorf("no %q section", name)
	case v.kind != jObject:
		return nil, fmt.Errorf("the %q section is a %s, not an object", name, v.kind)
	}
	return v, nil
}

// field returns obj's member key, which must be of the given kind (for a
// number: an integer).
func field(obj *jvalue, what, key string, kind jkind) (*jvalue, error) {
	v := obj.get(key)
	switch {
	case v == nil:
		return nil, fmt.Errorf("%s has no %q", what, key)
	case v.kind != kind || kind == jNumber && v.dbl:
		want := kind.String()
		if kind == jNumber {
			want = "integer"
		}
		return nil, fmt.Errorf("%s: %q is %s, not %s", what, key, describe(v), article(want))
	}
	return v, nil
}

// stringField returns obj's member key, a string not empty (as C sees it).
func stringField(obj *jvalue, what, key string) (*jvalue, error) {
	v, err := field(obj, what, key, jString)
	if err != nil {
		return nil, err
	}
	if v.cs() == "" {
		return nil, fmt.Errorf("%s: %q is empty", what, key)
	}
	return v, nil
}

// uint32Field returns an integer member in 0..2^32-1 (validate_json_uint32).
func uint32Field(obj *jvalue, what, key string) (uint32, error) {
	v, err := field(obj, what, key, jNumber)
	if err != nil {
		return 0, err
	}
	n := v.int64Value()
	if n < 0 || n > math.MaxUint32 {
		return 0, fmt.Errorf("%s: %q is %s, not in 0..%d", what, key, v.s, uint32(math.MaxUint32))
	}
	return uint32(n), nil
}

// decimalField returns a member that is a string of decimal digits within
// 64 bits (cryptsetup's numbered() then json_str_to_uint64).
func decimalField(obj *jvalue, what, key string) (uint64, error) {
	v, err := stringField(obj, what, key)
	if err != nil {
		return 0, err
	}
	if !numbered(v.s) {
		return 0, fmt.Errorf("%s: %q is %q, not a decimal number", what, key, v.cs())
	}
	n, ok := strToUint64(v.s)
	if !ok {
		return 0, fmt.Errorf("%s: %q is %q, beyond 64 bits", what, key, v.cs())
	}
	return n, nil
}

func describe(v *jvalue) string {
	if v.kind == jNumber && v.dbl {
		return "a number with a fraction or exponent"
	}
	return article(v.kind.String())
}

func article(s string) string {
	if strings.ContainsRune("aeiou", rune(s[0])) {
		return "an " + s
	}
	return "a " + s
}

// stringArray checks that v, obj's member key, is an array of strings.
func stringArray(obj *jvalue, what, key string) (*jvalue, error) {
	v, err := field(obj, what, key, jArray)
	if err != nil {
		return nil, err
	}
	for i, e := range v.arr {
		if e.kind != jString {
			return nil, fmt.Errorf("%s: %q[%d] is %s, not a string", what, key, i, describe(e))
		}
	}
	return v, nil
}

// references checks an array of names, each naming an object of target
// (validate_keyslots_array, validate_segments_array).
func references(obj *jvalue, what, key string, target map[string]*jvalue, targetName string) error {
	arr, err := stringArray(obj, what, key)
	if err != nil {
		return err
	}
	for _, e := range arr.arr {
		if t := target[e.cs()]; t == nil || t.kind != jObject {
			return fmt.Errorf("%s: %q names %s %q, which does not exist", what, key, targetName, e.cs())
		}
	}
	return nil
}

func validateRequirements(root *jvalue) error {
	cfg, err := section(root, "config")
	if err != nil {
		return err
	}
	req := cfg.get("requirements")
	if req == nil {
		return nil
	}
	if req.kind != jObject {
		return fmt.Errorf("config: \"requirements\" is %s, not an object", describe(req))
	}
	if req.get("mandatory") == nil {
		return nil
	}
	mand, err := stringArray(req, "config.requirements", "mandatory")
	if err != nil {
		return err
	}
	n := 0
	for _, e := range mand.arr {
		if reencryptCandidate(e.cs()) {
			n++
		}
	}
	if n > 1 {
		return fmt.Errorf("config.requirements: %d online reencryption requirements, at most one is allowed", n)
	}
	return nil
}

// reencryptCandidate is cryptsetup's reencrypt_candidate_flag:
// "online-reencrypt" or "online-reencrypt-v" and digits.
func reencryptCandidate(flag string) bool {
	if flag == "online-reencrypt" {
		return true
	}
	v, ok := strings.CutPrefix(flag, "online-reencrypt-v")
	return ok && v != "" && strings.Trim(v, "0123456789") == ""
}

// mandatoryRequirements returns config.requirements.mandatory, already
// validated.
func mandatoryRequirements(root *jvalue) []string {
	var out []string
	for _, e := range root.get("config").get("requirements").get("mandatory").elems() {
		out = append(out, e.cs())
	}
	return out
}

// onlineReencrypt reports whether a requirement asks for an online
// reencryption in progress (cryptsetup's CRYPT_REQUIREMENT_ONLINE_REENCRYPT:
// "online-reencrypt", -v2 and -v3).
func onlineReencrypt(reqs []string) bool {
	for _, r := range reqs {
		switch r {
		case "online-reencrypt", "online-reencrypt-v2", "online-reencrypt-v3":
			return true
		}
	}
	return false
}

// index maps an object's names to their values, for lookups in time
// independent of the object's size (a hostile header may have thousands
// of members).
func index(obj *jvalue) map[string]*jvalue {
	m := make(map[string]*jvalue, len(obj.obj))
	for _, e := range obj.obj {
		if _, ok := m[e.key]; !ok {
			m[e.key] = e.val
		}
	}
	return m
}

// elems returns an array's elements, or nothing for any other value.
func (v *jvalue) elems() []*jvalue {
	if v == nil || v.kind != jArray {
		return nil
	}
	return v.arr
}

func validateTokens(root *jvalue) error {
	keyslots := root.get("keyslots")
	if keyslots == nil {
		return fmt.Errorf("no \"keyslots\" section")
	}
	tokens, err := section(root, "tokens")
	if err != nil {
		return err
	}
	slots := index(keyslots)
	for _, m := range tokens.obj {
		what := fmt.Sprintf("token %q", m.key)
		if !numbered(m.key) {
			return fmt.Errorf("%s: the name is not a number", what)
		}
		if _, err := stringField(m.val, what, "type"); err != nil {
			return err
		}
		if err := references(m.val, what, "keyslots", slots, "keyslot"); err != nil {
			return err
		}
	}
	return nil
}

func validateDigests(root *jvalue) error {
	digests, err := section(root, "digests")
	if err != nil {
		return err
	}
	keyslots, err := section(root, "keyslots")
	if err != nil {
		return err
	}
	segments, err := section(root, "segments")
	if err != nil {
		return err
	}
	slots, segs := index(keyslots), index(segments)
	for _, m := range digests.obj {
		what := fmt.Sprintf("digest %q", m.key)
		if !numbered(m.key) {
			return fmt.Errorf("%s: the name is not a number", what)
		}
		if _, err := stringField(m.val, what, "type"); err != nil {
			return err
		}
		if err := references(m.val, what, "keyslots", slots, "keyslot"); err != nil {
			return err
		}
		if err := references(m.val, what, "segments", segs, "segment"); err != nil {
			return err
		}
	}
	return nil
}

// isBackup reports whether a segment is a reencryption backup: a flag
// starting "backup-".
func isBackupSegment(seg *jvalue) bool {
	for _, f := range seg.get("flags").elems() {
		if strings.HasPrefix(f.stringValue(), "backup-") {
			return true
		}
	}
	return false
}

func hasFlag(seg *jvalue, flag string) bool {
	for _, f := range seg.get("flags").elems() {
		if f.stringValue() == flag {
			return true
		}
	}
	return false
}

// digestNames returns, for each name a digest's keyslots (or segments)
// array holds, how many digests hold it.
func digestNames(root *jvalue, key string) map[string]int {
	n := map[string]int{}
	for _, d := range root.get("digests").obj {
		seen := map[string]bool{}
		for _, e := range d.val.get(key).elems() {
			if s := e.stringValue(); !seen[s] {
				seen[s] = true
				n[s]++
			}
		}
	}
	return n
}

func validateSegments(root *jvalue) error {
	segments, err := section(root, "segments")
	if err != nil {
		return err
	}
	count := len(segments.obj)
	if count < 1 {
		return fmt.Errorf("no segment")
	}
	if root.get("digests") == nil {
		return fmt.Errorf("no \"digests\" section")
	}
	withDigest := digestNames(root, "segments")
	segs := index(segments)
	firstBackup := -1
	for _, m := range segments.obj {
		what := fmt.Sprintf("segment %q", m.key)
		if !numbered(m.key) {
			return fmt.Errorf("%s: the name is not a number", what)
		}
		typ, err := stringField(m.val, what, "type")
		if err != nil {
			return err
		}
		offset, err := decimalField(m.val, what, "offset")
		if err != nil {
			return err
		}
		size := uint64(0) // "dynamic"
		sz, err := stringField(m.val, what, "size")
		if err != nil {
			return err
		}
		if sz.cs() != "dynamic" {
			if size, err = decimalField(m.val, what, "size"); err != nil {
				return err
			}
			if size == 0 {
				return fmt.Errorf("%s: size 0", what)
			}
		}
		if offset%512 != 0 {
			return fmt.Errorf("%s: offset %d is not a multiple of 512", what, offset)
		}
		if size%512 != 0 {
			return fmt.Errorf("%s: size %d is not a multiple of 512", what, size)
		}
		if m.val.get("flags") != nil {
			if _, err := stringArray(m.val, what, "flags"); err != nil {
				return err
			}
		}
		i := atoi(m.key)
		if isBackupSegment(m.val) {
			if firstBackup < 0 || i < firstBackup {
				firstBackup = i
			}
		} else if firstBackup >= 0 && i >= firstBackup {
			return fmt.Errorf("%s: a data segment after backup segment %d", what, firstBackup)
		}
		if typ.cs() == "crypt" {
			if err := validateCryptSegment(m.val, m.key, size, withDigest[m.key] > 0); err != nil {
				return err
			}
		}
	}
	switch {
	case firstBackup == 0:
		return fmt.Errorf("no data segment, only backup segments")
	case firstBackup >= count:
		return fmt.Errorf("a gap before backup segment %d", firstBackup)
	case firstBackup < 0:
		firstBackup = count
	}
	ivs := make([]interval, firstBackup)
	for i := range ivs {
		s := segs[nameOf(i)]
		if s == nil {
			return fmt.Errorf("no segment %d: segments must be numbered from 0 without gaps", i)
		}
		off, _ := strToUint64(s.get("offset").s)
		n, _ := strToUint64(s.get("size").s) // "dynamic" reads as 0
		if n == 0 {
			n = math.MaxUint64
		}
		ivs[i] = interval{strconv.Itoa(i), off, n}
	}
	for i, a := range ivs {
		if a.length == math.MaxUint64 && i != len(ivs)-1 {
			return fmt.Errorf("segment %d: only the last data segment may have a \"dynamic\" size", i)
		}
		if len(ivs) > 1 && a.length != math.MaxUint64 && a.off > math.MaxUint64-a.length {
			return fmt.Errorf("segment %d: offset %d + size %d overflow 64 bits", i, a.off, a.length)
		}
	}
	if a, b, ok := overlap(ivs); ok {
		return fmt.Errorf("segments %s and %s overlap", a, b)
	}
	for i := firstBackup; i < count; i++ {
		if segs[nameOf(i)] == nil {
			return fmt.Errorf("no segment %d: segments must be numbered from 0 without gaps", i)
		}
	}
	return validateReencryptSegments(root, segs, firstBackup, count)
}

// interval is a keyslot area or a segment; length MaxUint64 is a
// "dynamic" segment, to the end of the device.
type interval struct {
	name        string
	off, length uint64
}

// overlap reports two intervals of which one starts inside the other, as
// cryptsetup's pairwise checks do (an interval of length 0 contains
// nothing; one whose end overflows is refused before), in n log n.
func overlap(ivs []interval) (a, b string, ok bool) {
	s := slices.Clone(ivs)
	slices.SortStableFunc(s, func(x, y interval) int { return cmp.Compare(x.off, y.off) })
	var last interval // the interval seen so far that ends last
	for i, v := range s {
		if i > 0 && (v.off < end(last) || v.off == last.off && last.length > 0) {
			return v.name, last.name, true
		}
		if i == 0 || end(v) > end(last) {
			last = v
		}
	}
	return "", "", false
}

func end(v interval) uint64 {
	if v.length == math.MaxUint64 || v.off > math.MaxUint64-v.length {
		return math.MaxUint64
	}
	return v.off + v.length
}

// validateCryptSegment checks the fields of a "crypt" segment
// (hdr_validate_crypt_segment).
func validateCryptSegment(seg *jvalue, name string, size uint64, hasDigest bool) error {
	what := fmt.Sprintf("segment %q", name)
	if _, err := stringField(seg, what, "iv_tweak"); err != nil {
		return err
	}
	if _, err := stringField(seg, what, "encryption"); err != nil {
		return err
	}
	if _, err := field(seg, what, "sector_size", jNumber); err != nil {
		return err
	}
	if in := seg.get("integrity"); in != nil {
		if in.kind != jObject {
			return fmt.Errorf("%s: \"integrity\" is %s, not an object", what, describe(in))
		}
		for _, f := range []string{"type", "journal_encryption", "journal_integrity"} {
			if _, err := stringField(in, what+" integrity", f); err != nil {
				return err
			}
		}
	}
	ss, err := uint32Field(seg, what, "sector_size")
	if err != nil {
		return err
	}
	if ss == 0 || ss%512 != 0 {
		return fmt.Errorf("%s: sector size %d is not a multiple of 512", what, ss)
	}
	if _, err := decimalField(seg, what, "iv_tweak"); err != nil {
		return err
	}
	if size%uint64(ss) != 0 {
		return fmt.Errorf("%s: size %d is not a multiple of the %d-byte sector", what, size, ss)
	}
	if !hasDigest {
		return fmt.Errorf("%s: no digest covers this crypt segment", what)
	}
	return nil
}

// validateReencryptSegments: with an online reencryption in progress, the
// backup segments must hold the old and the new one, and every data
// segment must be like one of them (validate_reencrypt_segments).
func validateReencryptSegments(root *jvalue, segs map[string]*jvalue, firstBackup, count int) error {
	if !onlineReencrypt(mandatoryRequirements(root)) {
		return nil
	}
	var final, previous *jvalue
	for i := firstBackup; i < count; i++ {
		s := segs[nameOf(i)]
		switch {
		case hasFlag(s, "backup-final"):
			final = s
		case hasFlag(s, "backup-previous"):
			previous = s
		}
	}
	if final == nil || previous == nil {
		return fmt.Errorf("reencryption in progress without its backup-final and backup-previous segments")
	}
	for i := range firstBackup {
		s := segs[nameOf(i)]
		if hasFlag(s, "in-reencryption") {
			if !sameSegment(s, final) {
				return fmt.Errorf("segment %d in reencryption differs from the backup-final segment", i)
			}
			continue
		}
		if !sameSegment(s, final) && !sameSegment(s, previous) {
			return fmt.Errorf("segment %d is like neither the backup-final nor the backup-previous segment", i)
		}
	}
	return nil
}

// sameSegment is json_segment_cmp: the same type and, for crypt, the same
// sector size and cipher.
func sameSegment(a, b *jvalue) bool {
	ta, tb := a.get("type"), b.get("type")
	if ta == nil || tb == nil || ta.stringValue() != tb.stringValue() {
		return false
	}
	if ta.stringValue() != "crypt" {
		return true
	}
	sector := func(s *jvalue) int32 {
		v := s.get("sector_size")
		if v == nil || v.intValue() < 0 {
			return 512
		}
		return v.intValue()
	}
	cipher := func(s *jvalue) string {
		if v := s.get("encryption"); v != nil {
			return v.stringValue()
		}
		return "null"
	}
	return sector(a) == sector(b) && cipher(a) == cipher(b)
}

func validateKeyslots(root *jvalue) error {
	keyslots, err := section(root, "keyslots")
	if err != nil {
		return err
	}
	for _, m := range keyslots.obj {
		what := fmt.Sprintf("keyslot %q", m.key)
		if !numbered(m.key) {
			return fmt.Errorf("%s: the name is not a number", what)
		}
		if _, err := stringField(m.val, what, "type"); err != nil {
			return err
		}
		if _, err := uint32Field(m.val, what, "key_size"); err != nil {
			return err
		}
	}
	return nil
}

// configSizes returns config's json_size and keyslots_size as cryptsetup
// reads them (strtoull: white space and a sign are taken).
func configSizes(cfg *jvalue) (jsonSize, keyslotsSize uint64, err error) {
	for _, f := range []struct {
		key string
		dst *uint64
	}{{"json_size", &jsonSize}, {"keyslots_size", &keyslotsSize}} {
		v, err := stringField(cfg, "config", f.key)
		if err != nil {
			return 0, 0, err
		}
		n, ok := strToUint64(v.s)
		if !ok {
			return 0, 0, fmt.Errorf("config: %q is %q, not a 64-bit number", f.key, v.cs())
		}
		*f.dst = n
	}
	return jsonSize, keyslotsSize, nil
}

func validateConfig(root *jvalue) error {
	cfg, err := section(root, "config")
	if err != nil {
		return err
	}
	jsonSize, ksSize, err := configSizes(cfg)
	if err != nil {
		return err
	}
	meta := jsonSize + binHeaderSize
	if !validMetadataSize(meta) {
		return fmt.Errorf("config: json_size %d makes a %d-byte header, not one LUKS2 allows (16 KiB .. 4 MiB, a power of two)", jsonSize, meta)
	}
	if ksSize%4096 != 0 || ksSize > maxKeyslotsSize {
		return fmt.Errorf("config: keyslots_size %d is not a multiple of 4096 up to 128 MiB", ksSize)
	}
	// The keyslots area must end before the first data segment, unless the
	// header is detached (a segment at offset 0).
	first := uint64(math.MaxUint64)
	for _, m := range root.get("segments").obj {
		if isBackupSegment(m.val) {
			continue
		}
		off, _ := strToUint64(m.val.get("offset").s)
		first = min(first, off)
	}
	if first != 0 && first != math.MaxUint64 && (first < ksSize || first-ksSize < 2*meta) {
		return fmt.Errorf("config: keyslots_size %d does not fit between the two %d-byte header copies and the data at %d", ksSize, meta, first)
	}
	if cfg.get("flags") != nil {
		if _, err := stringArray(cfg, "config", "flags"); err != nil {
			return err
		}
	}
	return nil
}

func validateAreas(root *jvalue) error {
	keyslots := root.get("keyslots")
	jsonSize, ksSize, _ := configSizes(root.get("config"))
	meta := jsonSize + binHeaderSize
	end := 2*meta + ksSize
	var areas []interval
	for _, m := range keyslots.obj {
		what := fmt.Sprintf("keyslot %q", m.key)
		a, err := field(m.val, what, "area", jObject)
		if err != nil {
			return err
		}
		what += " area"
		if _, err := stringField(a, what, "type"); err != nil {
			return err
		}
		off, err := decimalField(a, what, "offset")
		if err != nil {
			return err
		}
		size, err := decimalField(a, what, "size")
		if err != nil {
			return err
		}
		areas = append(areas, interval{fmt.Sprintf("keyslot %q", m.key), off, size})
	}
	for _, a := range areas {
		switch {
		case a.off < 2*meta:
			return fmt.Errorf("%s area at offset %d lies in the header copies (the keyslots area starts at %d)", a.name, a.off, 2*meta)
		case a.length == 0:
			return fmt.Errorf("%s area is empty", a.name)
		case a.off > math.MaxUint64-a.length:
			return fmt.Errorf("%s area: offset %d + size %d overflow 64 bits", a.name, a.off, a.length)
		case a.off+a.length > end:
			return fmt.Errorf("%s area [%d, %d) runs past the keyslots area, which ends at %d", a.name, a.off, a.off+a.length, end)
		}
	}
	if a, b, ok := overlap(areas); ok {
		return fmt.Errorf("%s and %s areas overlap", a, b)
	}
	return nil
}

func validateJSONSize(root *jvalue, jsonSize uint64) error {
	n, _, _ := configSizes(root.get("config"))
	if n != jsonSize {
		return fmt.Errorf("config: json_size %d does not match the binary header's %d-byte JSON area", n, jsonSize)
	}
	if text := root.marshal(); uint64(len(text)) > jsonSize {
		return fmt.Errorf("the metadata takes %d bytes written compactly, more than the %d-byte JSON area", len(text), jsonSize)
	}
	return nil
}

// validateKeyslotTypes runs the checks of the keyslot types cryptsetup
// knows (LUKS2_keyslots_validate): luks2 keyslots need their kdf, af and
// area objects and sit in exactly one digest; reencrypt keyslots need
// their fields, and go with an online reencryption requirement, at most
// one of them. Keyslots of other types are not checked.
func validateKeyslotTypes(root *jvalue) error {
	reqs := mandatoryRequirements(root)
	inDigests := digestNames(root, "keyslots")
	reencrypt := 0
	for _, m := range root.get("keyslots").obj {
		what := fmt.Sprintf("keyslot %q", m.key)
		switch m.val.get("type").stringValue() {
		case "luks2":
			if err := validateLUKS2Keyslot(m.val, what); err != nil {
				return err
			}
			if n := inDigests[nameOf(atoi(m.key))]; n != 1 {
				return fmt.Errorf("%s is in %d digests, not exactly one", what, n)
			}
		case "reencrypt":
			if err := validateReencryptKeyslot(m.val, what); err != nil {
				return err
			}
			reencrypt++
		}
	}
	candidate := false
	for _, r := range reqs {
		candidate = candidate || reencryptCandidate(r)
	}
	switch {
	case onlineReencrypt(reqs) && reencrypt == 0:
		return fmt.Errorf("an online reencryption requirement without a reencrypt keyslot")
	case reencrypt > 0 && !candidate:
		return fmt.Errorf("a reencrypt keyslot without an online reencryption requirement")
	case reencrypt > 1:
		return fmt.Errorf("%d reencrypt keyslots, at most one is allowed", reencrypt)
	}
	return nil
}

// validateLUKS2Keyslot is the luks2 keyslot handler's validate: a kdf
// object with the fields of its type (pbkdf2, argon2i, argon2id; others
// are not checked), a "luks1" af and a "raw" area with their fields.
// Members beyond these are allowed (cryptsetup drops them on load).
func validateLUKS2Keyslot(k *jvalue, what string) error {
	kdf, af, area := k.get("kdf"), k.get("af"), k.get("area")
	if kdf == nil || af == nil || area == nil {
		return fmt.Errorf("%s needs \"kdf\", \"af\" and \"area\"", what)
	}
	if kdf.kind != jObject {
		return fmt.Errorf("%s: \"kdf\" is %s, not an object", what, describe(kdf))
	}
	typ, err := stringField(kdf, what+" kdf", "type")
	if err != nil {
		return err
	}
	need := map[string]jkind{}
	switch typ.cs() {
	case "pbkdf2":
		need = map[string]jkind{"hash": jString, "iterations": jNumber, "salt": jString}
	case "argon2i", "argon2id":
		need = map[string]jkind{"time": jNumber, "memory": jNumber, "cpus": jNumber, "salt": jString}
	}
	for _, f := range []string{"hash", "iterations", "time", "memory", "cpus", "salt"} {
		if kind, ok := need[f]; ok {
			if err := member(kdf, what+" kdf", f, kind); err != nil {
				return err
			}
		}
	}
	if af.kind != jObject || af.get("type") == nil {
		return fmt.Errorf("%s: \"af\" is not an object with a \"type\"", what)
	}
	if t := af.get("type").stringValue(); t != "luks1" {
		return fmt.Errorf("%s: af type %q is not \"luks1\"", what, t)
	}
	if err := member(af, what+" af", "hash", jString); err != nil {
		return err
	}
	if err := member(af, what+" af", "stripes", jNumber); err != nil {
		return err
	}
	if area.kind != jObject || area.get("type") == nil {
		return fmt.Errorf("%s: \"area\" is not an object with a \"type\"", what)
	}
	if t := area.get("type").stringValue(); t != "raw" {
		return fmt.Errorf("%s: area type %q is not \"raw\"", what, t)
	}
	for _, f := range []struct {
		key  string
		kind jkind
	}{{"encryption", jString}, {"key_size", jNumber}, {"offset", jString}, {"size", jString}} {
		if err := member(area, what+" area", f.key, f.kind); err != nil {
			return err
		}
	}
	return nil
}

// member checks a member of a luks2 keyslot's objects: an integer, or a
// string that is not empty.
func member(obj *jvalue, what, key string, kind jkind) error {
	var err error
	if kind == jString {
		_, err = stringField(obj, what, key)
	} else {
		_, err = field(obj, what, key, kind)
	}
	return err
}

// validateReencryptKeyslot is the reencrypt keyslot handler's validate.
func validateReencryptKeyslot(k *jvalue, what string) error {
	area := k.get("area")
	if area == nil || area.get("type") == nil {
		return fmt.Errorf("%s: no area type", what)
	}
	if _, err := field(k, what, "key_size", jNumber); err != nil {
		return err
	}
	mode, err := stringField(k, what, "mode")
	if err != nil {
		return err
	}
	dir, err := stringField(k, what, "direction")
	if err != nil {
		return err
	}
	if n, err := uint32Field(k, what, "key_size"); err != nil || n != 1 {
		return fmt.Errorf("%s: a reencrypt keyslot's key_size must be 1", what)
	}
	switch mode.cs() {
	case "reencrypt", "encrypt", "decrypt":
	default:
		return fmt.Errorf("%s: reencryption mode %q", what, mode.cs())
	}
	switch dir.cs() {
	case "forward", "backward":
	default:
		return fmt.Errorf("%s: reencryption direction %q", what, dir.cs())
	}
	switch area.get("type").stringValue() {
	case "checksum", "datashift-checksum":
		if _, err := stringField(area, what+" area", "hash"); err != nil {
			return err
		}
		ss, err := uint32Field(area, what+" area", "sector_size")
		if err != nil {
			return err
		}
		if ss < 512 || ss&(ss-1) != 0 {
			return fmt.Errorf("%s: checksum sector size %d is not a power of two from 512", what, ss)
		}
	case "datashift", "datashift-journal":
		v, err := stringField(area, what+" area", "shift_size")
		if err != nil {
			return err
		}
		n, _ := strToUint64(v.s)
		if n == 0 || n%512 != 0 {
			return fmt.Errorf("%s: data shift %q is not a positive multiple of 512", what, v.cs())
		}
	}
	return nil
}
