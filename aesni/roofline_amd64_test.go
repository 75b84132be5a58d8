//go:build amd64 && gc && !purego

package aesni

import (
	"testing"

	"golang.org/x/sys/cpu"
)

// TestRooflineUnitsNeverSilent fails if the CPU advertises an AES unit that
// the roofline does not measure.
func TestRooflineUnitsNeverSilent(t *testing.T) {
	x := &cpu.X86
	want := map[RooflineUnit]bool{
		RooflineXMM: x.HasAES,
		RooflineYMM: x.HasAES && x.HasAVX && x.HasAVX2 && probeCPU().vaes && probeCPU().osYMM,
		RooflineZMM: x.HasAES && x.HasAVX512F && x.HasAVX512VAES,
	}
	for u, w := range want {
		if listed(u) != w {
			t.Errorf("unit %v listed = %v, CPU features say %v", u, listed(u), w)
		}
	}
	if listed(RooflineGo) == x.HasAES {
		t.Errorf("the Go loop is listed = %v with AES-NI = %v; want it only without AES-NI", listed(RooflineGo), x.HasAES)
	}
}
