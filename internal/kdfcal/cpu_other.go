//go:build !unix

package kdfcal

import "time"

// processCPU is unknown here: runs are timed by the wall clock alone.
func processCPU() time.Duration { return 0 }
