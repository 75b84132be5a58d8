//go:build abtest

// Package abtest times two builds of the XTS kernels against each other in
// one process: the working tree's package aesni and a copy of it from an
// earlier revision (scripts/ab-aesni.bash puts the copy in _old/aesni and
// runs TestAB). Rounds of the two alternate, in thread CPU time, so that
// the load of a shared machine and the clock of the moment fall on both
// alike; the figure to read is the median of the per-round ratios B/A.
// Nothing here is built without the abtest tag.
package abtest
