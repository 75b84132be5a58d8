//go:build !linux

package xts

import "testing"

// cpuClock reports nothing extra where thread CPU time is not read.
func cpuClock(b *testing.B, bytesPerOp int) func() { return func() {} }
