// Package cpuid executes the x86 CPUID and XGETBV instructions, for the
// few facts golang.org/x/sys/cpu does not give: VAES and VPCLMULQDQ on ymm
// registers without AVX-512, the vendor, family and model, and the brand
// string. It is the one copy of those instructions in xtsctl (aesni's
// dispatch and xtsctl bench both use it); it imports nothing of
// xtsctl's. On other architectures, and under the purego tag, it has no
// functions: callers use it from amd64-only files.
package cpuid
