package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestParseSpeed reads captured openssl speed output; the expected values
// are the "k" figures printed in those files, times 1000.
func TestParseSpeed(t *testing.T) {
	for _, c := range []struct {
		file, cipher string
		size         int
		want         float64
	}{
		{"openssl-3.0-speed-aes-256-xts-default.txt", "aes-256-xts", 16, 602041.31e3},
		{"openssl-3.0-speed-aes-256-xts-default.txt", "aes-256-xts", 1024, 5667682.06e3},
		{"openssl-3.0-speed-aes-256-xts-default.txt", "AES-256-XTS", 16384, 6669341.26e3},
		{"openssl-3.0-speed-aes-256-xts-1420.txt", "aes-256-xts", 1420, 5612272.04e3},
		{"openssl-3.0-speed-aes-128-xts-decrypt-4096.txt", "aes-128-xts", 4096, 9076032.00e3},
		{"openssl-3.0-speed-elapsed-multi2-aes-256-xts-4096.txt", "aes-256-xts", 4096, 5065621.50e3},
	} {
		got, err := parseSpeed(readTestdata(t, c.file), c.cipher, c.size)
		if err != nil {
			t.Errorf("%s, %d bytes: %v", c.file, c.size, err)
			continue
		}
		if diff := got - c.want; diff > 1e-3 || diff < -1e-3 {
			t.Errorf("%s, %d bytes: %f bytes/s, want %f", c.file, c.size, got, c.want)
		}
	}
}

func TestParseSpeedErrors(t *testing.T) {
	def := readTestdata(t, "openssl-3.0-speed-aes-256-xts-default.txt")
	for _, c := range []struct {
		name, out, cipher string
		size              int
		err               string
	}{
		{"length not measured", string(def), "aes-256-xts", 4096, "no result for 4096-byte"},
		{"other cipher", string(def), "aes-128-xts", 16, "no AES-128-XTS result"},
		{"empty", "", "aes-256-xts", 16, "no AES-256-XTS result"},
		{"no header", "AES-256-XTS 1.00k\n", "aes-256-xts", 16, "before the column header"},
		{"bad header", "type 16 blocks\nAES-256-XTS 1.00k\n", "aes-256-xts", 16, "unexpected column header"},
		{"column count", "type 16 bytes 64 bytes\nAES-256-XTS 1.00k\n", "aes-256-xts", 16, "1 results for 2 lengths"},
		{"no k", "type 16 bytes\nAES-256-XTS 1.00\n", "aes-256-xts", 16, "not in 1000s"},
		{"not a number", "type 16 bytes\nAES-256-XTS x.yzk\n", "aes-256-xts", 16, "bad result"},
		{"bad multi lengths", "Got: +H:16:x from 0\nAES-256-XTS 1.00k\n", "aes-256-xts", 16, "unexpected length list"},
	} {
		_, err := parseSpeed([]byte(c.out), c.cipher, c.size)
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.err)
		}
	}
}

// TestSpeedArgs pins the openssl command line: the method documented in
// docs/BENCH.md and shared with scripts/bench-peers.sh.
func TestSpeedArgs(t *testing.T) {
	got := strings.Join(speedArgs(512, 1420, true, 1), " ")
	if want := "speed -evp aes-256-xts -bytes 1420 -seconds 1 -decrypt"; got != want {
		t.Errorf("speedArgs = %q, want %q", got, want)
	}
	got = strings.Join(multiArgs(512, 4096, false, 2, 3), " ")
	if want := "speed -elapsed -multi 3 -evp aes-256-xts -bytes 4096 -seconds 2"; got != want {
		t.Errorf("multiArgs = %q, want %q", got, want)
	}
	got = strings.Join(multiArgs(256, 512, true, 1, 1), " ")
	if want := "speed -elapsed -evp aes-128-xts -bytes 512 -seconds 1 -decrypt"; got != want {
		t.Errorf("multiArgs = %q, want %q", got, want)
	}
	if got := opensslCipher(256); got != "aes-128-xts" {
		t.Errorf("opensslCipher(256) = %q, want aes-128-xts", got)
	}
}

// TestOpenSSLLive runs the installed openssl once and parses its output.
func TestOpenSSLLive(t *testing.T) {
	if testing.Short() {
		t.Skip("runs openssl speed for a second")
	}
	o, err := findOpenSSL(t.Context())
	if err != nil {
		t.Skipf("no openssl: %v", err)
	}
	if !strings.HasPrefix(o.version, "OpenSSL") {
		t.Errorf("openssl version = %q", o.version)
	}
	mbps, err := o.speed(t.Context(), 512, 127, true, 0)
	if err != nil {
		t.Fatal(err)
	}
	if mbps <= 0 {
		t.Errorf("openssl speed gave %f MB/s", mbps)
	}
}

// TestReadProcCPUInfo reads a captured /proc/cpuinfo: the TSC is constant
// with a known rate there, so "cpu MHz" is taken as the clock.
func TestReadProcCPUInfo(t *testing.T) {
	var c CPU
	readProcCPUInfo(&c, filepath.Join("testdata", "cpuinfo-epyc-turin-vm.txt"))
	if c.OSModel != "AMD EPYC" || c.Family != 26 || c.ModelNumber != 2 {
		t.Errorf("model %q family %d model %d, want AMD EPYC, 26, 2", c.OSModel, c.Family, c.ModelNumber)
	}
	if c.ClockMHz != 2095.988 || c.ClockSource == "" {
		t.Errorf("clock %v MHz from %q, want 2095.988 from somewhere", c.ClockMHz, c.ClockSource)
	}

	// Without constant_tsc the reading is a momentary frequency: not used.
	b := strings.Replace(string(readTestdata(t, "cpuinfo-epyc-turin-vm.txt")), " constant_tsc ", " ", -1)
	path := filepath.Join(t.TempDir(), "cpuinfo")
	if err := os.WriteFile(path, []byte(b), 0o644); err != nil {
		t.Fatal(err)
	}
	c = CPU{}
	readProcCPUInfo(&c, path)
	if c.ClockMHz != 0 {
		t.Errorf("clock %v MHz without constant_tsc, want 0 (unknown)", c.ClockMHz)
	}
	c = CPU{}
	readProcCPUInfo(&c, filepath.Join(t.TempDir(), "missing"))
	if c.ClockMHz != 0 || c.OSModel != "" {
		t.Errorf("missing file gave %+v", c)
	}
}

func TestParseLengths(t *testing.T) {
	got, err := ParseLengths("16, 512,4k,16K")
	if err != nil || len(got) != 4 || got[0] != 16 || got[1] != 512 || got[2] != 4096 || got[3] != 16384 {
		t.Errorf("ParseLengths = %v, %v; want [16 512 4096 16384]", got, err)
	}
	for _, s := range []string{"", "512,", "15", "x", "1.5k", "16385k"} {
		if got, err := ParseLengths(s); err == nil {
			t.Errorf("ParseLengths(%q) = %v, want an error", s, got)
		}
	}
}
