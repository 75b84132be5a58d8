// Package testhooks holds the switches through which the tests of one
// package make another package's host-dependent behaviour predictable.
// Production code reads them and never sets them; they are zero outside
// tests. (The standard library keeps such switches in internal packages
// too, e.g. crypto/internal/impl.)
package testhooks

// DMUnavailable, when not nil, is what package blockdev's dm backend
// reports instead of looking for device-mapper: the command-line tests
// that run xtsctl as a process test the FUSE backend, and --backend auto
// must pick it on hosts with device-mapper too.
var DMUnavailable error

// BeforeMount, when not nil, is called by package mount right before it
// mounts a filesystem on a directory it has checked, with the path it
// checked: the tests of a mountpoint swapped for a symlink at the worst
// moment make the swap there.
var BeforeMount func(path string)

// InPlaceStep, when not nil, is called by package inplace at the named
// moments of a run (docs/INPLACE.md names them), so that a test can stop
// the process exactly there: the window between the end of a conversion
// and its last write is a few milliseconds, which random kills rarely hit.
var InPlaceStep func(step string)
