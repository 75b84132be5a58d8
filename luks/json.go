package luks

import (
	"errors"
	"fmt"
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
	s    string // string value, or a number's text as written
	arr  []*jvalue
	obj  []jmember
}

type jmember struct {
	key string
	val *jvalue
}

// maxJSONDepth bounds nesting; LUKS2 metadata needs 4 levels, tokens a few more.
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

// parseJSON parses exactly one JSON value filling all of b (no trailing
// bytes, not even white space: cryptsetup requires NULs right after the
// object). Duplicate object keys are refused: json-c keeps the last one,
// and a header that means different things to different readers is not one
// to act on.
func parseJSON(b []byte) (*jvalue, error) {
	p := jparser{b: b}
	p.space()
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	if p.i != len(b) {
		return nil, fmt.Errorf("json: unexpected byte %q after the value at offset %d", b[p.i], p.i)
	}
	return v, nil
}

type jparser struct {
	b []byte
	i int
}

func (p *jparser) errf(format string, a ...any) error {
	return fmt.Errorf("json: offset %d: %s", p.i, fmt.Sprintf(format, a...))
}

func (p *jparser) space() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *jparser) value(depth int) (*jvalue, error) {
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
	case c == '"':
		s, err := p.str()
		if err != nil {
			return nil, err
		}
		return jstr(s), nil
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	case p.lit("true"):
		return &jvalue{kind: jBool, b: true}, nil
	case p.lit("false"):
		return &jvalue{kind: jBool}, nil
	case p.lit("null"):
		return &jvalue{kind: jNull}, nil
	}
	return nil, p.errf("unexpected byte %q", p.b[p.i])
}

func (p *jparser) lit(word string) bool {
	if strings.HasPrefix(string(p.b[p.i:min(len(p.b), p.i+len(word))]), word) {
		p.i += len(word)
		return true
	}
	return false
}

func (p *jparser) object(depth int) (*jvalue, error) {
	v := &jvalue{kind: jObject, obj: []jmember{}}
	p.i++ // {
	p.space()
	if p.i < len(p.b) && p.b[p.i] == '}' {
		p.i++
		return v, nil
	}
	seen := map[string]bool{}
	for {
		p.space()
		if p.i >= len(p.b) || p.b[p.i] != '"' {
			return nil, p.errf("want an object key")
		}
		k, err := p.str()
		if err != nil {
			return nil, err
		}
		if seen[k] {
			return nil, p.errf("duplicate key %q", k)
		}
		seen[k] = true
		p.space()
		if p.i >= len(p.b) || p.b[p.i] != ':' {
			return nil, p.errf("want ':' after key %q", k)
		}
		p.i++
		p.space()
		e, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		v.obj = append(v.obj, jmember{k, e})
		p.space()
		if p.i >= len(p.b) {
			return nil, p.errf("unterminated object")
		}
		switch p.b[p.i] {
		case ',':
			p.i++
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
		p.space()
		e, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		v.arr = append(v.arr, e)
		p.space()
		if p.i >= len(p.b) {
			return nil, p.errf("unterminated array")
		}
		switch p.b[p.i] {
		case ',':
			p.i++
		case ']':
			p.i++
			return v, nil
		default:
			return nil, p.errf("want ',' or ']' in array")
		}
	}
}

// number accepts the RFC 8259 grammar and keeps the text; only the fields
// that need a number interpret it (as a non-negative integer).
func (p *jparser) number() (*jvalue, error) {
	start := p.i
	digits := func() int {
		n := 0
		for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	if p.b[p.i] == '-' {
		p.i++
	}
	intStart := p.i
	if digits() == 0 {
		return nil, p.errf("malformed number")
	}
	if p.b[intStart] == '0' && p.i-intStart > 1 {
		return nil, p.errf("number with a leading zero")
	}
	if p.i < len(p.b) && p.b[p.i] == '.' {
		p.i++
		if digits() == 0 {
			return nil, p.errf("malformed number")
		}
	}
	if p.i < len(p.b) && (p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		p.i++
		if p.i < len(p.b) && (p.b[p.i] == '+' || p.b[p.i] == '-') {
			p.i++
		}
		if digits() == 0 {
			return nil, p.errf("malformed number")
		}
	}
	return &jvalue{kind: jNumber, s: string(p.b[start:p.i])}, nil
}

func (p *jparser) str() (string, error) {
	p.i++ // "
	var sb strings.Builder
	for {
		if p.i >= len(p.b) {
			return "", p.errf("unterminated string")
		}
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			return sb.String(), nil
		case c < 0x20:
			return "", p.errf("control byte 0x%02x in a string", c)
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
			if utf16.IsSurrogate(r) {
				// A high surrogate must be followed by a low one.
				if p.i+1 < len(p.b) && p.b[p.i] == '\\' && p.b[p.i+1] == 'u' {
					p.i += 2
					r2, err := p.hex4()
					if err != nil {
						return "", err
					}
					if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
						sb.WriteRune(d)
						continue
					}
				}
				return "", p.errf("unpaired UTF-16 surrogate")
			}
			sb.WriteRune(r)
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
	if err != nil {
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

// Typed accessors for the metadata fields. Each names the field in its
// error so a bad header says what is wrong with it.

var errJSONMissing = errors.New("missing")

func jfield(v *jvalue, path, key string, kind jkind) (*jvalue, error) {
	f := v.get(key)
	if f == nil {
		return nil, fmt.Errorf("%s.%s: %w", path, key, errJSONMissing)
	}
	if f.kind != kind {
		return nil, fmt.Errorf("%s.%s: %s, want %s", path, key, f.kind, kind)
	}
	return f, nil
}

func jgetString(v *jvalue, path, key string) (string, error) {
	f, err := jfield(v, path, key, jString)
	if err != nil {
		return "", err
	}
	return f.s, nil
}

// jgetUint reads a JSON integer (cryptsetup's json_type_int), at most max.
func jgetUint(v *jvalue, path, key string, max uint64) (uint64, error) {
	f, err := jfield(v, path, key, jNumber)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseUint(f.s, 10, 64)
	if err != nil || n > max {
		return 0, fmt.Errorf("%s.%s: %q is not an integer in 0..%d", path, key, f.s, max)
	}
	return n, nil
}

// jgetDecimal reads a decimal string (how LUKS2 writes 64-bit offsets and
// sizes). Only digits are accepted; strtoull's sign and white space are not.
func jgetDecimal(v *jvalue, path, key string) (uint64, error) {
	s, err := jgetString(v, path, key)
	if err != nil {
		return 0, err
	}
	return parseDecimal(s, path+"."+key)
}

func parseDecimal(s, what string) (uint64, error) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("%s: %q is not a decimal number", what, s)
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %q is out of range", what, s)
	}
	return n, nil
}

// jgetStrings reads an array of strings.
func jgetStrings(v *jvalue, path, key string) ([]string, error) {
	f, err := jfield(v, path, key, jArray)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(f.arr))
	for i, e := range f.arr {
		if e.kind != jString {
			return nil, fmt.Errorf("%s.%s[%d]: %s, want string", path, key, i, e.kind)
		}
		out = append(out, e.s)
	}
	return out, nil
}
