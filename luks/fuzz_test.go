package luks

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// The fuzz targets run no KDF, so they stay at thousands of executions a
// second. Seeds (testdata/fuzz) are headers cryptsetup 2.6.1 made;
// TestGenerateFuzzSeeds rewrites them.

// zeroExtended is a device of size bytes that starts with b and reads as
// zeros after it: a seed stays small while its header claims a keyslots
// area of megabytes.
type zeroExtended struct {
	b    []byte
	size int64
}

func (z zeroExtended) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off >= z.size {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), z.size-off))
	clear(p[:n])
	if off < int64(len(z.b)) {
		copy(p[:n], z.b[off:])
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// fixChecksums recomputes the checksums of the LUKS2 copies found in b at
// 0 and at the primary's size, so that the fuzzer gets past them to the
// metadata, as a hostile image writer would.
func fixChecksums(b []byte) {
	if len(b) < binHeaderSize {
		return
	}
	size := binary.BigEndian.Uint64(b[offHdrSize:])
	if !validMetadataSize(size) {
		return
	}
	for _, off := range []uint64{0, size} {
		if off+size > uint64(len(b)) {
			return
		}
		c := b[off : off+size]
		h := checksumHash(cstring(c[offCsumAlg : offCsumAlg+csumAlgLen]))
		if h == nil {
			continue
		}
		sum := headerChecksum(h, c[:binHeaderSize], c[binHeaderSize:])
		clear(c[offChecksum : offChecksum+checksumLen])
		copy(c[offChecksum:], sum)
	}
}

// FuzzReadHeader assembles an image from its parts: a primary binary
// header and JSON text at 0, a secondary at one of the offsets LUKS2
// allows, zeros elsewhere (so seeds stay small and mutations land on
// fields, not padding). With fix, checksums are recomputed first.
func FuzzReadHeader(f *testing.F) {
	// Seeds beyond testdata/fuzz/FuzzReadHeader: nothing, and bare magics.
	f.Add([]byte{}, []byte{}, []byte{}, []byte{}, uint8(0), uint64(0), false)
	f.Add([]byte("LUKS\xba\xbe\x00\x01"), []byte{}, []byte{}, []byte{}, uint8(0), uint64(1<<20), false)
	f.Add([]byte("LUKS\xba\xbe\x00\x02\x00\x00\x00\x00\x00\x00\x40\x00"), []byte("{}"), []byte{}, []byte{}, uint8(0), uint64(1<<20), true)
	f.Fuzz(func(t *testing.T, bin1, json1, bin2, json2 []byte, sec uint8, devSize uint64, fix bool) {
		data, devSize := assemble(bin1, json1, bin2, json2, sec, devSize)
		if fix {
			fixChecksums(data)
		}
		h, err := ReadHeader(zeroExtended{data, int64(devSize)}, int64(devSize))
		if err != nil {
			if h != nil {
				t.Fatal("a header with an error")
			}
			return
		}
		checkInvariants(t, h, devSize)
	})
}

// assemble lays out FuzzReadHeader's parts as an image. The secondary
// goes at one of the first four offsets LUKS2 allows and the device is at
// most 1 MiB: the larger offsets run the same code, and an execution that
// hashes megabytes would slow the fuzzer (and its minimizer) a
// hundredfold.
func assemble(bin1, json1, bin2, json2 []byte, sec uint8, devSize uint64) ([]byte, uint64) {
	const limit = 256 << 10
	off2 := int(metadataSizes[int(sec)%4])
	bin1, bin2 = bin1[:min(len(bin1), binHeaderSize)], bin2[:min(len(bin2), binHeaderSize)]
	json1, json2 = json1[:min(len(json1), limit)], json2[:min(len(json2), limit)]
	n := len(bin1)
	if len(json1) > 0 {
		n = binHeaderSize + len(json1)
	}
	if len(bin2)+len(json2) > 0 {
		n = max(n, off2+binHeaderSize+len(json2))
	}
	data := make([]byte, n)
	copy(data, bin1)
	if len(json1) > 0 {
		copy(data[binHeaderSize:], json1)
	}
	if len(bin2)+len(json2) > 0 {
		copy(data[off2:], bin2)
		copy(data[off2+binHeaderSize:], json2)
	}
	return data, max(min(devSize, 1<<20), uint64(len(data)))
}

// checkInvariants: what every header that reads must satisfy, whatever
// the bytes.
func checkInvariants(t *testing.T, h *Header, devSize uint64) {
	t.Helper()
	if h.HeaderSize > devSize {
		t.Fatalf("header size %d beyond the %d-byte device", h.HeaderSize, devSize)
	}
	for _, k := range h.Keyslots {
		if k.Area.Offset > h.HeaderSize || k.Area.Size > h.HeaderSize-k.Area.Offset {
			t.Fatalf("keyslot %d area %+v outside the header (%d bytes)", k.ID, k.Area, h.HeaderSize)
		}
		// A usable keyslot is one openSlot can run: sizes that bound its
		// allocations, a digest and hashes it has.
		d := h.digest(k.Digest)
		if k.Err == nil && (k.KeySize <= 0 || k.KeySize > maxKeyBytes || k.Area.KeySize != 32 && k.Area.KeySize != 64 ||
			d == nil || d.Err != nil || hashByName(d.Hash) == nil || hashByName(k.AF.Hash) == nil || len(k.KDF.Salt) != keyslotSaltLen ||
			k.KDF.Type == "pbkdf2" && hashByName(k.KDF.Hash) == nil ||
			h.Version == 2 && uint64(k.KeySize) > uint64(maxKeyBytes)) {
			t.Fatalf("keyslot %d is usable but %+v", k.ID, k)
		}
	}
	if h.Version == 2 {
		if len(h.Copies) != 2 || (!h.Copies[0].Used && !h.Copies[1].Used) {
			t.Fatalf("copies %+v", h.Copies)
		}
		// The metadata marshals back to text that reads the same.
		text := h.meta.marshal()
		area := make([]byte, h.MetadataSize-binHeaderSize)
		if len(text) >= len(area) {
			t.Fatalf("metadata re-marshals to %d bytes, more than its area", len(text))
		}
		copy(area, text)
		again, err := parseMetadata(area, h.MetadataSize, devSize)
		if err != nil {
			t.Fatalf("re-marshalled metadata does not read: %v", err)
		}
		a, _ := json.Marshal([]any{again.Keyslots, again.Segment, again.Digests, again.Tokens})
		b, _ := json.Marshal([]any{h.Keyslots, h.Segment, h.Digests, h.Tokens})
		if !bytes.Equal(a, b) {
			t.Fatalf("re-marshalled metadata reads differently:\n%s\n%s", a, b)
		}
	}
	if h.Supported() == nil {
		off, n, err := h.DataRange(int64(devSize))
		if err == nil && (off < 0 || n <= 0 || uint64(off+n) > devSize || n%int64(h.Segment.SectorSize) != 0) {
			t.Fatalf("data range %d+%d on a %d-byte device", off, n, devSize)
		}
		if err == nil {
			table, err := h.DMTable(int64(devSize))
			if err != nil {
				t.Fatal(err)
			}
			// Whatever the header says, the table is one the kernel
			// takes: aligned, in range, with a key of the header's size.
			table.Key, table.Device = make([]byte, cmp.Or(h.KeySize, 64)), "7:0"
			if err := table.Validate(); err != nil {
				t.Fatalf("DMTable gives an invalid table %v: %v", table, err)
			}
		}
	}
	var ue *UnsupportedError
	if err := h.Supported(); err != nil && !errors.As(err, &ue) {
		t.Fatalf("Supported returned %T", err)
	}
}

// FuzzMetadata fuzzes the JSON area alone, past the checksum.
func FuzzMetadata(f *testing.F) {
	f.Add([]byte(cryptsetupJSON))
	f.Fuzz(func(t *testing.T, text []byte) {
		const hdrSize, devSize = 16 << 10, 32 << 20
		if len(text) >= hdrSize-binHeaderSize {
			return
		}
		area := make([]byte, hdrSize-binHeaderSize)
		copy(area, text)
		h, err := parseMetadata(area, hdrSize, devSize)
		if err != nil {
			return
		}
		h.Copies = []Copy{{Used: true}, {}}
		checkInvariants(t, h, devSize)
	})
}

// FuzzJSON: the parser never panics, and what it accepts marshals to text
// that parses to the same tree: marshal is a fixed point after two rounds
// (not always one: json-c writes a double with the text it was read from,
// trimmed, so "00E" is written "00", which reads back as an integer).
func FuzzJSON(f *testing.F) {
	f.Add([]byte(cryptsetupJSON))
	f.Add([]byte(`{"a":[1,-2.5e+3,true,false,null,"\u00e9\ud83d\ude00\/"]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := parseJSON(b)
		if err != nil {
			return
		}
		text := v.marshal()
		var rounds [][]byte
		for range 3 {
			w, err := parseJSON(text)
			if err != nil {
				t.Fatalf("marshalled JSON does not parse: %v\n%s", err, text)
			}
			text = w.marshal()
			rounds = append(rounds, text)
		}
		if !bytes.Equal(rounds[1], rounds[2]) {
			t.Fatalf("marshal is not stable:\n%s\n%s", rounds[1], rounds[2])
		}
	})
}

// TestGenerateFuzzSeeds writes the seed corpora from images cryptsetup
// makes. Run it with XTSCTL_LUKS_SEEDS=1 after changing what the seeds
// should cover.
func TestGenerateFuzzSeeds(t *testing.T) {
	if os.Getenv("XTSCTL_LUKS_SEEDS") != "1" {
		t.Skip("set XTSCTL_LUKS_SEEDS=1 to regenerate testdata/fuzz from cryptsetup images")
	}
	needCryptsetup(t)
	dir := t.TempDir()
	pf := writeFile(t, dir, "pass", []byte("seed"))
	small := []string{"--luks2-metadata-size", "16k", "--luks2-keyslots-size", "256k", "--key-size", "256"}
	cases := []struct {
		name string
		args []string
		keep int // bytes of the image to keep
		post func(img string)
	}{
		{"luks1", []string{"--type", "luks1", "--pbkdf-force-iterations", "1000"}, 4096, nil},
		{"luks2-argon2id", append([]string{"--type", "luks2"}, append(csArgon2, small...)...), 32 << 10, nil},
		{"luks2-pbkdf2", append([]string{"--type", "luks2", "--label", "seed", "--sector-size", "512"}, append(csPBKDF2, small...)...), 32 << 10, nil},
		{"luks2-tokens", append([]string{"--type", "luks2"}, append(csPBKDF2, small...)...), 32 << 10, func(img string) {
			cs(t, "token", "add", "--key-description", "xtsctl:seed", "--key-slot", "0", img)
		}},
		{"luks2-64k", append([]string{"--type", "luks2", "--luks2-metadata-size", "64k", "--luks2-keyslots-size", "256k", "--key-size", "256"}, csPBKDF2...), 128 << 10, nil},
		{"luks2-primary-zeroed", append([]string{"--type", "luks2"}, append(csPBKDF2, small...)...), 32 << 10, func(img string) { zero(t, img, 0, 4096) }},
	}
	for _, c := range cases {
		img := filepath.Join(dir, c.name)
		sparseFile(t, img, 20<<20)
		cs(t, append(append([]string{"luksFormat", "--batch-mode", "--key-file", pf}, c.args...), img)...)
		if c.post != nil {
			c.post(img)
		}
		b, err := os.ReadFile(img)
		if err != nil {
			t.Fatal(err)
		}
		h, err := ReadHeader(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatal(err)
		}
		q := func(b []byte) string { return strconv.Quote(string(b)) }
		bin1, json1 := b[:512], cutJSON(b[binHeaderSize:min(len(b), 4<<20)])
		if binary.BigEndian.Uint16(b[6:]) == 1 {
			bin1, json1 = bytes.TrimRight(b[:c.keep], "\x00"), nil
		} else if allZero(bin1) {
			bin1 = nil // the zeroed primary: its JSON area is still there
		}
		var bin2, json2 []byte
		sec := 0
		if h.Version == 2 {
			for i, s := range metadataSizes {
				if s == h.MetadataSize {
					sec = i
				}
			}
			o := h.MetadataSize
			bin2, json2 = b[o:o+512], cutJSON(b[o+binHeaderSize:])
		}
		data, size := assemble(bin1, json1, bin2, json2, uint8(sec), uint64(len(b)))
		if _, err := ReadHeader(zeroExtended{data, int64(size)}, int64(size)); err != nil {
			t.Fatalf("%s: the seed does not read: %v", c.name, err)
		}
		writeSeed(t, "FuzzReadHeader", c.name, fmt.Sprintf("[]byte(%s)\n[]byte(%s)\n[]byte(%s)\n[]byte(%s)\nbyte(%d)\nuint64(%d)\nbool(false)\n",
			q(bin1), q(json1), q(bin2), q(json2), sec, len(b)))
		if h.meta != nil {
			writeSeed(t, "FuzzMetadata", c.name, fmt.Sprintf("[]byte(%s)\n", strconv.Quote(string(h.meta.marshal()))))
		}
	}
}

// cutJSON returns the JSON text at the start of a JSON area.
func cutJSON(b []byte) []byte {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return b[:i]
	}
	return b
}

func writeSeed(t *testing.T, target, name, body string) {
	t.Helper()
	d := filepath.Join("testdata", "fuzz", target)
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, name), []byte("go test fuzz v1\n"+body), 0o644); err != nil {
		t.Fatal(err)
	}
}
