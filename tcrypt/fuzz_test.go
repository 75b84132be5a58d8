package tcrypt

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"os"
	"testing"

	"github.com/xtsctl/xtsctl/disk"
)

// FuzzHeader feeds arbitrary decrypted headers through the trial
// decryption and the parser, and what they accept through the version
// rules and the layout against arbitrary image sizes and header
// locations: nothing panics, nothing passes without its magic and CRCs
// (recomputed here), and every layout served fits the image.
func FuzzHeader(f *testing.F) {
	s := defaultSynth()
	seed := func(edit func(*synth)) []byte {
		c := s
		edit(&c)
		var h [encSize]byte
		copy(h[:], c.magic)
		binary.BigEndian.PutUint16(h[4:], c.version)
		binary.BigEndian.PutUint16(h[6:], c.minProg)
		binary.BigEndian.PutUint64(h[28:], c.hiddenSize)
		binary.BigEndian.PutUint64(h[36:], c.volSize)
		binary.BigEndian.PutUint64(h[44:], c.dataOff)
		binary.BigEndian.PutUint32(h[64:], c.sectorSize)
		copy(h[keyAreaOff:], c.keys[:])
		return h[:]
	}
	f.Add(seed(func(*synth) {}), true, int64(320<<10), uint8(0))
	f.Add(seed(func(s *synth) { s.magic, s.version = "TRUE", 3 }), true, int64(300<<10), uint8(2))
	f.Add(seed(func(s *synth) { s.hiddenSize = 1 << 62 }), true, int64(1<<20), uint8(1))
	f.Add(seed(func(s *synth) { s.dataOff = 1<<64 - 512 }), true, int64(1<<30), uint8(5))
	f.Add(seed(func(*synth) {}), false, int64(320<<10), uint8(3))
	f.Add([]byte("VERA"), true, int64(-5), uint8(4))

	// The layout reads nothing from the image: any open file stands in.
	null, err := os.Open(os.DevNull)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { null.Close() })
	dk := bytes.Repeat([]byte{0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99}, 22)[:dkLen]
	f.Fuzz(func(t *testing.T, in []byte, fixCRC bool, size int64, kind uint8) {
		var dec [encSize]byte
		copy(dec[:], in)
		if fixCRC {
			binary.BigEndian.PutUint32(dec[8:], crc32.ChecksumIEEE(dec[keyAreaOff:]))
			binary.BigEndian.PutUint32(dec[188:], crc32.ChecksumIEEE(dec[:188]))
		}
		version := binary.BigEndian.Uint16(dec[4:])
		valid := (string(dec[:4]) == "VERA" || string(dec[:4]) == "TRUE") &&
			crc32.ChecksumIEEE(dec[keyAreaOff:]) == binary.BigEndian.Uint32(dec[8:]) &&
			(version < 4 || crc32.ChecksumIEEE(dec[:188]) == binary.BigEndian.Uint32(dec[188:]))

		// The trial decryption of the header encrypted with dk finds it
		// exactly when it is valid.
		loc := &location{kind: locKind(kind % 6)}
		encryptAESXTS(loc.sector[saltSize:], dec[:], dk)
		tr := &trial{cand: candidate{loc: loc, kdf: kdf{row: kdfTable[0]}}}
		m := tr.try(dk, true)
		if (m != nil) != valid {
			t.Fatalf("valid %v, but the trial found %v", valid, m)
		}
		if m == nil {
			return
		}
		if !m.cipher.supported() {
			t.Fatalf("an AES-XTS header was taken for %s-%s", m.cipher.name, m.cipher.mode)
		}
		if size < 0 {
			size = -size
		}
		size %= 1 << 50
		loc.offset = min(size, [...]int64{0, hiddenHeaderOffset, size - legacyHiddenFromEnd, size - backupNormalFromEnd, size - backupHiddenFromEnd, systemHeaderOffset}[loc.kind])
		h := &tcHeader{img: &disk.Image{Path: "fuzz", File: null, Size: size}, locs: []*location{loc}}
		u, err := h.serve(m, &disk.Request{Slot: -1})
		if err == nil && u.Unservable != "" {
			t.Fatalf("unservable without TestOnly: %s", u.Unservable)
		}
		if err != nil {
			if disk.KindOf(err) != disk.KindInput {
				t.Fatalf("kind %v: %v", disk.KindOf(err), err)
			}
			return
		}
		if err := u.Layout.Check(size); err != nil {
			t.Fatalf("a served layout does not fit the %d-byte image: %v", size, err)
		}
		if len(u.Key) != 64 || !bytes.Equal(u.Key, dec[keyAreaOff:keyAreaOff+64]) {
			t.Fatal("the key is not the key area's first 64 bytes")
		}
		if _, err := h.Report(disk.ReportOptions{ShowKey: true, Unlocked: u}); err != nil {
			t.Fatal(err)
		}
	})
}
