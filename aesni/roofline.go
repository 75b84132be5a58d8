package aesni

// The roofline loops measure the machine's AES limit: AES rounds on blocks
// that stay in registers, with no loads, stores, tweaks or XTS logic. They
// are for benchmarks only (xtsctl bench --roofline) and share nothing with
// the XTS kernels.

import "fmt"

// RooflineUnit names the register width a raw-AES loop runs on.
type RooflineUnit int8

const (
	RooflineGo  RooflineUnit = iota // pure-Go rounds, where no AES instruction runs
	RooflineXMM                     // AESENC on xmm: 1 block per instruction
	RooflineYMM                     // VAESENC on ymm: 2 blocks per instruction
	RooflineZMM                     // VAESENC on zmm: 4 blocks per instruction
	numRooflineUnits
)

var rooflineNames = [numRooflineUnits]string{"go", "xmm", "ymm", "zmm"}

func (u RooflineUnit) String() string {
	if u >= 0 && u < numRooflineUnits {
		return rooflineNames[u]
	}
	return fmt.Sprintf("RooflineUnit(%d)", int(u))
}

// rooflineBlocks is how many independent blocks each loop keeps in flight:
// enough chains to cover AESENC latency times issue width on current cores
// (about 4 cycles x 2 per cycle), within the registers Go assembly may use.
var rooflineBlocks = [numRooflineUnits]int{
	RooflineGo:  4,
	RooflineXMM: 12,     // X1..X12
	RooflineYMM: 12 * 2, // Y1..Y12
	RooflineZMM: 16 * 4, // Z1..Z16
}

// RooflineUnits lists the units whose raw-AES loop runs on this CPU,
// narrowest first. RooflineGo is listed only where no AES instruction runs.
func RooflineUnits() []RooflineUnit { return rooflineUnits() }

// RooflineBlocks reports how many 16-byte blocks one round of u's loop
// transforms.
func RooflineBlocks(u RooflineUnit) int {
	if u < 0 || u >= numRooflineUnits {
		panic("aesni: unknown roofline unit")
	}
	return rooflineBlocks[u]
}

// RawAESRounds runs iters iterations of u's loop; each iteration applies
// rounds full AES encryption rounds (SubBytes, ShiftRows, MixColumns,
// AddRoundKey) to every one of RooflineBlocks(u) blocks. The blocks start at
// zero and every round key is zero; it returns block 0's final state, so that
// tests can check the loop does real rounds. It exists to be timed:
// encrypting a block with AES-128 takes 10 rounds, with AES-256 14. It panics
// if u does not run on this CPU.
func RawAESRounds(u RooflineUnit, rounds, iters int) [16]byte {
	if rounds < 1 || iters < 1 {
		panic("aesni: RawAESRounds: rounds and iters must be positive")
	}
	return rawAESRounds(u, rounds, iters)
}

// rawAESRoundsGo is the portable loop, on the reference round functions.
func rawAESRoundsGo(rounds, iters int) [16]byte {
	var blocks [4][16]byte
	var zeroKey [16]byte
	for range iters {
		for range rounds {
			for i := range blocks {
				subShiftRows(&blocks[i])
				mixColumns(&blocks[i])
				addRoundKey(&blocks[i], zeroKey[:])
			}
		}
	}
	return blocks[0]
}
