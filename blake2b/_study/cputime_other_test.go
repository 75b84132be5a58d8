//go:build !linux

package study

import "testing"

// measureCPU runs f b.N times; thread CPU time is measured on Linux only.
func measureCPU(b *testing.B, bytesPerOp int, f func()) {
	b.SetBytes(int64(bytesPerOp))
	b.ReportAllocs()
	for b.Loop() {
		f()
	}
}
