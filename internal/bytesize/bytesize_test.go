package bytesize

import "testing"

func TestHuman(t *testing.T) {
	for n, want := range map[int64]string{
		0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 1536: "1.5 KiB", 16 << 20: "16.0 MiB",
		1<<30 - 1: "1024.0 MiB", 5 << 40: "5.0 TiB", 1 << 62: "4.0 EiB",
	} {
		if got := Human(n); got != want {
			t.Errorf("Human(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestExact(t *testing.T) {
	for n, want := range map[int64]string{
		0: "0 bytes", 512: "512 bytes", 1024: "1 KiB", 3 << 10: "3 KiB", 1<<20 + 1024: "1025 KiB",
		64 << 20: "64 MiB", 4 << 30: "4 GiB", 1<<40 + 1: "1099511627777 bytes",
	} {
		if got := Exact(n); got != want {
			t.Errorf("Exact(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestParse(t *testing.T) {
	for s, want := range map[string]int64{
		"0": 0, "4096": 4096, "4096B": 4096, "1K": 1024, "1KiB": 1024, "1KB": 1000,
		"512M": 512 << 20, "3MB": 3e6, "1G": 1 << 30, "2GB": 2e9, "1T": 1 << 40, "1TB": 1e12,
		"8388607T": 8388607 << 40,
	} {
		if got, err := Parse(s); err != nil || got != want {
			t.Errorf("Parse(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"", "G", "-1", "1.5G", "1X", "1g", "8388608T", "99999999999999999999"} {
		if got, err := Parse(s); err == nil {
			t.Errorf("Parse(%q) = %d, want an error", s, got)
		}
	}
}

func TestParseKiB(t *testing.T) {
	for s, want := range map[string]uint32{"65536": 65536, "64M": 65536, "1G": 1 << 20, "4KB": 0} {
		got, err := ParseKiB(s)
		if want == 0 {
			if err == nil {
				t.Errorf("ParseKiB(%q) = %d, want an error (not whole KiB)", s, got)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("ParseKiB(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	if got, err := ParseKiB("4T"); err == nil {
		t.Errorf("ParseKiB(4T) = %d, want an error (4 TiB does not fit)", got)
	}
}
