package devmapper

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"unsafe"
)

// The expectations below are computed by hand from the uapi header
// include/uapi/linux/dm-ioctl.h, not from the constants in ioctl.go:
//
//	struct dm_ioctl {                  offset size
//		__u32 version[3];              0      12
//		__u32 data_size;               12     4
//		__u32 data_start;              16     4
//		__u32 target_count;            20     4
//		__s32 open_count;              24     4
//		__u32 flags;                   28     4
//		__u32 event_nr;                32     4
//		__u32 padding;                 36     4
//		__u64 dev;                     40     8
//		char name[128];                48     128
//		char uuid[129];                176    129
//		char data[7];                  305    7
//	};                                 sizeof 312 (8-byte aligned already)
//
//	struct dm_target_spec {
//		__u64 sector_start;            0      8
//		__u64 length;                  8      8
//		__s32 status;                  16     4
//		__u32 next;                    20     4
//		char target_type[16];          24     16
//	};                                 sizeof 40
//
// The tests write and read little-endian: they need a little-endian host.

func requireLittleEndian(t *testing.T) {
	t.Helper()
	x := uint16(1)
	if *(*byte)(unsafe.Pointer(&x)) != 1 {
		t.Skip("byte-exact expectations are written for little-endian hosts")
	}
}

func TestIoctlNumbers(t *testing.T) {
	// _IOWR(0xfd, nr, struct dm_ioctl) = 3<<30 | 312<<16 | 0xfd<<8 | nr
	//                                 = 0xc0000000 | 0x01380000 | 0xfd00 | nr
	for _, c := range []struct {
		name string
		nr   uint8
		want uint32
	}{
		{"DM_VERSION", cmdVersion, 0xc138fd00},
		{"DM_DEV_CREATE", cmdDevCreate, 0xc138fd03},
		{"DM_DEV_REMOVE", cmdDevRemove, 0xc138fd04},
		{"DM_DEV_SUSPEND", cmdDevSuspend, 0xc138fd06},
		{"DM_DEV_STATUS", cmdDevStatus, 0xc138fd07},
		{"DM_TABLE_LOAD", cmdTableLoad, 0xc138fd09},
		{"DM_TABLE_STATUS", cmdTableStatus, 0xc138fd0c},
	} {
		if got := ioctlNumber(c.nr); got != c.want {
			t.Errorf("%s = %#x, want %#x", c.name, got, c.want)
		}
	}
}

func TestFlagValues(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want uint32
	}{
		{"DM_READONLY_FLAG", flagReadOnly, 0x1},
		{"DM_SUSPEND_FLAG", flagSuspend, 0x2},
		{"DM_STATUS_TABLE_FLAG", flagStatusTable, 0x10},
		{"DM_ACTIVE_PRESENT_FLAG", flagActivePresent, 0x20},
		{"DM_INACTIVE_PRESENT_FLAG", flagInactivePresent, 0x40},
		{"DM_BUFFER_FULL_FLAG", flagBufferFull, 0x100},
		{"DM_SECURE_DATA_FLAG", flagSecureData, 0x8000},
		{"DM_DEFERRED_REMOVE", flagDeferredRemove, 0x20000},
		// DM_UDEV_DISABLE_{DM,SUBSYSTEM,DISK,OTHER}_RULES_FLAG = 1|2|4|8,
		// shifted into the high half of the cookie.
		{"udev cookie", udevCookie, 0x000f0000},
	} {
		if c.got != c.want {
			t.Errorf("%s = %#x, want %#x", c.name, c.got, c.want)
		}
	}
}

func TestRequestHeaderBytes(t *testing.T) {
	requireLittleEndian(t)
	b := newRequest(header{
		targetCount: 0x01020304,
		openCount:   -2,
		flags:       0x8011,
		eventNr:     0x000f0000,
		dev:         0x1122334455667788,
		name:        "vol0",
		uuid:        "XTSCTL-vol0",
	}, 24)

	want := make([]byte, 312+24)
	le := binary.LittleEndian
	le.PutUint32(want[0:], 4) // version 4.0.0
	le.PutUint32(want[4:], 0)
	le.PutUint32(want[8:], 0)
	le.PutUint32(want[12:], 336) // data_size: header + payload
	le.PutUint32(want[16:], 312) // data_start: payload right after the header
	le.PutUint32(want[20:], 0x01020304)
	le.PutUint32(want[24:], 0xfffffffe) // open_count -2
	le.PutUint32(want[28:], 0x8011)
	le.PutUint32(want[32:], 0x000f0000)
	le.PutUint64(want[40:], 0x1122334455667788)
	copy(want[48:], "vol0")
	copy(want[176:], "XTSCTL-vol0")
	if !bytes.Equal(b, want) {
		t.Fatalf("request bytes differ:\n got %x\nwant %x", b, want)
	}

	// Stale bytes in a reused buffer must not survive put.
	dirty := bytes.Repeat([]byte{0xff}, 312)
	h := header{name: "a"}
	h.put(dirty)
	wantClean := make([]byte, 312)
	wantClean[48] = 'a'
	if !bytes.Equal(dirty, wantClean) {
		t.Errorf("put left stale bytes:\n got %x\nwant %x", dirty, wantClean)
	}
}

func TestParseHeader(t *testing.T) {
	requireLittleEndian(t)
	b := make([]byte, 312)
	le := binary.LittleEndian
	le.PutUint32(b[0:], 4)
	le.PutUint32(b[4:], 47)
	le.PutUint32(b[8:], 1)
	le.PutUint32(b[12:], 400)
	le.PutUint32(b[16:], 312)
	le.PutUint32(b[20:], 2)
	le.PutUint32(b[24:], 1)
	le.PutUint32(b[28:], 0x22)   // suspended, live table
	le.PutUint32(b[32:], 7)      // event number
	le.PutUint64(b[40:], 0xfe03) // 254:3
	copy(b[48:], "crypt1")
	copy(b[176:], "XTSCTL-crypt1")
	h, err := parseHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	want := header{
		version: [3]uint32{4, 47, 1}, dataSize: 400, dataStart: 312, targetCount: 2,
		openCount: 1, flags: 0x22, eventNr: 7, dev: 0xfe03, name: "crypt1", uuid: "XTSCTL-crypt1",
	}
	if h != want {
		t.Errorf("parsed %+v, want %+v", h, want)
	}
	info := infoFromHeader(h)
	if info.Major != 254 || info.Minor != 3 || !info.Suspended || !info.LiveTable || info.InactiveTable ||
		info.ReadOnly || info.OpenCount != 1 || info.TargetCount != 2 || info.EventNr != 7 || !info.Ours() {
		t.Errorf("info %+v", info)
	}

	if _, err := parseHeader(b[:311]); !errors.Is(err, errMalformed) {
		t.Errorf("311-byte reply: %v", err)
	}
	full := bytes.Clone(b)
	for i := 48; i < 176; i++ {
		full[i] = 'x'
	}
	if _, err := parseHeader(full); !errors.Is(err, errMalformed) || !strings.Contains(err.Error(), "name") {
		t.Errorf("name without NUL: %v", err)
	}
	full = bytes.Clone(b)
	for i := 176; i < 305; i++ {
		full[i] = 'x'
	}
	if _, err := parseHeader(full); !errors.Is(err, errMalformed) || !strings.Contains(err.Error(), "uuid") {
		t.Errorf("uuid without NUL: %v", err)
	}
}

func TestDecodeDev(t *testing.T) {
	// huge_encode_dev(MKDEV(major, minor)) = minor&0xff | major<<8 | (minor&~0xff)<<12
	for _, c := range []struct {
		dev          uint64
		major, minor uint32
	}{
		{0xfe00, 254, 0},
		{0xfe05, 254, 5},
		{0x10fe2c, 254, 300},     // 0x2c | 254<<8 | 0x100<<12
		{0x0700, 7, 0},           // loop0
		{0xfff00, 4095, 0},       // largest major
		{0xfff000ff, 0, 0xfffff}, // largest minor: 0xff | 0xfff00<<12
		{0xffffffff, 4095, 0xfffff},
	} {
		major, minor := decodeDev(c.dev)
		if major != c.major || minor != c.minor {
			t.Errorf("decodeDev(%#x) = %d:%d, want %d:%d", c.dev, major, minor, c.major, c.minor)
		}
	}
}

// rawParams is a loadTarget with fixed parameters.
func rawParams(start, length uint64, typ, params string) loadTarget {
	return loadTarget{
		start: start, length: length, typ: typ, paramsLen: len(params),
		appendParams: func(dst []byte) []byte { return append(dst, params...) },
	}
}

func TestTableLoadBytes(t *testing.T) {
	requireLittleEndian(t)
	// Two targets; "7:0 0" is 5 bytes + NUL = 6, so the first spec is 40+6
	// rounded up to 48 bytes; the second's 21 parameter bytes + NUL make
	// 40+22 = 62, rounded to 64.
	p1 := "7:0 0"
	p2 := "7:0 2048 with padding"
	b := newTableLoad(header{name: "two", flags: 0x8001}, []loadTarget{
		rawParams(0, 2048, "linear", p1),
		rawParams(2048, 4096, "linear", p2),
	})

	want := make([]byte, 312+48+64)
	le := binary.LittleEndian
	le.PutUint32(want[0:], 4)
	le.PutUint32(want[12:], 424)
	le.PutUint32(want[16:], 312)
	le.PutUint32(want[20:], 2) // target_count
	le.PutUint32(want[28:], 0x8001)
	copy(want[48:], "two")
	s := want[312:]
	le.PutUint64(s[0:], 0)
	le.PutUint64(s[8:], 2048)
	le.PutUint32(s[20:], 48) // next: from this spec to the next
	copy(s[24:], "linear")
	copy(s[40:], p1)
	s = want[312+48:]
	le.PutUint64(s[0:], 2048)
	le.PutUint64(s[8:], 4096)
	le.PutUint32(s[20:], 64)
	copy(s[24:], "linear")
	copy(s[40:], p2)
	if !bytes.Equal(b, want) {
		t.Fatalf("table load bytes differ:\n got %x\nwant %x", b, want)
	}
}

func TestTableLoadCryptBytes(t *testing.T) {
	requireLittleEndian(t)
	key := make([]byte, 32)
	for i := range key {
		key[i] = byte(i)
	}
	ct := &CryptTable{Key: key, Device: "7:0", Length: 8}
	params := "aes-xts-plain64 000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f 0 7:0 0"
	// 16+64+1+2+4+1 = 88 parameter bytes, + NUL = 89, + 40 = 129 -> 136.
	if len(params) != 88 {
		t.Fatalf("test expectation: %d parameter bytes", len(params))
	}
	b := newTableLoad(header{name: "c", flags: 0x8000}, []loadTarget{cryptTarget(ct)})
	want := make([]byte, 312+136)
	le := binary.LittleEndian
	le.PutUint32(want[0:], 4)
	le.PutUint32(want[12:], 448)
	le.PutUint32(want[16:], 312)
	le.PutUint32(want[20:], 1)
	le.PutUint32(want[28:], 0x8000)
	want[48] = 'c'
	s := want[312:]
	le.PutUint64(s[8:], 8)
	le.PutUint32(s[20:], 136)
	copy(s[24:], "crypt")
	copy(s[40:], params)
	if !bytes.Equal(b, want) {
		t.Fatalf("crypt table load bytes differ:\n got %x\nwant %x", b, want)
	}
}

func TestTableLoadPanicsOnLengthMismatch(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.HasPrefix(r.(string), "devmapper: ") {
			t.Errorf("recovered %v, want a devmapper: panic", r)
		}
	}()
	bad := rawParams(0, 1, "linear", "abc")
	bad.paramsLen = 2
	newTableLoad(header{name: "x"}, []loadTarget{bad})
}

// statusReply builds a DM_TABLE_STATUS reply by hand: specs from offset 312,
// each next counted from the first spec, as the kernel's retrieve_status
// writes them.
type replyTarget struct {
	start, length uint64
	typ, params   string
}

func statusReply(targets []replyTarget, pad int) []byte {
	le := binary.LittleEndian
	b := make([]byte, 312, 4096)
	le.PutUint32(b[0:], 4)
	le.PutUint32(b[16:], 312)
	le.PutUint32(b[20:], uint32(len(targets)))
	copy(b[48:], "dev")
	for _, tg := range targets {
		spec := make([]byte, 40)
		le.PutUint64(spec[0:], tg.start)
		le.PutUint64(spec[8:], tg.length)
		copy(spec[24:], tg.typ)
		b = append(b, spec...)
		specAt := len(b) - 40
		b = append(b, tg.params...)
		b = append(b, 0)
		for len(b)%8 != 0 {
			b = append(b, 0)
		}
		le.PutUint32(b[specAt+20:], uint32(len(b)-312))
	}
	le.PutUint32(b[12:], uint32(len(b)))
	return append(b, make([]byte, pad)...)
}

func TestParseTargets(t *testing.T) {
	requireLittleEndian(t)
	in := []replyTarget{
		{0, 2048, "linear", "7:0 0"},
		{2048, 8192, "crypt", "aes-xts-plain64 " + strings.Repeat("0", 128) + " 16 7:1 8 2 sector_size:4096 iv_large_sectors"},
		{10240, 8, "zero", ""},
		{10248, 16, "error", "x"},
	}
	b := statusReply(in, 100)
	h, err := parseHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	got, err := parseTargets(b, h)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(in) {
		t.Fatalf("parsed %d targets, want %d", len(got), len(in))
	}
	for i, g := range got {
		w := in[i]
		if g.start != w.start || g.length != w.length || g.typ != w.typ || string(g.params) != w.params {
			t.Errorf("target %d = {%d %d %q %q}, want %+v", i, g.start, g.length, g.typ, g.params, w)
		}
	}
	// params alias the reply buffer, so masking can happen in place.
	if p := got[1].params; &p[0] != &b[312+48+40] {
		t.Error("crypt parameters do not alias the reply buffer")
	}
}

func TestParseTargetsMalformed(t *testing.T) {
	requireLittleEndian(t)
	le := binary.LittleEndian
	good := func() []byte {
		return statusReply([]replyTarget{{0, 8, "linear", "7:0 0"}, {8, 8, "linear", "7:0 8"}}, 0)
	}
	for _, c := range []struct {
		name string
		edit func(b []byte) []byte
	}{
		{"data_size past the buffer", func(b []byte) []byte { le.PutUint32(b[12:], uint32(len(b)+1)); return b }},
		{"data_start inside the header", func(b []byte) []byte { le.PutUint32(b[16:], 300); return b }},
		{"more targets than fit", func(b []byte) []byte { le.PutUint32(b[20:], 1000); return b }},
		{"next points back", func(b []byte) []byte { le.PutUint32(b[312+20:], 0); return b }},
		{"next points past the end", func(b []byte) []byte { le.PutUint32(b[312+20:], 4000); return b }},
		{"unterminated type", func(b []byte) []byte { copy(b[312+24:312+40], "0123456789abcdef"); return b }},
		{"unterminated params", func(b []byte) []byte {
			n := len(b)
			for i := n - 16; i < n; i++ {
				b[i] = 'x'
			}
			return b
		}},
		{"truncated spec", func(b []byte) []byte {
			le.PutUint32(b[12:], 312+48+20)
			return b[:312+48+20]
		}},
	} {
		b := c.edit(good())
		h, err := parseHeader(b)
		if err != nil {
			t.Fatalf("%s: header: %v", c.name, err)
		}
		if _, err := parseTargets(b, h); !errors.Is(err, errMalformed) {
			t.Errorf("%s: got %v, want errMalformed", c.name, err)
		}
	}
	// The unedited reply parses: the cases above fail for their edit.
	b := good()
	h, _ := parseHeader(b)
	if _, err := parseTargets(b, h); err != nil {
		t.Errorf("unedited reply: %v", err)
	}
}
