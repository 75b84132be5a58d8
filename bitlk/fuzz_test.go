package bitlk

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"testing"

	"github.com/xtsctl/xtsctl/disk"
)

// The fuzzers feed the metadata parsers what an attacker who can write
// the image can put there. Nothing may panic, and nothing is allocated
// from a length read from the input: every buffer is bounded by the
// format's 64 KiB metadata area or by the input itself.

// fuzzImage places a metadata area at byte fuzzAt of an image whose
// boot sector names it as all three copies. The harness writes the
// copies' offsets and a right CRC-32 into it, so that mutations get past
// those checks to the entries.
const fuzzAt = 4096

func fuzzImage(area []byte) []byte {
	img := make([]byte, fuzzAt+len(area))
	copy(img, "\xeb\x58\x90-FVE-FS-")
	binary.LittleEndian.PutUint16(img[11:], 512)
	copy(img[infoOffset:], infoGUIDNormal[:])
	for i := range 3 {
		binary.LittleEndian.PutUint64(img[infoOffset+16+8*i:], fuzzAt)
	}
	a := img[fuzzAt:]
	copy(a, area)
	if len(a) >= blockHeaderSize {
		for i := range 3 {
			binary.LittleEndian.PutUint64(a[32+8*i:], fuzzAt)
		}
	}
	if len(a) >= 10 {
		if s := int(binary.LittleEndian.Uint16(a[8:])) * 16; s+validationHeader <= len(a) {
			binary.LittleEndian.PutUint32(a[s+4:], crc32.ChecksumIEEE(a[:s]))
		}
	}
	return img
}

// The seed corpora in testdata/fuzz hold the first 2 KiB of metadata
// copy 0 of every sample and of two crafted volumes (clear key, startup
// key and TPM protectors, AES-XTS-256; To Go with 4096-byte sectors and a
// smart card), their entries, and the startup key files.

// FuzzMetadata opens an image around a fuzzed metadata area and runs
// everything that works without a key: the report, the checks of unlock
// requests, the layout.
func FuzzMetadata(f *testing.F) {
	f.Fuzz(func(t *testing.T, area []byte) {
		if len(area) > metadataArea+1024 {
			return
		}
		img := fuzzImage(area)
		r := bytes.NewReader(img)
		if !(Format{}).Probe(r, int64(len(img))) {
			t.Fatal("the boot sector is not recognised")
		}
		boot, err := readBoot(r, int64(len(img)))
		if err != nil {
			t.Fatal(err)
		}
		h := &Header{path: "fuzz", size: int64(len(img)), boot: boot, used: -1}
		for i := range 3 {
			c := readCopy(r, h.size, boot, i)
			h.copies = append(h.copies, c)
			if c.err == nil && h.used < 0 {
				h.used, h.meta = i, c.meta
			}
		}
		if h.used < 0 {
			return
		}
		if _, err := h.Report(disk.ReportOptions{}); err != nil {
			t.Fatal(err)
		}
		for _, req := range []*disk.Request{request(), request(OptRecovery, "true"), request(OptProtector, "password"),
			request(OptProtector, "{00000000-0000-0000-0000-000000000000}"), {Slot: 1, TestOnly: true, Options: disk.Options{}}} {
			h.Check(req)
		}
		if h.unservable() == nil {
			if l, err := h.layout(h.size); err == nil {
				if err := l.Check(h.size); err != nil {
					t.Fatalf("layout passes its own checks but not the disk layer's: %v", err)
				}
			}
		}
	})
}

// FuzzEntries parses a list of entries and the protectors, FVEK,
// description and boot sector entries in it.
func FuzzEntries(f *testing.F) {
	f.Add(mkEntry(entryVMK, valueVMK, 1, make([]byte, vmkHeaderSize), mkEntry(0, valueStretchKey, 1, make([]byte, 4))))
	f.Fuzz(func(t *testing.T, b []byte) {
		entries, err := parseEntries(b)
		if err != nil {
			return
		}
		at := 0
		for _, e := range entries {
			at += entryHeaderSize + len(e.data)
			if at > len(b) {
				t.Fatalf("entries cover %d bytes of %d", at, len(b))
			}
		}
		m := &metadata{}
		if m.parseEntries(entries) != nil {
			return
		}
		for _, p := range m.protectors {
			p.usable()
			_ = p.kind() + p.title() + p.String()
		}
	})
}

// FuzzStartupKey parses startup key files.
func FuzzStartupKey(f *testing.F) {
	f.Fuzz(func(t *testing.T, in []byte) {
		sk, err := parseBEK(in)
		if err == nil && len(sk.key) != vmkSize {
			t.Fatalf("a %d-byte key accepted", len(sk.key))
		}
	})
}

// FuzzRecoveryPassword: whatever is typed, the parser does not panic; a
// recovery password it takes prints back as what was typed.
func FuzzRecoveryPassword(f *testing.F) {
	for _, s := range samples {
		f.Add([]byte(s.recovery))
	}
	f.Add([]byte("000000000000000000000000000000000000000000000000"))
	f.Fuzz(func(t *testing.T, in []byte) {
		k, ok, err := recoveryKey(in)
		if !ok || err != nil {
			if k != nil {
				t.Fatal("a key with an error")
			}
			return
		}
		var groups []string
		for g := range 8 {
			groups = append(groups, fmt.Sprintf("%06d", 11*int(binary.LittleEndian.Uint16(k[2*g:]))))
		}
		want := bytes.TrimRight(in, "\r\n")
		dashed := []byte(fmt.Sprint(groups[0]))
		for _, g := range groups[1:] {
			dashed = append(append(dashed, '-'), g...)
		}
		if !bytes.Equal(want, dashed) && !bytes.Equal(want, bytes.ReplaceAll(dashed, []byte("-"), nil)) {
			t.Fatalf("%q parsed as %s", in, dashed)
		}
	})
}
