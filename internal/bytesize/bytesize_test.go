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
