package luks

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// The LUKS2 JSON area is kept as an ordered tree rather than decoded into
// structs: rewriting a header (adding a keyslot) must keep every field and
// token we do not interpret, in cryptsetup's order, and a header cryptsetup
// wrote must serialise back to the same bytes (marshal is json-c's
// JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE output).

type jkind uint8

const (
	jNull jkind = iota
	jBool
	jNumber
	jString
	jArray
	jObject
)

func (k jkind) String() string {
	return [...]string{"null", "boolean", "number", "string", "array", "object"}[k]
}

type jvalue struct {
	kind jkind
	b    bool
	dbl  bool   // a number json-c reads as a double (a '.', an exponent, NaN, Infinity), not an integer
	s    string // string value, or a number's text: canonical for an integer, as written for a double
	arr  []*jvalue
	obj  []jmember
}

type jmember struct {
	key string
	val *jvalue
}

// maxJSONDepth bounds nesting as json-c does (JSON_TOKENER_DEFAULT_DEPTH):
// the top object is level 1, and every value inside a level is one more.
// LUKS2 metadata needs 5 levels, tokens a few more.
const maxJSONDepth = 32

func jstr(s string) *jvalue { return &jvalue{kind: jString, s: s} }
func jnum(n uint64) *jvalue { return &jvalue{kind: jNumber, s: strconv.FormatUint(n, 10)} }
func jobj(m ...jmember) *jvalue {
	return &jvalue{kind: jObject, obj: m}
}
func jarr(v ...*jvalue) *jvalue { return &jvalue{kind: jArray, arr: v} }

// get returns the member key of an object, or nil.
func (v *jvalue) get(key string) *jvalue {
	if v == nil || v.kind != jObject {
		return nil
	}
	for _, m := range v.obj {
		if m.key == key {
			return m.val
		}
	}
	return nil
}

// set replaces member key, or appends it (json-c's json_object_object_add
// keeps the position of a replaced key).
func (v *jvalue) set(key string, val *jvalue) {
	for i := range v.obj {
		if v.obj[i].key == key {
			v.obj[i].val = val
			return
		}
	}
	v.obj = append(v.obj, jmember{key, val})
}

// del removes member key if present.
func (v *jvalue) del(key string) {
	for i := range v.obj {
		if v.obj[i].key == key {
			v.obj = append(v.obj[:i:i], v.obj[i+1:]...)
			return
		}
	}
}

func (v *jvalue) clone() *jvalue {
	if v == nil {
		return nil
	}
	c := *v
	if v.arr != nil {
		c.arr = make([]*jvalue, len(v.arr))
		for i, e := range v.arr {
			c.arr[i] = e.clone()
		}
	}
	if v.obj != nil {
		c.obj = make([]jmember, len(v.obj))
		for i, m := range v.obj {
			c.obj[i] = jmember{m.key, m.val.clone()}
		}
	}
	return &c
}

// parseJSON parses the JSON text of a LUKS2 JSON area (the bytes before
// its first NUL) as json-c's tokener does in its default, non-strict mode,
// which is what cryptsetup reads headers with: a header cryptsetup reads
// must read here, and one it refuses must be refused. So besides RFC 8259
// it accepts what json-c accepts: /* */ and // comments, a trailing comma
// in objects and arrays, single-quoted strings, raw control bytes and
// invalid UTF-8 in strings, lone UTF-16 surrogates (read as U+FFFD),
// true/false/null/NaN/Infinity in any case, numbers with leading zeros or
// a trailing '.' or exponent mark, and integers beyond 64 bits (saturated).
// A repeated object key replaces the value of the first, in its place, as
// json_object_object_add does. Nesting is bounded as in json-c: 32 levels,
// the top object being the first. b must hold exactly one value, followed
// by nothing but white space and comments (cryptsetup requires NULs right
// after what json-c reads).
func parseJSON(b []byte) (*jvalue, error) {
	p := jparser{b: b}
	p.space()
	v, err := p.value(1)
	if err != nil {
		return nil, err
	}
	p.space() // json-c takes white space and comments after the value too
	if p.err != nil {
		return nil, p.err
	}
	if p.i != len(b) {
		return nil, fmt.Errorf("json: unexpected byte %q after the value at offset %d", b[p.i], p.i)
	}
	return v, nil
}

type jparser struct {
	b   []byte
	i   int
	err error // a malformed comment met while skipping white space
}

func (p *jparser) errf(format string, a ...any) error {
	return fmt.Errorf("json: offset %d: %s", p.i, fmt.Sprintf(format, a...))
}

// space skips white space and comments, as json-c does between tokens. An
// unterminated comment, or a '/' that starts none, is remembered in p.err
// and reported by the caller's next check.
func (p *jparser) space() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		case '/':
			if p.i+1 >= len(p.b) {
				p.err = p.errf("unterminated comment")
				return
			}
			switch p.b[p.i+1] {
			case '*':
				end := bytes.Index(p.b[p.i+2:], []byte("*/"))
				if end < 0 {
					p.err = p.errf("unterminated comment")
					p.i = len(p.b)
					return
				}
				p.i += 2 + end + 2
			case '/':
				end := bytes.IndexByte(p.b[p.i+2:], '\n')
				if end < 0 {
					p.err = p.errf("unterminated comment")
					p.i = len(p.b)
					return
				}
				p.i += 2 + end + 1
			default:
				p.err = p.errf("'/' that starts no comment")
				return
			}
		default:
			return
		}
	}
}

func (p *jparser) value(depth int) (*jvalue, error) {
	if p.err != nil {
		return nil, p.err
	}
	if depth > maxJSONDepth {
		return nil, p.errf("nested deeper than %d levels", maxJSONDepth)
	}
	if p.i >= len(p.b) {
		return nil, p.errf("unexpected end")
	}
	switch c := p.b[p.i]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"' || c == '\'':
		s, err := p.str()
		if err != nil {
			return nil, err
		}
		return jstr(s), nil
	case c == '-' && p.i+1 < len(p.b) && (p.b[p.i+1] == 'i' || p.b[p.i+1] == 'I'):
		p.i++
		if !p.lit("infinity") {
			return nil, p.errf("malformed -Infinity")
		}
		return &jvalue{kind: jNumber, dbl: true, s: "-Infinity"}, nil
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number(depth)
	case p.lit("true"):
		return &jvalue{kind: jBool, b: true}, nil
	case p.lit("false"):
		return &jvalue{kind: jBool}, nil
	case p.lit("null"):
		return &jvalue{kind: jNull}, nil
	case p.lit("nan"):
		return &jvalue{kind: jNumber, dbl: true, s: "NaN"}, nil
	case p.lit("infinity"):
		return &jvalue{kind: jNumber, dbl: true, s: "Infinity"}, nil
	}
	return nil, p.errf("unexpected byte %q", p.b[p.i])
}

// lit consumes word, in any case (json-c's non-strict mode).
func (p *jparser) lit(word string) bool {
	if p.i+len(word) <= len(p.b) && strings.EqualFold(string(p.b[p.i:p.i+len(word)]), word) {
		p.i += len(word)
		return true
	}
	return false
}

func (p *jparser) object(depth int) (*jvalue, error) {
	v := &jvalue{kind: jObject, obj: []jmember{}}
	pos := map[string]int{} // where each key is, so that a large object parses in linear time
	p.i++                   // {
	p.space()
	if p.i < len(p.b) && p.b[p.i] == '}' {
		p.i++
		return v, nil
	}
	for {
		if p.err != nil {
			return nil, p.err
		}
		if p.i >= len(p.b) || (p.b[p.i] != '"' && p.b[p.i] != '\'') {
			return nil, p.errf("want an object key")
		}
		k, err := p.str()
		if err != nil {
			return nil, err
		}
		// json-c keeps names as C strings: "0\u0000x" names "0".
		if i := strings.IndexByte(k, 0); i >= 0 {
			k = k[:i]
		}
		p.space()
		if p.err != nil {
			return nil, p.err
		}
		if p.i >= len(p.b) || p.b[p.i] != ':' {
			return nil, p.errf("want ':' after key %q", k)
		}
		p.i++
		p.space()
		e, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		// A repeated key: the last value, in the first's place.
		if i, ok := pos[k]; ok {
			v.obj[i].val = e
		} else {
			pos[k] = len(v.obj)
			v.obj = append(v.obj, jmember{k, e})
		}
		p.space()
		if p.err != nil {
			return nil, p.err
		}
		if p.i >= len(p.b) {
			return nil, p.errf("unterminated object")
		}
		switch p.b[p.i] {
		case ',':
			p.i++
			p.space()
			if p.i < len(p.b) && p.b[p.i] == '}' { // a trailing comma
				p.i++
				return v, nil
			}
		case '}':
			p.i++
			return v, nil
		default:
			return nil, p.errf("want ',' or '}' in object")
		}
	}
}

func (p *jparser) array(depth int) (*jvalue, error) {
	v := &jvalue{kind: jArray, arr: []*jvalue{}}
	p.i++ // [
	p.space()
	if p.i < len(p.b) && p.b[p.i] == ']' {
		p.i++
		return v, nil
	}
	for {
		e, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		v.arr = append(v.arr, e)
		p.space()
		if p.err != nil {
			return nil, p.err
		}
		if p.i >= len(p.b) {
			return nil, p.errf("unterminated array")
		}
		switch p.b[p.i] {
		case ',':
			p.i++
			p.space()
			if p.i < len(p.b) && p.b[p.i] == ']' { // a trailing comma
				p.i++
				return v, nil
			}
		case ']':
			p.i++
			return v, nil
		default:
			return nil, p.errf("want ',' or ']' in array")
		}
	}
}

// number reads a number as json-c does: digits with at most one '.' and
// one exponent, a '-' only first or right after '.' or the exponent mark,
// a '+' only after those; trailing exponent marks and signs are dropped.
// A number without '.' or exponent is an integer (json_type_int): beyond
// 64 bits it saturates. Its text is kept canonical (json-c writes integers
// from their value); a double keeps the text it was written with, as
// json-c keeps it.
func (p *jparser) number(depth int) (*jvalue, error) {
	start := p.i
	isDouble, isExp := false, false
	negOK, posOK := true, false
	for p.i < len(p.b) {
		c := p.b[p.i]
		ok := c >= '0' && c <= '9' || !isExp && (c == 'e' || c == 'E') ||
			negOK && c == '-' || posOK && c == '+' || !isDouble && c == '.'
		if !ok {
			break
		}
		negOK, posOK = false, false
		switch c {
		case '.':
			isDouble, negOK, posOK = true, true, true
		case 'e', 'E':
			isExp, isDouble, negOK, posOK = true, true, true, true
		}
		p.i++
	}
	if p.i < len(p.b) && depth > 1 {
		switch p.b[p.i] {
		case ',', ']', '}', '/', ' ', '\t', '\n', '\r':
		default:
			return nil, p.errf("malformed number")
		}
	}
	text := string(p.b[start:p.i])
	if isDouble {
		for len(text) > 1 && strings.ContainsRune("eE+-", rune(text[len(text)-1])) {
			text = text[:len(text)-1]
		}
		if !strtodWhole(text) {
			return nil, p.errf("malformed number %q", text)
		}
		return &jvalue{kind: jNumber, dbl: true, s: text}, nil
	}
	if text == "-" || text == "" {
		return nil, p.errf("malformed number")
	}
	if text[0] == '-' {
		n, err := strconv.ParseInt(text, 10, 64)
		if err != nil {
			n = math.MinInt64 // strtoll saturates
		}
		return &jvalue{kind: jNumber, s: strconv.FormatInt(n, 10)}, nil
	}
	n, err := strconv.ParseUint(text, 10, 64)
	if err != nil {
		n = math.MaxUint64 // strtoull saturates
	}
	return &jvalue{kind: jNumber, s: strconv.FormatUint(n, 10)}, nil
}

// strtodWhole reports whether strtod consumes all of s, which json-c
// requires of a double: an optional '-', digits with at most one '.' and
// at least one digit, then an optional exponent with one optional sign.
func strtodWhole(s string) bool {
	digits := func(x string) bool { return strings.Trim(x, "0123456789") == "" }
	mant, exp, hasExp := strings.Cut(strings.ToLower(strings.TrimPrefix(s, "-")), "e")
	if hasExp {
		if len(exp) > 0 && (exp[0] == '+' || exp[0] == '-') {
			exp = exp[1:]
		}
		if exp == "" || !digits(exp) {
			return false
		}
	}
	whole, frac, _ := strings.Cut(mant, ".")
	return whole+frac != "" && digits(whole) && digits(frac)
}

// str reads a string quoted with " or ' (json-c takes both). Raw bytes
// go in as they are, control bytes and invalid UTF-8 included, as json-c
// keeps them.
func (p *jparser) str() (string, error) {
	quote := p.b[p.i]
	p.i++
	var sb strings.Builder
	for {
		if p.i >= len(p.b) {
			return "", p.errf("unterminated string")
		}
		c := p.b[p.i]
		switch {
		case c == quote:
			p.i++
			return sb.String(), nil
		case c != '\\':
			sb.WriteByte(c)
			p.i++
			continue
		}
		p.i++
		if p.i >= len(p.b) {
			return "", p.errf("unterminated escape")
		}
		e := p.b[p.i]
		p.i++
		switch e {
		case '"', '\\', '/':
			sb.WriteByte(e)
		case 'b':
			sb.WriteByte('\b')
		case 'f':
			sb.WriteByte('\f')
		case 'n':
			sb.WriteByte('\n')
		case 'r':
			sb.WriteByte('\r')
		case 't':
			sb.WriteByte('\t')
		case 'u':
			r, err := p.hex4()
			if err != nil {
				return "", err
			}
			switch {
			case utf16.IsSurrogate(r) && r < 0xdc00:
				// A high surrogate takes a low one that follows; alone,
				// it is U+FFFD and what follows is read on its own.
				if p.i+6 <= len(p.b) && p.b[p.i] == '\\' && p.b[p.i+1] == 'u' {
					save := p.i
					p.i += 2
					r2, err := p.hex4()
					if err == nil && r2 >= 0xdc00 && r2 <= 0xdfff {
						sb.WriteRune(utf16.DecodeRune(r, r2))
						continue
					}
					p.i = save
				}
				sb.WriteRune(utf8.RuneError)
			case utf16.IsSurrogate(r):
				sb.WriteRune(utf8.RuneError)
			default:
				sb.WriteRune(r)
			}
		default:
			return "", p.errf("unknown escape \\%c", e)
		}
	}
}

func (p *jparser) hex4() (rune, error) {
	if p.i+4 > len(p.b) {
		return 0, p.errf("short \\u escape")
	}
	n, err := strconv.ParseUint(string(p.b[p.i:p.i+4]), 16, 16)
	if err != nil || strings.ContainsAny(string(p.b[p.i:p.i+4]), "+-") {
		return 0, p.errf("malformed \\u escape")
	}
	p.i += 4
	return rune(n), nil
}

// marshal writes v as json-c does with JSON_C_TO_STRING_PLAIN |
// JSON_C_TO_STRING_NOSLASHESCAPE: no white space, numbers as written,
// strings with only ", \, and control bytes escaped.
func (v *jvalue) marshal() []byte {
	var b []byte
	return v.appendTo(b)
}

func (v *jvalue) appendTo(b []byte) []byte {
	switch v.kind {
	case jNull:
		return append(b, "null"...)
	case jBool:
		return strconv.AppendBool(b, v.b)
	case jNumber:
		return append(b, v.s...)
	case jString:
		return appendJSONString(b, v.s)
	case jArray:
		b = append(b, '[')
		for i, e := range v.arr {
			if i > 0 {
				b = append(b, ',')
			}
			b = e.appendTo(b)
		}
		return append(b, ']')
	case jObject:
		b = append(b, '{')
		for i, m := range v.obj {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, m.key)
			b = append(b, ':')
			b = m.val.appendTo(b)
		}
		return append(b, '}')
	}
	panic("luks: unknown JSON kind")
}

func appendJSONString(b []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\b':
			b = append(b, '\\', 'b')
		case '\f':
			b = append(b, '\\', 'f')
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			if c < 0x20 {
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&15])
			} else {
				b = append(b, c)
			}
		}
	}
	return append(b, '"')
}

// Accessors with json-c's semantics, for what cryptsetup reads without
// checking its type first (a keyslot's priority, a digest's iterations):
// the same header must mean the same thing here.

// cs is a string value as C code sees it: up to its first NUL (json-c
// keeps a "\u0000" in the string; strcmp, strtoull and strlen stop there).
func (v *jvalue) cs() string {
	if i := strings.IndexByte(v.s, 0); i >= 0 {
		return v.s[:i]
	}
	return v.s
}

// isInt reports whether v is a json_type_int: a number without '.' or
// exponent.
func (v *jvalue) isInt() bool { return v != nil && v.kind == jNumber && !v.dbl }

// int64Value is json_object_get_int64: an integer saturated to int64, a
// double truncated, a string's leading decimal number, a boolean as 0 or
// 1, anything else 0.
func (v *jvalue) int64Value() int64 {
	if v == nil {
		return 0
	}
	switch v.kind {
	case jNumber:
		if !v.dbl {
			if n, err := strconv.ParseInt(v.s, 10, 64); err == nil {
				return n
			}
			return math.MaxInt64 // an integer above int64 (json-c keeps it as uint64)
		}
		f := parseDouble(v.s)
		switch {
		case math.IsNaN(f):
			return 0
		case f >= math.MaxInt64:
			return math.MaxInt64
		case f <= math.MinInt64:
			return math.MinInt64
		}
		return int64(f)
	case jBool:
		if v.b {
			return 1
		}
	case jString:
		n, _ := strtoll(v.cs())
		return n
	}
	return 0
}

// intValue is json_object_get_int: int64Value clamped to int32.
func (v *jvalue) intValue() int32 {
	return int32(max(min(v.int64Value(), math.MaxInt32), math.MinInt32))
}

// stringValue is json_object_get_string as C sees it: a string's value up
// to its first NUL, or the JSON text of anything else.
func (v *jvalue) stringValue() string {
	if v == nil {
		return ""
	}
	if v.kind == jString {
		return v.cs()
	}
	return string(v.marshal())
}

func parseDouble(s string) float64 {
	switch s {
	case "NaN":
		return math.NaN()
	case "Infinity":
		return math.Inf(1)
	case "-Infinity":
		return math.Inf(-1)
	}
	f, _ := strconv.ParseFloat(s, 64) // ErrRange gives ±Inf or 0, as strtod
	return f
}

// cSpace is C's isspace in the C locale, which strtoll and strtoull skip.
func cSpace(c byte) bool { return c == ' ' || c >= '\t' && c <= '\r' }

// strtoll is C's strtoll in base 10 on a whole C string: leading white
// space and one sign skipped, then digits, saturated on overflow. ok is
// false without any digit.
func strtoll(s string) (n int64, ok bool) {
	u, neg, ok := strtoDigits(s)
	if !ok {
		return 0, false
	}
	switch {
	case !neg && u > math.MaxInt64:
		return math.MaxInt64, true
	case neg && u > 1<<63:
		return math.MinInt64, true
	case neg:
		return int64(-u), true // -(1<<63) wraps to MinInt64
	}
	return int64(u), true
}

// strtoDigits reads what strtol and strtoull share: white space, a sign,
// digits (the magnitude saturates at 2^64-1).
func strtoDigits(s string) (u uint64, neg bool, ok bool) {
	i := 0
	for i < len(s) && cSpace(s[i]) {
		i++
	}
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	j := i
	for j < len(s) && s[j] >= '0' && s[j] <= '9' {
		j++
	}
	if j == i {
		return 0, false, false
	}
	u, err := strconv.ParseUint(s[i:j], 10, 64)
	if err != nil {
		u = math.MaxUint64
	}
	return u, neg, true
}

// strToUint64 is cryptsetup's json_str_to_uint64: strtoull over the whole
// C string, refused on overflow or anything after the digits. strtoull
// takes leading white space and a sign ("-1" is 2^64-1), so do we.
func strToUint64(s string) (uint64, bool) {
	if i := strings.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	i := 0
	for i < len(s) && cSpace(s[i]) {
		i++
	}
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	j := i
	for j < len(s) && s[j] >= '0' && s[j] <= '9' {
		j++
	}
	if j == i || j != len(s) {
		return 0, false
	}
	u, err := strconv.ParseUint(s[i:j], 10, 64)
	if err != nil {
		return 0, false // ERANGE
	}
	if neg {
		u = -u
	}
	return u, true
}

// numbered is cryptsetup's check of object names and number strings: only
// decimal digits (the empty string passes, as in cryptsetup).
func numbered(s string) bool {
	if i := strings.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	return strings.Trim(s, "0123456789") == ""
}

// atoi is C's atoi on an object name, as cryptsetup numbers keyslots,
// digests, segments and tokens: strtol saturated to 64 bits, then cut to
// a 32-bit int.
func atoi(s string) int {
	u, neg, ok := strtoDigits(s)
	if !ok {
		return 0
	}
	var n int64
	switch {
	case !neg && u > math.MaxInt64:
		n = math.MaxInt64
	case neg && u > 1<<63:
		n = math.MinInt64
	case neg:
		n = int64(-u)
	default:
		n = int64(u)
	}
	return int(int32(n))
}

// nameOf is the object name cryptsetup looks an ID up by ("%u").
func nameOf(id int) string { return strconv.FormatUint(uint64(uint32(id)), 10) }
