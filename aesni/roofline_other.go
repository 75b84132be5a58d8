//go:build !amd64 || !gc || purego

package aesni

func rooflineUnits() []RooflineUnit { return []RooflineUnit{RooflineGo} }

func rawAESRounds(u RooflineUnit, rounds, iters int) [16]byte {
	if u != RooflineGo {
		panic("aesni: roofline unit " + u.String() + " does not run on this CPU")
	}
	return rawAESRoundsGo(rounds, iters)
}
