package bench

import (
	"bufio"
	"os"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/cpu"
)

// CPU describes the machine a report was measured on.
type CPU struct {
	Model        string   `json:"model"`                  // brand string (CPUID, else /proc/cpuinfo)
	OSModel      string   `json:"os_model,omitempty"`     // /proc/cpuinfo "model name", when it differs
	Family       int      `json:"family,omitempty"`       // x86 family (/proc/cpuinfo), 0 if unknown
	ModelNumber  int      `json:"model_number,omitempty"` // x86 model (/proc/cpuinfo)
	LogicalCores int      `json:"logical_cores"`          // runtime.NumCPU
	Features     []string `json:"features"`               // the features the kernels and tags use
	ClockMHz     float64  `json:"clock_mhz,omitempty"`    // the reference clock cycles are counted in, 0 if unknown
	ClockSource  string   `json:"clock_source,omitempty"` // where ClockMHz was read
}

// DetectCPU reads the CPU's model, features and reference clock.
func DetectCPU() CPU {
	c := CPU{Model: cpuBrand(), LogicalCores: runtime.NumCPU(), Features: features()}
	readProcCPUInfo(&c, "/proc/cpuinfo")
	if c.Model == "" {
		c.Model, c.OSModel = c.OSModel, ""
	}
	if c.Model == c.OSModel {
		c.OSModel = ""
	}
	if c.Model == "" {
		c.Model = "unknown " + runtime.GOARCH
	}
	return c
}

// features lists, in a fixed order, the CPU features our kernels use, as
// golang.org/x/sys/cpu reports them (so GODEBUG=cpu.*=off shows here too).
func features() []string {
	var fs []string
	add := func(name string, has bool) {
		if has {
			fs = append(fs, name)
		}
	}
	x := &cpu.X86
	add("aes", x.HasAES)
	add("pclmulqdq", x.HasPCLMULQDQ)
	add("avx", x.HasAVX)
	add("avx2", x.HasAVX2)
	add("avx512f", x.HasAVX512F)
	add("avx512vl", x.HasAVX512VL)
	add("vaes", x.HasAVX512VAES)
	add("vpclmulqdq", x.HasAVX512VPCLMULQDQ)
	a := &cpu.ARM64
	add("aes", a.HasAES)
	add("pmull", a.HasPMULL)
	add("asimd", a.HasASIMD)
	if fs == nil {
		fs = []string{} // an empty list, not null, in JSON
	}
	return fs
}

// readProcCPUInfo fills in what Linux's /proc/cpuinfo says about the first
// CPU. The clock is taken only when the TSC runs at a constant, known rate
// (constant_tsc, and tsc_known_freq or no frequency scaling): then "cpu MHz"
// is that rate, and cycles per byte are reference (TSC) cycles. With
// frequency scaling, "cpu MHz" is a momentary reading and is not used.
func readProcCPUInfo(c *CPU, path string) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	var mhz float64
	var flags map[string]bool
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			if strings.TrimSpace(sc.Text()) == "" && flags != nil {
				break // end of the first CPU's block
			}
			continue
		}
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		switch key {
		case "model name":
			c.OSModel = val
		case "cpu family":
			c.Family, _ = strconv.Atoi(val)
		case "model":
			c.ModelNumber, _ = strconv.Atoi(val)
		case "cpu MHz":
			mhz, _ = strconv.ParseFloat(val, 64)
		case "flags":
			flags = map[string]bool{}
			for _, fl := range strings.Fields(val) {
				flags[fl] = true
			}
		}
	}
	_, err = os.Stat("/sys/devices/system/cpu/cpu0/cpufreq")
	scaling := err == nil
	if mhz > 0 && flags["constant_tsc"] && (flags["tsc_known_freq"] || !scaling) {
		c.ClockMHz = mhz
		c.ClockSource = "TSC rate from /proc/cpuinfo"
	}
}
