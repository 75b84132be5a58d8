// The rolled-vs-unrolled study of BLAKE2b's kernels (BENCHMARKS.md). A
// separate module: nothing here ships, and the leading underscore keeps it
// out of ./... in the main module.
module github.com/xtsctl/xtsctl/blake2b/_study

go 1.26.0

require (
	golang.org/x/crypto v0.59.0
	golang.org/x/sys v0.50.0
)
