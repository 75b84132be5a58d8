// Package cpuid executes the x86 CPUID and XGETBV instructions, for the
// few facts golang.org/x/sys/cpu does not give: VAES and VPCLMULQDQ on ymm
// registers without AVX-512, the vendor, family and model, and the brand
// string. It is the one copy of those instructions in xtsctl (aesni's
// dispatch and xtsctl bench both use it); it imports nothing of
// xtsctl's. On other architectures, and under the purego tag, it has no
// CPUID functions: callers use them from amd64-only files.
//
// It also holds Table, the one list of which kernels aesni (XTS) and
// blake2b (single messages) run on each CPU xtsctl was measured on, with
// where the measurements are, and Fastest, the start-up calibration both
// packages use for a CPU the table does not cover.
package cpuid
