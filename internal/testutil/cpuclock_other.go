//go:build !linux

package testutil

import "testing"

// CPUClock reports nothing extra where thread CPU time is not read.
func CPUClock(b *testing.B, bytesPerOp int) func() { return func() {} }
