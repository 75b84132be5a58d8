package fvault2

import (
	"bytes"
	"encoding/base64"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// CoreStorage keeps its descriptions as XML plists in IOKit's dialect: a
// bare <dict> (no <plist> wrapper), values with ID="n" attributes, and
// <reference IDREF="n"/> standing for a value written earlier.
// <integer size="32">0x10</integer> is hexadecimal. parsePlist reads that
// dialect (and the <plist> wrapper, should one appear) with encoding/xml,
// bounded: the input, the nesting, the number of values.

const (
	maxPlistBytes  = 64 << 10 // a plist comes from one 8 KiB block or the label's bounded XML
	maxPlistDepth  = 32
	maxPlistValues = 4096
)

type plistKind int

const (
	plDict plistKind = iota
	plArray
	plString
	plInteger
	plData
	plBool
	plRef
)

var plistKindNames = [...]string{"dict", "array", "string", "integer", "data", "bool", "reference"}

func (k plistKind) String() string { return plistKindNames[k] }

// plistValue is one value. A reference (plRef) holds the ID it stands
// for; plist.resolve follows it.
type plistValue struct {
	kind  plistKind
	str   string // string; ID of a reference
	num   uint64 // integer
	data  []byte // data
	bool  bool
	keys  []string      // dict, in order
	vals  []*plistValue // dict values, by keys
	items []*plistValue // array
}

// plist is a parsed document: its root and the values by ID.
type plist struct {
	root *plistValue
	ids  map[string]*plistValue
}

type plistParser struct {
	d      *xml.Decoder
	ids    map[string]*plistValue
	refs   []string
	values int
}

// parsePlist parses b. Errors name what is wrong, never with the data.
func parsePlist(b []byte) (*plist, error) {
	if len(b) > maxPlistBytes {
		return nil, fmt.Errorf("plist of %d bytes (at most %d)", len(b), maxPlistBytes)
	}
	p := &plistParser{d: xml.NewDecoder(bytes.NewReader(b)), ids: map[string]*plistValue{}}
	p.d.Strict = true
	start, err := p.nextStart(true)
	if err != nil {
		return nil, err
	}
	if start == nil {
		return nil, errors.New("plist: empty")
	}
	var root *plistValue
	if start.Name.Local == "plist" {
		inner, err := p.nextStart(false)
		if err != nil {
			return nil, err
		}
		if inner == nil {
			return nil, errors.New("plist: <plist> holds no value")
		}
		if root, err = p.value(*inner, 1); err != nil {
			return nil, err
		}
		if err := p.end("plist"); err != nil {
			return nil, err
		}
	} else if root, err = p.value(*start, 0); err != nil {
		return nil, err
	}
	// Nothing but whitespace, comments or processing instructions after
	// the root.
	if extra, err := p.nextStart(true); err != nil || extra != nil {
		if err == nil {
			err = fmt.Errorf("plist: <%s> after the root value", extra.Name.Local)
		}
		return nil, err
	}
	if root.kind == plRef {
		return nil, errors.New("plist: the root is a reference")
	}
	for _, id := range p.refs {
		if p.ids[id] == nil {
			return nil, fmt.Errorf("plist: reference to ID %q, which no value has", id)
		}
	}
	return &plist{root: root, ids: p.ids}, nil
}

// nextStart returns the next start element, skipping whitespace,
// comments, processing instructions and directives; nil at the end of
// the input if eofOK. An end element is an error: callers want a value.
func (p *plistParser) nextStart(eofOK bool) (*xml.StartElement, error) {
	for {
		tok, err := p.d.Token()
		if err == io.EOF {
			if eofOK {
				return nil, nil
			}
			return nil, errors.New("plist: ends early")
		}
		if err != nil {
			return nil, fmt.Errorf("plist: %w", err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			return &t, nil
		case xml.EndElement:
			return nil, fmt.Errorf("plist: unexpected </%s>", t.Name.Local)
		case xml.CharData:
			if len(bytes.TrimSpace(t)) != 0 {
				return nil, errors.New("plist: text outside an element")
			}
		}
	}
}

// end consumes whitespace and the end element name.
func (p *plistParser) end(name string) error {
	for {
		tok, err := p.d.Token()
		if err != nil {
			return fmt.Errorf("plist: unclosed <%s>", name)
		}
		switch t := tok.(type) {
		case xml.EndElement:
			if t.Name.Local != name {
				return fmt.Errorf("plist: </%s> closes <%s>", t.Name.Local, name)
			}
			return nil
		case xml.StartElement:
			return fmt.Errorf("plist: <%s> inside <%s>", t.Name.Local, name)
		case xml.CharData:
			if len(bytes.TrimSpace(t)) != 0 {
				return fmt.Errorf("plist: text after the value in <%s>", name)
			}
		}
	}
}

// text reads the character data of a leaf element up to its end.
func (p *plistParser) text(name string) (string, error) {
	var sb strings.Builder
	for {
		tok, err := p.d.Token()
		if err != nil {
			return "", fmt.Errorf("plist: unclosed <%s>", name)
		}
		switch t := tok.(type) {
		case xml.CharData:
			sb.Write(t)
		case xml.EndElement:
			return sb.String(), nil
		case xml.StartElement:
			return "", fmt.Errorf("plist: <%s> inside <%s>", t.Name.Local, name)
		}
	}
}

func attr(se xml.StartElement, name string) (string, bool) {
	for _, a := range se.Attr {
		if a.Name.Local == name {
			return a.Value, true
		}
	}
	return "", false
}

// value parses the value that se starts, depth levels deep.
func (p *plistParser) value(se xml.StartElement, depth int) (*plistValue, error) {
	if depth > maxPlistDepth {
		return nil, fmt.Errorf("plist: nested more than %d deep", maxPlistDepth)
	}
	if p.values++; p.values > maxPlistValues {
		return nil, fmt.Errorf("plist: more than %d values", maxPlistValues)
	}
	name := se.Name.Local
	v := &plistValue{}
	switch name {
	case "dict":
		v.kind = plDict
		for {
			k, err := p.nextKeyOrEnd(name)
			if err != nil {
				return nil, err
			}
			if k == nil {
				break
			}
			ve, err := p.nextStart(false)
			if err != nil {
				return nil, err
			}
			val, err := p.value(*ve, depth+1)
			if err != nil {
				return nil, err
			}
			v.keys = append(v.keys, *k)
			v.vals = append(v.vals, val)
		}
	case "array", "set":
		v.kind = plArray
		for {
			ie, err := p.nextStartOrEnd(name)
			if err != nil {
				return nil, err
			}
			if ie == nil {
				break
			}
			item, err := p.value(*ie, depth+1)
			if err != nil {
				return nil, err
			}
			v.items = append(v.items, item)
		}
	case "string", "date", "real":
		s, err := p.text(name)
		if err != nil {
			return nil, err
		}
		v.kind, v.str = plString, s
	case "integer":
		s, err := p.text(name)
		if err != nil {
			return nil, err
		}
		n, err := parsePlistInteger(strings.TrimSpace(s))
		if err != nil {
			return nil, err
		}
		if size, ok := attr(se, "size"); ok {
			bits, err := strconv.Atoi(size)
			if err != nil || bits <= 0 || bits > 64 || bits%8 != 0 {
				return nil, fmt.Errorf("plist: integer of size %q", size)
			}
			if bits < 64 && n>>uint(bits) != 0 {
				return nil, fmt.Errorf("plist: integer too large for %d bits", bits)
			}
		}
		v.kind, v.num = plInteger, n
	case "data":
		s, err := p.text(name)
		if err != nil {
			return nil, err
		}
		d, err := decodeBase64(s)
		if err != nil {
			return nil, err
		}
		v.kind, v.data = plData, d
	case "true", "false":
		if err := p.end(name); err != nil {
			return nil, err
		}
		v.kind, v.bool = plBool, name == "true"
	case "reference":
		id, ok := attr(se, "IDREF")
		if !ok {
			return nil, errors.New("plist: <reference> without IDREF")
		}
		if err := p.end(name); err != nil {
			return nil, err
		}
		v.kind, v.str = plRef, id
		p.refs = append(p.refs, id)
		// A reference never carries an ID of its own: references to
		// references cannot chain.
		return v, nil
	default:
		return nil, fmt.Errorf("plist: unknown element <%s>", name)
	}
	if id, ok := attr(se, "ID"); ok {
		if p.ids[id] != nil {
			return nil, fmt.Errorf("plist: ID %q given twice", id)
		}
		p.ids[id] = v
	}
	return v, nil
}

// nextKeyOrEnd reads a dict's next <key>, or its end (nil).
func (p *plistParser) nextKeyOrEnd(dict string) (*string, error) {
	se, err := p.nextStartOrEnd(dict)
	if err != nil || se == nil {
		return nil, err
	}
	if se.Name.Local != "key" {
		return nil, fmt.Errorf("plist: <%s> where a dict key belongs", se.Name.Local)
	}
	k, err := p.text("key")
	if err != nil {
		return nil, err
	}
	return &k, nil
}

// nextStartOrEnd returns the next start element inside container, or nil
// at container's end element.
func (p *plistParser) nextStartOrEnd(container string) (*xml.StartElement, error) {
	for {
		tok, err := p.d.Token()
		if err != nil {
			return nil, fmt.Errorf("plist: unclosed <%s>", container)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			return &t, nil
		case xml.EndElement:
			if t.Name.Local != container {
				return nil, fmt.Errorf("plist: </%s> closes <%s>", t.Name.Local, container)
			}
			return nil, nil
		case xml.CharData:
			if len(bytes.TrimSpace(t)) != 0 {
				return nil, fmt.Errorf("plist: text inside <%s>", container)
			}
		}
	}
}

// parsePlistInteger reads IOKit's integers: 0x-prefixed hexadecimal, or
// decimal (never octal).
func parsePlistInteger(s string) (uint64, error) {
	var n uint64
	var err error
	if h, ok := strings.CutPrefix(s, "0x"); ok {
		n, err = strconv.ParseUint(h, 16, 64)
	} else {
		n, err = strconv.ParseUint(s, 10, 64)
	}
	if err != nil {
		return 0, errors.New("plist: malformed integer")
	}
	return n, nil
}

// decodeBase64 decodes a <data> value; whitespace (line breaks) is
// ignored. The output is never longer than the input.
func decodeBase64(s string) ([]byte, error) {
	s = strings.Map(func(r rune) rune {
		if r == ' ' || r == '\t' || r == '\n' || r == '\r' {
			return -1
		}
		return r
	}, s)
	d, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, errors.New("plist: malformed base64 in <data>")
	}
	return d, nil
}

// resolve follows a reference; other values are returned as they are.
func (p *plist) resolve(v *plistValue) *plistValue {
	if v != nil && v.kind == plRef {
		return p.ids[v.str]
	}
	return v
}

// get returns the value of key in dict d, references followed; nil if d
// is not a dict or has no such key. The first of repeated keys wins.
func (p *plist) get(d *plistValue, key string) *plistValue {
	d = p.resolve(d)
	if d == nil || d.kind != plDict {
		return nil
	}
	for i, k := range d.keys {
		if k == key {
			return p.resolve(d.vals[i])
		}
	}
	return nil
}

// getString, getInt, getData and getArray return key's value if it has
// that kind.
func (p *plist) getString(d *plistValue, key string) (string, bool) {
	v := p.get(d, key)
	if v == nil || v.kind != plString {
		return "", false
	}
	return v.str, true
}

func (p *plist) getInt(d *plistValue, key string) (uint64, bool) {
	v := p.get(d, key)
	if v == nil || v.kind != plInteger {
		return 0, false
	}
	return v.num, true
}

func (p *plist) getData(d *plistValue, key string) ([]byte, bool) {
	v := p.get(d, key)
	if v == nil || v.kind != plData {
		return nil, false
	}
	return v.data, true
}

func (p *plist) getArray(d *plistValue, key string) []*plistValue {
	v := p.get(d, key)
	if v == nil || v.kind != plArray {
		return nil
	}
	out := make([]*plistValue, 0, len(v.items))
	for _, it := range v.items {
		out = append(out, p.resolve(it))
	}
	return out
}
