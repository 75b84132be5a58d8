//go:build amd64 && gc && !purego

package aesni

import (
	"bytes"
	"encoding/hex"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/xtsctl/xtsctl/internal/cpuid"
)

func TestExpandKeyAsmMatchesGeneric(t *testing.T) {
	if !useAESNI {
		t.Skip("no AES-NI")
	}
	r := rand.New(rand.NewPCG(31, 32))
	for i := 0; i < 2000; i++ {
		for _, keyLen := range []int{16, 32} {
			key := randBytes(r, keyLen)
			rounds := 6 + keyLen/4
			var want, got, wantDec, gotDec schedule
			expandEncGeneric(&want, key)
			if keyLen == 16 {
				expandKey128Asm((*[16]byte)(key), &got)
			} else {
				expandKey256Asm((*[32]byte)(key), &got)
			}
			if got != want {
				t.Fatalf("key %x: asm schedule\n%x, want\n%x", key, got, want)
			}
			invertScheduleGeneric(&wantDec, &want, rounds)
			invertScheduleAsm(&gotDec, &got, rounds)
			if gotDec != wantDec {
				t.Fatalf("key %x: asm decryption schedule differs", key)
			}
		}
	}
}

// cpuinfoFlags reads the first "flags" line of /proc/cpuinfo: what the CPU
// and kernel advertise, found independently of our CPUID probe.
func cpuinfoFlags(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		t.Skipf("cannot read CPU flags: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if name, val, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(name) == "flags" {
			flags := make(map[string]bool)
			for _, f := range strings.Fields(val) {
				flags[f] = true
			}
			return flags
		}
	}
	t.Skip("no flags line in /proc/cpuinfo")
	return nil
}

// godebugOff lists the x/sys/cpu features GODEBUG turns off ("cpu.avx2=off").
func godebugOff() map[string]bool {
	off := make(map[string]bool)
	for _, kv := range strings.Split(os.Getenv("GODEBUG"), ",") {
		if name, ok := strings.CutPrefix(kv, "cpu."); ok {
			if f, v, _ := strings.Cut(name, "="); v == "off" {
				off[f] = true
			}
		}
	}
	return off
}

// TestAllImplementations fails if the CPU advertises what a kernel needs
// but that kernel is not available (a silent fallback), or the reverse;
// then it runs a known answer (IEEE 1619 Annex B vector 1) through every
// kernel and the generic base.
func TestAllImplementations(t *testing.T) {
	flags := cpuinfoFlags(t)
	off := godebugOff()
	has := func(cpuinfo []string, godebug ...string) bool {
		for _, f := range cpuinfo {
			if !flags[f] {
				return false
			}
		}
		for _, f := range append(godebug, "all") {
			if off[f] {
				return false
			}
		}
		return true
	}
	aesni := has([]string{"aes", "ssse3"}, "aes", "ssse3")
	want := map[Impl]bool{
		Generic:  true,
		Portable: true,
		AESNI1:   aesni,
		AESNI4:   aesni,
		AESNI8:   aesni,
		VAES256: aesni && has([]string{"pclmulqdq", "avx", "avx2", "vaes", "vpclmulqdq"},
			"pclmulqdq", "avx", "avx2"),
		VAES512: aesni && has([]string{"pclmulqdq", "avx", "avx2", "avx512f", "avx512bw", "avx512vl", "vaes", "vpclmulqdq"},
			"pclmulqdq", "avx", "avx2", "avx512", "avx512f", "avx512bw", "avx512vl", "avx512vaes", "avx512vpclmulqdq"),
	}
	want[VAES512C] = want[VAES512]
	for _, impl := range impls() {
		if want[impl] != isAvailable(impl) {
			t.Errorf("%v: CPU flags say available=%v, dispatch says %v", impl, want[impl], isAvailable(impl))
		}
	}

	// IEEE 1619-2007 Annex B, vector 1: zero keys, tweak 0, 32 zero bytes.
	wantCT, _ := hex.DecodeString("917cf69ebd68b2ec9b9fe9a3eadda692cd43d2f59598ed858c02c2652fbf922e")
	var c Cipher
	if err := c.Init(make([]byte, 32)); err != nil {
		t.Fatal(err)
	}
	for _, impl := range impls() {
		name := impl.String()
		if impl == Generic {
			name = "Base"
		}
		t.Run(name, func(t *testing.T) {
			if !isAvailable(impl) {
				t.Skipf("%v not available on this CPU", impl)
			}
			use(t, impl)
			var tw [16]byte
			got := make([]byte, 32)
			c.Encrypt(got, make([]byte, 32), &tw)
			if !bytes.Equal(got, wantCT) {
				t.Fatalf("vector 1 = %x, want %x", got, wantCT)
			}
		})
	}
}

// TestGODEBUGMasks reruns this test binary with features masked by GODEBUG
// and checks what the child can use; and that the environment no longer
// forces a kernel (XTSCTL_XTS_IMPL did, before internal/impl took over).
func TestGODEBUGMasks(t *testing.T) {
	if os.Getenv("XTSCTL_AESNI_CHILD") != "" {
		var names []string
		for _, i := range impls() {
			if isAvailable(i) {
				names = append(names, i.String())
			}
		}
		os.Stdout.WriteString("available=" + strings.Join(names, ",") + " pick4096=" + Pick(4096).String() + "\n")
		return
	}
	exe, err := os.Executable()
	if err != nil {
		t.Skip(err)
	}
	child := func(env ...string) string {
		t.Helper()
		cmd := exec.Command(exe, "-test.run=^TestGODEBUGMasks$", "-test.count=1")
		cmd.Env = append(os.Environ(), append([]string{"XTSCTL_AESNI_CHILD=1"}, env...)...)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("child %v: %v", env, err)
		}
		for _, line := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(line, "available=") {
				return line
			}
		}
		t.Fatalf("child %v printed no result:\n%s", env, out)
		return ""
	}
	contains := func(line, impl string) bool {
		avail, _, _ := strings.Cut(strings.TrimPrefix(line, "available="), " ")
		for _, n := range strings.Split(avail, ",") {
			if n == impl {
				return true
			}
		}
		return false
	}
	if got := child("GODEBUG=cpu.avx512f=off"); contains(got, "vaes512") {
		t.Errorf("GODEBUG=cpu.avx512f=off: %s", got)
	} else if useVAES256 && !contains(got, "vaes256") {
		t.Errorf("GODEBUG=cpu.avx512f=off lost the ymm kernel: %s", got)
	}
	if got := child("GODEBUG=cpu.avx2=off"); contains(got, "vaes512") || contains(got, "vaes256") {
		t.Errorf("GODEBUG=cpu.avx2=off: %s", got)
	}
	if got := child("GODEBUG=cpu.aes=off"); got != "available=generic,portable pick4096=portable" {
		t.Errorf("GODEBUG=cpu.aes=off: %s", got)
	}
	if useAESNI && autoPick(4096) != AESNI1 {
		if got := child("XTSCTL_XTS_IMPL=aesni1"); !strings.HasSuffix(got, "pick4096="+autoPick(4096).String()) {
			t.Errorf("XTSCTL_XTS_IMPL=aesni1 changed the choice: %s", got)
		}
	}
}

func TestPreferYMM(t *testing.T) {
	for _, tc := range []struct {
		p    cpuProbe
		want bool
	}{
		{cpuProbe{intel: true, family: 6, model: 0x6a}, true},  // Ice Lake-SP
		{cpuProbe{intel: true, family: 6, model: 0x7e}, true},  // Ice Lake client
		{cpuProbe{intel: true, family: 6, model: 0x8c}, true},  // Tiger Lake
		{cpuProbe{intel: true, family: 6, model: 0x8f}, false}, // Sapphire Rapids
		{cpuProbe{intel: true, family: 6, model: 0xa7}, false}, // Rocket Lake
		{cpuProbe{family: 0x19, model: 0x11}, false},           // AMD Zen 4
		{cpuProbe{family: 0x1a, model: 0x02}, false},           // AMD Zen 5
	} {
		if got := tc.p.zmmDownclocks(); got != tc.want {
			t.Errorf("%+v: zmmDownclocks = %v, want %v", tc.p, got, tc.want)
		}
	}
	for _, tc := range []struct {
		aesni, vaes256, vaes512, preferYMM bool
		want                               Impl
	}{
		{true, true, true, false, VAES512},
		{true, true, true, true, VAES256}, // a downclocking core gets ymm
		{true, false, true, true, VAES512},
		{true, true, false, false, VAES256}, // VAES on ymm without AVX-512
		{true, false, false, false, AESNI4},
		{false, false, false, false, Portable},
	} {
		if got := chooseWidest(tc.aesni, tc.vaes256, tc.vaes512, tc.preferYMM); got != tc.want {
			t.Errorf("chooseWidest(%v, %v, %v, %v) = %v, want %v", tc.aesni, tc.vaes256, tc.vaes512, tc.preferYMM, got, tc.want)
		}
	}
}

// TestProbeMatchesCPU checks our CPUID probe against what the kernel
// reports in /proc/cpuinfo.
func TestProbeMatchesCPU(t *testing.T) {
	flags := cpuinfoFlags(t)
	p := probeCPU()
	if p.vaes != flags["vaes"] || p.vpclmulqdq != flags["vpclmulqdq"] {
		t.Errorf("probe: vaes=%v vpclmulqdq=%v; /proc/cpuinfo: vaes=%v vpclmulqdq=%v", p.vaes, p.vpclmulqdq, flags["vaes"], flags["vpclmulqdq"])
	}
	if flags["avx"] && !p.osYMM {
		t.Errorf("the kernel reports avx but the probe finds no OS ymm support")
	}
}

// TestChooseKernel: the per-CPU table's row decides where it names one
// kernel this CPU runs, its candidates are timed where it names several,
// and a CPU without a row times the two zmm kernels when it runs them.
func TestChooseKernel(t *testing.T) {
	saved := available
	defer func() { available = saved }()
	for i := range available {
		available[i] = true
	}
	var timed []Impl
	calib := func(c []Impl) Impl { timed = c; return c[len(c)-1] }
	row := func(names ...string) cpuid.Tuning { return cpuid.Tuning{CPU: "test CPU", XTS: names} }
	for _, c := range []struct {
		name       string
		row        cpuid.Tuning
		hasRow     bool
		byFeatures Impl
		unavail    []Impl
		want       Impl
		timed      []Impl
	}{
		{"no row, zmm", cpuid.Tuning{}, false, VAES512, nil, VAES512C, []Impl{VAES512, VAES512C}},
		{"no row, ymm", cpuid.Tuning{}, false, VAES256, nil, VAES256, nil},
		{"no row, AES-NI", cpuid.Tuning{}, false, AESNI4, nil, AESNI4, nil},
		{"one kernel", row("vaes512"), true, VAES512, nil, VAES512, nil},
		{"one kernel, the other zmm one", row("vaes512c"), true, VAES512, nil, VAES512C, nil},
		{"candidates", row("vaes512c", "vaes512"), true, VAES512, nil, VAES512, []Impl{VAES512C, VAES512}},
		{"candidates, one masked", row("vaes512c", "vaes512"), true, VAES512, []Impl{VAES512}, VAES512C, nil},
		{"row's kernel masked", row("vaes512"), true, VAES256, []Impl{VAES512}, VAES256, nil},
		{"unknown name", row("vaes1024"), true, AESNI4, nil, AESNI4, nil},
	} {
		for i := range available {
			available[i] = true
		}
		for _, u := range c.unavail {
			available[u] = false
		}
		timed = nil
		got, why := chooseKernel(c.row, c.hasRow, c.byFeatures, calib)
		if got != c.want || !slices.Equal(timed, c.timed) {
			t.Errorf("%s: %v (timed %v), want %v (timed %v)", c.name, got, timed, c.want, c.timed)
		}
		if why == "" {
			t.Errorf("%s: no source given", c.name)
		}
	}
}

// TestDispatchFollowsTable: on a CPU the table covers with one kernel it
// runs, that kernel is the automatic choice; calibrate picks one of its
// candidates.
func TestDispatchFollowsTable(t *testing.T) {
	if row, ok := cpuid.This(); ok && len(row.XTS) == 1 {
		if i, _ := parseImplName(row.XTS[0]); isAvailable(i) && widest != i {
			t.Errorf("the table's row for %s names %s; dispatch picked %v (%s)", row.CPU, row.XTS[0], widest, DispatchSource())
		}
	}
	t.Logf("dispatch: %v (%s)", widest, DispatchSource())
	if !isAvailable(VAES512) {
		t.Skip("no zmm kernels to time")
	}
	if got := calibrate([]Impl{VAES512, VAES512C}); got != VAES512 && got != VAES512C {
		t.Errorf("calibrate picked %v", got)
	}
}
