package luks

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func wantCorrupt(t *testing.T, err error, substr string) {
	t.Helper()
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), substr) {
		t.Fatalf("got %v, want a corrupt-header error mentioning %q", err, substr)
	}
}

// TestBoundsLUKS2: sizes, offsets and counts read from a header are
// checked against the format and the device before use, even when the
// checksum is right (anyone can recompute it). TestCryptsetupRules has
// every rule cryptsetup checks; these are the bounds that keep hostile
// numbers from being used: refused on load where cryptsetup refuses, and
// where it does not, refused before they size anything.
func TestBoundsLUKS2(t *testing.T) {
	needCryptsetup(t)
	slot := func(m *jvalue) *jvalue { return m.get("keyslots").get("0") }
	for _, c := range []struct {
		name string
		edit func(m *jvalue)
		bin  func(b []byte, secondary bool)
		want string           // the load fails naming this
		use  func(error) bool // or it loads, and unlocking fails so
	}{
		{name: "area-past-keyslots", edit: func(m *jvalue) { slot(m).get("area").set("offset", jstr("16773120")) }, want: "runs past the keyslots area"},
		{name: "area-in-header", edit: func(m *jvalue) { slot(m).get("area").set("offset", jstr("16384")) }, want: "lies in the header copies"},
		{name: "area-huge", edit: func(m *jvalue) { slot(m).get("area").set("size", jstr("18446744073709551615")) }, want: "overflow 64 bits"},
		{name: "areas-overlap", edit: func(m *jvalue) {
			s := slot(m).clone()
			s.get("area").set("offset", jstr("36864"))
			m.get("keyslots").set("1", s)
		}, want: "overlap"},
		{name: "keyslot-renamed", edit: func(m *jvalue) { m.get("keyslots").obj[0].key = "01" }, want: `names keyslot "0", which does not exist`},
		{name: "key-size", edit: func(m *jvalue) { slot(m).set("key_size", jnum(1<<20)) }, use: func(err error) bool { return errors.Is(err, ErrUnsupported) }},
		{name: "key-size-bound", edit: func(m *jvalue) {
			// A second keyslot with a huge key is refused before its split
			// key is allocated (4 GB).
			s := slot(m).clone()
			s.set("key_size", jnum(1<<20))
			s.get("area").set("offset", jstr("1048576"))
			m.get("keyslots").set("1", s)
			d := m.get("digests").get("0")
			d.set("keyslots", jarr(jstr("0"), jstr("1")))
			m.get("keyslots").obj[0], m.get("keyslots").obj[1] = m.get("keyslots").obj[1], m.get("keyslots").obj[0]
		}, use: func(err error) bool {
			return errors.Is(err, ErrCorrupt) && strings.Contains(err.Error(), "key size of 1048576 bytes")
		}},
		{name: "negative", edit: func(m *jvalue) { slot(m).get("kdf").set("iterations", &jvalue{kind: jNumber, s: "-1"}) },
			use: func(err error) bool {
				return errors.Is(err, ErrCorrupt) && strings.Contains(err.Error(), "iterations -1 out of range")
			}},
		{name: "float", edit: func(m *jvalue) { slot(m).get("kdf").set("iterations", &jvalue{kind: jNumber, dbl: true, s: "1e3"}) }, want: "iterations"},
		{name: "json-size", edit: func(m *jvalue) { m.get("config").set("json_size", jstr("16384")) }, want: "json_size"},
		{name: "keyslots-size", edit: func(m *jvalue) { m.get("config").set("keyslots_size", jstr("134221824")) }, want: "keyslots_size"},
		{name: "keyslots-past-device", edit: func(m *jvalue) {
			m.get("config").set("keyslots_size", jstr("134217728"))
			m.get("segments").get("0").set("offset", jstr("0"))
		}, want: "shorter than the two header copies and the keyslots area"},
		{name: "segment-in-keyslots", edit: func(m *jvalue) { m.get("segments").get("0").set("offset", jstr("1048576")) }, want: "does not fit between"},
		{name: "segment-unaligned", edit: func(m *jvalue) { m.get("segments").get("0").set("offset", jstr("16777217")) }, want: "multiple of 512"},
		{name: "segment-sector", edit: func(m *jvalue) { m.get("segments").get("0").set("sector_size", jnum(8192)) }, use: func(err error) bool { return errors.Is(err, ErrUnsupported) }},
		{name: "segment-size", edit: func(m *jvalue) { m.get("segments").get("0").set("size", jstr("+4096")) }, want: "decimal"},
		{name: "no-digest", edit: func(m *jvalue) { m.get("digests").get("0").set("segments", jarr()) }, want: "no digest covers"},
		{name: "digest-dangling", edit: func(m *jvalue) { m.get("digests").get("0").set("keyslots", jarr(jstr("7"))) }, want: `names keyslot "7"`},
		{name: "digest-short", edit: func(m *jvalue) { m.get("digests").get("0").set("digest", jstr("AAAA")) },
			use: func(err error) bool {
				return errors.Is(err, ErrCorrupt) && strings.Contains(err.Error(), "3-byte digest")
			}},
		{name: "missing-section", edit: func(m *jvalue) { m.del("tokens") }, want: "tokens"},
		{name: "hdr-size", bin: func(b []byte, sec bool) { binary.BigEndian.PutUint64(b[offHdrSize:], 20000) }, want: "header size"},
	} {
		t.Run(c.name, func(t *testing.T) {
			img, pass := makeLUKS2(t)
			rewriteMeta(t, img, c.edit, c.bin)
			h, err := readPath(t, img)
			if c.use != nil {
				if err != nil {
					t.Fatal(err)
				}
				f, _ := os.Open(img)
				defer f.Close()
				if _, _, err := h.Unlock(context.Background(), f, pass, UnlockOptions{}); !c.use(err) {
					t.Fatalf("Unlock: %v", err)
				}
				return
			}
			wantCorrupt(t, err, c.want)
		})
	}
}

// TestCopies: a damaged copy is reported and the other one used; with
// both good, the higher seqid wins; with none, reading fails.
func TestCopies(t *testing.T) {
	img, pass := makeLUKS2(t)
	f, _ := os.Open(img)
	defer f.Close()

	// Flip a byte of the secondary's JSON area: checksum mismatch.
	b, _ := os.ReadFile(img)
	b[16384+4096+10] ^= 1
	os.WriteFile(img, b, 0o600)
	h, err := readPath(t, img)
	if err != nil {
		t.Fatal(err)
	}
	if h.Copies[0].State != CopyOK || !h.Copies[0].Used || h.Copies[1].State != CopyDamaged ||
		!strings.Contains(h.Copies[1].Err.Error(), "checksum") {
		t.Fatalf("copies: %+v", h.Copies)
	}
	unlock(t, h, f, pass)

	// Both damaged.
	b[4096+10] ^= 1
	os.WriteFile(img, b, 0o600)
	if _, err := readPath(t, img); err == nil || errors.Is(err, ErrNotLUKS) {
		t.Fatalf("both copies damaged: %v", err)
	}

	// Repair both, then give the secondary a higher seqid and another label.
	b[4096+10] ^= 1
	b[16384+4096+10] ^= 1
	os.WriteFile(img, b, 0o600)
	rewriteMeta(t, img, nil, func(bin []byte, sec bool) {
		if sec {
			binary.BigEndian.PutUint64(bin[offSeqID:], 100)
			copy(bin[offLabel:], "newer")
		}
	})
	h, err = readPath(t, img)
	if err != nil {
		t.Fatal(err)
	}
	if h.Label != "newer" || h.SeqID != 100 || h.Copies[0].State != CopyStale || !h.Copies[1].Used {
		t.Fatalf("label %q seqid %d copies %+v", h.Label, h.SeqID, h.Copies)
	}

	// Not LUKS at all.
	zero(t, img, 0, 64<<10)
	if _, err := readPath(t, img); !errors.Is(err, ErrNotLUKS) {
		t.Fatalf("zeroed image: %v", err)
	}
}

// TestBoundsLUKS1: LUKS1 has no checksum; its offsets are bounded as
// cryptsetup bounds them.
func TestBoundsLUKS1(t *testing.T) {
	needCryptsetup(t)
	dir := t.TempDir()
	pf := writeFile(t, dir, "pass", []byte("pw"))
	img := filepath.Join(dir, "img")
	sparseFile(t, img, 4<<20)
	cs(t, "luksFormat", "--batch-mode", "--type", "luks1", "--pbkdf-force-iterations", "1000", "--key-file", pf, img)
	orig, _ := os.ReadFile(img)
	slot := func(i, field int) int { return luks1SlotBase + i*luks1SlotSize + field }
	for _, c := range []struct {
		name string
		edit func(b []byte)
		want string
	}{
		{"material-past-device", func(b []byte) {
			binary.BigEndian.PutUint32(b[slot(3, 40):], 1<<30)
			binary.BigEndian.PutUint32(b[104:], 0)
		}, "beyond"},
		{"material-in-header", func(b []byte) { binary.BigEndian.PutUint32(b[slot(0, 40):], 1) }, "overlaps the header"},
		{"material-overlap", func(b []byte) { binary.BigEndian.PutUint32(b[slot(1, 40):], 9) }, "overlaps"},
		{"material-in-data", func(b []byte) { binary.BigEndian.PutUint32(b[104:], 100) }, "runs into the data"},
		{"stripes", func(b []byte) { binary.BigEndian.PutUint32(b[slot(2, 44):], 2) }, "stripes"},
		{"key-bytes", func(b []byte) { binary.BigEndian.PutUint32(b[108:], 0) }, "key size"},
		{"slot-state", func(b []byte) { binary.BigEndian.PutUint32(b[slot(4, 0):], 7) }, "neither active"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := append([]byte(nil), orig...)
			c.edit(b)
			os.WriteFile(img, b, 0o600)
			_, err := readPath(t, img)
			wantCorrupt(t, err, c.want)
		})
	}
}

// TestKDFLimits: a keyslot whose costs are above the limits is not run;
// the error names the keyslot and the cost, and higher limits open it.
func TestKDFLimits(t *testing.T) {
	needCryptsetup(t)
	dir := t.TempDir()
	pass := []byte("limits")
	pf := writeFile(t, dir, "pass", pass)
	img := filepath.Join(dir, "img")
	sparseFile(t, img, 17<<20)
	cs(t, append([]string{"luksFormat", "--batch-mode", "--type", "luks2", "--key-file", pf, "--pbkdf", "argon2id"},
		append(csArgon2[2:], "--pbkdf-memory", "65536", img)...)...)
	f, h := openHeader(t, img)
	for _, c := range []struct {
		lim  Limits
		cost string
	}{
		{Limits{MaxMemoryKiB: 32 << 10, MaxTime: 10, MaxThreads: 4, MaxWork: 1 << 40, MaxIterations: 1 << 30}, "memory"},
		{Limits{MaxMemoryKiB: 1 << 20, MaxTime: 3, MaxThreads: 4, MaxWork: 1 << 40, MaxIterations: 1 << 30}, "time"},
		{Limits{MaxMemoryKiB: 1 << 20, MaxTime: 10, MaxThreads: 1, MaxWork: 1 << 40, MaxIterations: 1 << 30}, "threads"},
		{Limits{MaxMemoryKiB: 1 << 20, MaxTime: 10, MaxThreads: 4, MaxWork: 4*65536 - 1, MaxIterations: 1 << 30}, "work"},
		{Limits{MaxMemoryKiB: 1 << 20, MaxTime: 10, MaxThreads: 4, MaxWork: 1 << 40, MaxIterations: 999}, "iterations"},
	} {
		_, _, err := h.Unlock(context.Background(), f, pass, UnlockOptions{Limits: &c.lim})
		var ce *KDFCostError
		if !errors.As(err, &ce) || !strings.HasPrefix(ce.Cost, c.cost) || !errors.Is(err, ErrKDFCost) {
			t.Fatalf("limits %+v: %v, want a %s cost error", c.lim, err, c.cost)
		}
		if c.cost != "iterations" && (ce.Keyslot != 0 || ce.KDF != "argon2id" || !strings.Contains(err.Error(), "keyslot 0")) {
			t.Fatalf("the error does not name the keyslot and KDF: %v", err)
		}
	}
	lim := Limits{MaxMemoryKiB: 64 << 10, MaxTime: 4, MaxThreads: 2, MaxWork: 4 * 65536, MaxIterations: 1 << 30}
	if _, _, err := h.Unlock(context.Background(), f, pass, UnlockOptions{Limits: &lim}); err != nil {
		t.Fatalf("limits exactly at the costs: %v", err)
	}

	// The limits bound one Unlock, not each keyslot: with two more
	// keyslots, a passphrase of the last one is not reached if the work of
	// trying the others and it is above the limit.
	for i := 1; i <= 2; i++ {
		np := writeFile(t, dir, "p"+strconv.Itoa(i), []byte("limits "+strconv.Itoa(i)))
		cs(t, append(append([]string{"luksAddKey", "--batch-mode", "--key-file", pf}, csArgon2...), "--pbkdf-memory", "65536", img, np)...)
	}
	f, h = openHeader(t, img)
	lim.MaxWork = 3*4*65536 - 1
	_, _, err := h.Unlock(context.Background(), f, []byte("limits 2"), UnlockOptions{Limits: &lim})
	var ce *KDFCostError
	if !errors.As(err, &ce) || ce.Keyslot != 2 || ce.Spent != 2*4*65536 || !errors.Is(err, ErrWrongPassphrase) ||
		!strings.Contains(err.Error(), "spent on the keyslots tried before") {
		t.Fatalf("third keyslot over the total: %v", err)
	}
	if _, slot, err := h.Unlock(context.Background(), f, []byte("limits 2"), UnlockOptions{Limits: &lim, Keyslots: []int{2}}); err != nil || slot != 2 {
		t.Fatalf("the third keyslot picked alone: %v", err)
	}
}

// TestShortDevices: devices too short for any header read as not LUKS,
// or as a truncated header, never past their end.
func TestShortDevices(t *testing.T) {
	for _, c := range []struct {
		data string
		want error
	}{
		{"", ErrNotLUKS},
		{"hello", ErrNotLUKS},
		{strings.Repeat("x", 5000), ErrNotLUKS},
		{"LUKS\xba\xbe\x00\x01", ErrCorrupt},
		{"LUKS\xba\xbe\x00\x02", ErrCorrupt},
		{"LUKS\xba\xbe\x00\x07" + strings.Repeat("\x00", 5000), ErrUnsupported},
	} {
		_, err := ReadHeader(strings.NewReader(c.data), int64(len(c.data)))
		if !errors.Is(err, c.want) {
			t.Errorf("%q: %v, want %v", c.data[:min(len(c.data), 10)], err, c.want)
		}
	}
}

// TestLargeHeader: a 4 MiB JSON area with thousands of keyslots,
// segments, tokens and references reads, in time that grows with its size
// and not with its square (a hostile header cannot make info hang).
func TestLargeHeader(t *testing.T) {
	const hdrSize = 4 << 20
	const n = 12000
	var b strings.Builder
	b.WriteString(`{"keyslots":{`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"%d":{"type":"x","key_size":1,"area":{"type":"x","offset":"%d","size":"512"}}`, i, 2*hdrSize+512*i)
	}
	b.WriteString(`},"tokens":{`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"%d":{"type":"x","keyslots":["%d"]}`, i, n-1-i)
	}
	b.WriteString(`},"segments":{"0":{"type":"crypt","offset":"142606336","size":"4096","iv_tweak":"0","encryption":"aes-xts-plain64","sector_size":4096}`)
	for i := 1; i < n; i++ {
		size := `"512"`
		if i == n-1 {
			size = `"dynamic"`
		}
		fmt.Fprintf(&b, `,"%d":{"type":"x","offset":"%d","size":%s}`, i, 142606336+4096+512*(i-1), size)
	}
	b.WriteString(`},"digests":{"0":{"type":"x","keyslots":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"%d"`, i)
	}
	b.WriteString(`],"segments":["0"]}},"config":{"json_size":"4190208","keyslots_size":"134217728"}}`)
	if b.Len() >= hdrSize-binHeaderSize {
		t.Fatalf("%d bytes of JSON do not fit", b.Len())
	}
	area := make([]byte, hdrSize-binHeaderSize)
	copy(area, b.String())
	h, err := parseMetadata(area, hdrSize, 1<<40)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Keyslots) != n || len(h.Tokens) != n || h.Segments != n || !errors.Is(h.Supported(), ErrUnsupported) {
		t.Fatalf("%d keyslots, %d tokens, %d segments, %v", len(h.Keyslots), len(h.Tokens), h.Segments, h.Supported())
	}
	// The same with two areas overlapping, far apart in the text.
	text := strings.Replace(b.String(), fmt.Sprintf(`"offset":"%d"`, 2*hdrSize+512*(n-1)), fmt.Sprintf(`"offset":"%d"`, 2*hdrSize+100), 1)
	clear(area)
	copy(area, text)
	if _, err := parseMetadata(area, hdrSize, 1<<40); err == nil || !strings.Contains(err.Error(), "overlap") {
		t.Fatalf("overlapping areas: %v", err)
	}
}
