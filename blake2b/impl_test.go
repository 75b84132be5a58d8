package blake2b

// useImpls makes c the compression function and l the lane kernels, and
// returns a function restoring the previous choice. For tests and
// benchmarks only; not safe while other goroutines hash.
func useImpls(c, l implID) (restore func()) {
	if !compressAvailable[c] || !lanesAvailable[l] {
		panic("blake2b: implementation " + c.String() + "/" + l.String() + " is not available")
	}
	pc, pl := compressWith, lanesWith
	compressWith, lanesWith = c, l
	return func() { compressWith, lanesWith = pc, pl }
}
