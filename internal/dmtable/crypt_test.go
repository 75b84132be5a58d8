package dmtable

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// seqKey returns n bytes 0, 1, 2, ..., whose hex is easy to write by hand.
func seqKey(n int) []byte {
	k := make([]byte, n)
	for i := range k {
		k[i] = byte(i)
	}
	return k
}

const (
	hex32 = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
	hex64 = hex32 + "202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f"
)

func TestCryptTableLine(t *testing.T) {
	for _, c := range []struct {
		name string
		t    CryptTable
		want string
	}{
		{"512 plain", CryptTable{Key: seqKey(64), Device: "/dev/loop0", Length: 2048},
			"0 2048 crypt aes-xts-plain64 " + hex64 + " 0 /dev/loop0 0"},
		{"aes-128", CryptTable{Key: seqKey(32), Device: "7:3", Length: 8, SectorSize: 512},
			"0 8 crypt aes-xts-plain64 " + hex32 + " 0 7:3 0"},
		{"iv offset and data offset", CryptTable{Key: seqKey(64), Device: "7:0", Offset: 4096, IVOffset: 100, Length: 1024},
			"0 1024 crypt aes-xts-plain64 " + hex64 + " 100 7:0 4096"},
		{"4096, tweaks in 512-byte units", CryptTable{Key: seqKey(64), Device: "7:0", Length: 2048, SectorSize: 4096},
			"0 2048 crypt aes-xts-plain64 " + hex64 + " 0 7:0 0 1 sector_size:4096"},
		{"4096, iv_large_sectors, skip and offset", CryptTable{Key: seqKey(64), Device: "7:0", Length: 2048,
			SectorSize: 4096, IVLargeSectors: true, IVOffset: 16, Offset: 8},
			"0 2048 crypt aes-xts-plain64 " + hex64 + " 16 7:0 8 2 sector_size:4096 iv_large_sectors"},
		{"iv_large_sectors is a no-op at 512", CryptTable{Key: seqKey(64), Device: "7:0", Length: 16, IVLargeSectors: true},
			"0 16 crypt aes-xts-plain64 " + hex64 + " 0 7:0 0"},
		{"discards and 1024", CryptTable{Key: seqKey(32), Device: "7:0", Length: 16, SectorSize: 1024, AllowDiscards: true},
			"0 16 crypt aes-xts-plain64 " + hex32 + " 0 7:0 0 2 allow_discards sector_size:1024"},
		{"every performance flag, in dm-crypt's order", CryptTable{Key: seqKey(64), Device: "7:0", Length: 16, SectorSize: 4096,
			NoWriteWorkqueue: true, NoReadWorkqueue: true, SubmitFromCryptCPUs: true, HighPriority: true, SameCPUCrypt: true, AllowDiscards: true},
			"0 16 crypt aes-xts-plain64 " + hex64 + " 0 7:0 0 7 allow_discards same_cpu_crypt high_priority submit_from_crypt_cpus no_read_workqueue no_write_workqueue sector_size:4096"},
		{"workqueue flags and iv_large_sectors", CryptTable{Key: seqKey(32), Device: "7:0", Length: 16, SectorSize: 2048,
			IVLargeSectors: true, NoReadWorkqueue: true, SameCPUCrypt: true},
			"0 16 crypt aes-xts-plain64 " + hex32 + " 0 7:0 0 4 same_cpu_crypt no_read_workqueue sector_size:2048 iv_large_sectors"},
		{"one flag at 512", CryptTable{Key: seqKey(32), Device: "7:0", Length: 16, SubmitFromCryptCPUs: true},
			"0 16 crypt aes-xts-plain64 " + hex32 + " 0 7:0 0 1 submit_from_crypt_cpus"},
		{"other cipher", CryptTable{Cipher: "aes-cbc-essiv:sha256", Key: seqKey(16), Device: "8:1", Length: 1},
			"0 1 crypt aes-cbc-essiv:sha256 000102030405060708090a0b0c0d0e0f 0 8:1 0"},
		{"read-only is not in the line", CryptTable{Key: seqKey(32), Device: "7:0", Length: 1, ReadOnly: true},
			"0 1 crypt aes-xts-plain64 " + hex32 + " 0 7:0 0"},
		{"huge numbers", CryptTable{Key: seqKey(32), Device: "7:0", Length: 1 << 40, IVOffset: 1<<64 - 8, Offset: 1<<63 - 8, SectorSize: 4096},
			"0 1099511627776 crypt aes-xts-plain64 " + hex32 + " 18446744073709551608 7:0 9223372036854775800 1 sector_size:4096"},
	} {
		t.Run(c.name, func(t *testing.T) {
			line, err := c.t.AppendLine(nil)
			if err != nil {
				t.Fatal(err)
			}
			if string(line) != c.want {
				t.Errorf("line\n got %s\nwant %s", line, c.want)
			}
			wantParams := c.want[strings.Index(c.want, "crypt ")+len("crypt "):]
			if n := c.t.paramsLen(); n != len(wantParams) {
				t.Errorf("paramsLen = %d, want %d", n, len(wantParams))
			}
			// The masked form is the same line with zeros for the key.
			masked := strings.Replace(c.want, fmt.Sprintf("%x", c.t.Key), strings.Repeat("0", 2*len(c.t.Key)), 1)
			if s := c.t.String(); s != masked {
				t.Errorf("String\n got %s\nwant %s", s, masked)
			}
			// What the kernel prints back parses to the same options.
			info, err := ParseCrypt(masked[strings.Index(masked, "crypt ")+len("crypt "):])
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(info.Options) != fmt.Sprint(c.t.options()) {
				t.Errorf("options parse back as %q, want %q", info.Options, c.t.options())
			}
		})
	}
}

func TestCryptTableInvalid(t *testing.T) {
	ok := CryptTable{Key: seqKey(64), Device: "7:0", Length: 16}
	for _, c := range []struct {
		name, want string
		edit       func(t *CryptTable)
	}{
		{"no key", "32 or 64 bytes", func(t *CryptTable) { t.Key = nil }},
		{"xts key of 48 bytes", "32 or 64 bytes", func(t *CryptTable) { t.Key = seqKey(48) }},
		{"other cipher without key", "without a key", func(t *CryptTable) { t.Cipher = "aes-cbc-plain"; t.Key = nil }},
		{"no device", "empty device", func(t *CryptTable) { t.Device = "" }},
		{"device with space", "space", func(t *CryptTable) { t.Device = "/dev/my loop" }},
		{"device with newline", "control", func(t *CryptTable) { t.Device = "7:0\n0 8 linear" }},
		{"cipher with space", "space", func(t *CryptTable) { t.Cipher = "aes xts" }},
		{"zero length", "length 0", func(t *CryptTable) { t.Length = 0 }},
		{"bad sector size", "sector size 3000", func(t *CryptTable) { t.SectorSize = 3000 }},
		{"8192 sector size", "sector size 8192", func(t *CryptTable) { t.SectorSize = 8192 }},
		{"length not whole sectors", "length 12", func(t *CryptTable) { t.SectorSize = 4096; t.Length = 12 }},
		{"iv offset not whole sectors", "iv offset 4", func(t *CryptTable) { t.SectorSize = 4096; t.IVOffset = 4 }},
		{"offset not whole sectors", "offset 3 is", func(t *CryptTable) { t.SectorSize = 2048; t.Offset = 3 }},
		{"offset overflow", "overflows", func(t *CryptTable) { t.Offset = 1<<64 - 8 }},
	} {
		tab := ok
		c.edit(&tab)
		if _, err := tab.AppendLine(nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: AppendLine error %v, want one containing %q", c.name, err, c.want)
		}
		if err := tab.Validate(); err != nil && strings.Contains(err.Error(), "000102") {
			t.Errorf("%s: error shows key bytes: %v", c.name, err)
		}
	}
	if err := ok.Validate(); err != nil {
		t.Errorf("the base table is invalid: %v", err)
	}
}

// AppendLine must write in place when dst has room, and otherwise into a
// fresh, exactly sized slice: never through append's growth, which would
// leave a partial copy of the key in the abandoned array.
func TestAppendLineBuffers(t *testing.T) {
	tab := CryptTable{Key: seqKey(64), Device: "7:0", Length: 16}
	n := len(tab.linePrefix()) + tab.paramsLen()

	room := make([]byte, 3, 3+n)
	copy(room, "abc")
	out, err := tab.AppendLine(room)
	if err != nil {
		t.Fatal(err)
	}
	if &out[0] != &room[0] || len(out) != 3+n || !bytes.HasPrefix(out, []byte("abc")) {
		t.Error("AppendLine did not write in place into a buffer with room")
	}

	small := make([]byte, 3, 10)
	copy(small, "abc")
	out, err = tab.AppendLine(small)
	if err != nil {
		t.Fatal(err)
	}
	if &out[0] == &small[0] || cap(out) != 3+n || !bytes.HasPrefix(out, []byte("abc")) {
		t.Errorf("AppendLine into a small buffer: cap %d, want a new slice of cap %d", cap(out), 3+n)
	}
	if bytes.Contains(small[:cap(small)], []byte("0001")) {
		t.Error("key digits were written into the too-small buffer")
	}
}

func TestCryptTableNeverPrintsKey(t *testing.T) {
	tab := CryptTable{Key: seqKey(64), Device: "7:0", Length: 16}
	for _, format := range []string{"%v", "%+v", "%#v", "%s"} {
		for _, v := range []any{tab, &tab} {
			s := fmt.Sprintf(format, v)
			if strings.Contains(s, "0102030405") || strings.Contains(s, "[0 1 2 3") {
				t.Errorf("Sprintf(%q, %T) shows the key: %s", format, v, s)
			}
		}
	}
}

func TestParseCrypt(t *testing.T) {
	for _, c := range []struct {
		params string
		want   CryptInfo
	}{
		{"aes-xts-plain64 " + strings.Repeat("0", 128) + " 0 7:0 0",
			CryptInfo{Cipher: "aes-xts-plain64", KeySize: 64, Device: "7:0", SectorSize: 512}},
		{"aes-xts-plain64 " + strings.Repeat("0", 64) + " 16 7:1 8 2 sector_size:4096 iv_large_sectors",
			CryptInfo{Cipher: "aes-xts-plain64", KeySize: 32, IVOffset: 16, Device: "7:1", Offset: 8, SectorSize: 4096,
				IVLargeSectors: true, Options: []string{"sector_size:4096", "iv_large_sectors"}}},
		{"aes-xts-plain64 :64:logon:cryptsetup:abc 24 254:3 2048 3 allow_discards no_read_workqueue sector_size:4096",
			CryptInfo{Cipher: "aes-xts-plain64", KeyRef: ":64:logon:cryptsetup:abc", IVOffset: 24, Device: "254:3", Offset: 2048,
				SectorSize: 4096, AllowDiscards: true, Options: []string{"allow_discards", "no_read_workqueue", "sector_size:4096"}}},
		{"cipher_null-ecb - 0 7:0 0",
			CryptInfo{Cipher: "cipher_null-ecb", Device: "7:0", SectorSize: 512}},
	} {
		got, err := ParseCrypt(c.params)
		if err != nil {
			t.Errorf("%q: %v", c.params, err)
			continue
		}
		if fmt.Sprint(*got) != fmt.Sprint(c.want) {
			t.Errorf("%q:\n got %+v\nwant %+v", c.params, *got, c.want)
		}
	}
	for _, bad := range []string{
		"",
		"aes-xts-plain64 00 0 7:0",
		"aes-xts-plain64 0g 0 7:0 0",
		"aes-xts-plain64 000 0 7:0 0",
		"aes-xts-plain64 00 -1 7:0 0",
		"aes-xts-plain64 00 0 7:0 x",
		"aes-xts-plain64 00 0 7:0 0 2 sector_size:4096",
		"aes-xts-plain64 00 0 7:0 0 1 sector_size:big",
	} {
		if _, err := ParseCrypt(bad); err == nil {
			t.Errorf("ParseCrypt(%q) accepted it", bad)
		}
	}
}

func TestMaskCryptKey(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"aes-xts-plain64 " + hex32 + " 0 7:0 0", "aes-xts-plain64 " + strings.Repeat("0", 64) + " 0 7:0 0"},
		{"aes-xts-plain64 ABCDEF 0 7:0 0", "aes-xts-plain64 000000 0 7:0 0"},
		{"aes-xts-plain64 :32:logon:k 0 7:0 0", "aes-xts-plain64 :32:logon:k 0 7:0 0"},
		{"aes-xts-plain64 - 0 7:0 0", "aes-xts-plain64 - 0 7:0 0"},
		{"aes-xts-plain64", "aes-xts-plain64"},
		{"", ""},
	} {
		b := []byte(c.in)
		MaskCryptKey(b)
		if string(b) != c.want {
			t.Errorf("MaskCryptKey(%q) = %q, want %q", c.in, b, c.want)
		}
	}
}
