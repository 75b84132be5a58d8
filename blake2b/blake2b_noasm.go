//go:build !amd64 || !gc || purego

package blake2b

func compress(h *[8]uint64, c *[2]uint64, flag uint64, blocks []byte) {
	compressGeneric(h, c, flag, blocks)
}

func laneWidth() int { return maxLanes }

func hashLanes(h *laneState, ptr *[maxLanes]*byte, lanes, blocks int, t uint64, final bool) {
	hashLanesGeneric(h, ptr, lanes, blocks, t, final)
}
