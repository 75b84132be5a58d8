package aesni

import (
	"bytes"
	"testing"
)

// refRounds applies n full AES rounds with all-zero round keys to a zero
// block, using the reference round functions.
func refRounds(n int) [16]byte {
	var s, zeroKey [16]byte
	for range n {
		subShiftRows(&s)
		mixColumns(&s)
		addRoundKey(&s, zeroKey[:])
	}
	return s
}

// TestRefRoundsKnownValue pins the reference round by hand: SubBytes(0) is
// 0x63 in every byte, ShiftRows moves equal bytes onto equal bytes, and
// MixColumns maps a column of equal bytes a to 2a^3a^a^a = a.
func TestRefRoundsKnownValue(t *testing.T) {
	got := refRounds(1)
	if want := bytes.Repeat([]byte{0x63}, 16); !bytes.Equal(got[:], want) {
		t.Fatalf("one round of zero = %x, want %x", got, want)
	}
}

// TestRawAESRounds checks every roofline loop this CPU runs (and the Go
// loop) does real AES rounds, as many as asked.
func TestRawAESRounds(t *testing.T) {
	units := append(RooflineUnits(), RooflineGo)
	for _, u := range units {
		t.Run(u.String(), func(t *testing.T) {
			for _, c := range []struct{ rounds, iters int }{{1, 1}, {10, 1}, {14, 1}, {3, 7}, {14, 5}} {
				got := RawAESRounds(u, c.rounds, c.iters)
				if want := refRounds(c.rounds * c.iters); got != want {
					t.Errorf("RawAESRounds(%v, %d, %d) = %x, want %x", u, c.rounds, c.iters, got, want)
				}
			}
		})
	}
}

func TestRawAESRoundsMisuse(t *testing.T) {
	mustPanic(t, "zero rounds", func() { RawAESRounds(RooflineGo, 0, 1) })
	mustPanic(t, "zero iters", func() { RawAESRounds(RooflineGo, 1, 0) })
	mustPanic(t, "unknown unit", func() { RooflineBlocks(numRooflineUnits) })
	for _, u := range []RooflineUnit{RooflineXMM, RooflineYMM, RooflineZMM} {
		if !listed(u) {
			mustPanic(t, "unavailable "+u.String(), func() { RawAESRounds(u, 1, 1) })
		}
	}
}

func TestRooflineUnitNames(t *testing.T) {
	seen := map[string]bool{}
	for u := RooflineUnit(0); u < numRooflineUnits; u++ {
		name := u.String()
		if name == "" || seen[name] || RooflineBlocks(u) < 1 {
			t.Errorf("unit %d: name %q (seen before: %v), %d blocks", u, name, seen[name], RooflineBlocks(u))
		}
		seen[name] = true
	}
}

func listed(u RooflineUnit) bool {
	for _, v := range RooflineUnits() {
		if v == u {
			return true
		}
	}
	return false
}

func mustPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Errorf("%s: no panic", what)
		}
	}()
	f()
}

// BenchmarkRawAESRounds measures the AES limit per unit, as AES-256 block
// encryptions (14 rounds).
func BenchmarkRawAESRounds(b *testing.B) {
	for _, u := range RooflineUnits() {
		b.Run("unit="+u.String(), func(b *testing.B) {
			b.SetBytes(int64(RooflineBlocks(u) * BlockSize))
			b.ReportAllocs()
			for b.Loop() {
				RawAESRounds(u, 14, 1)
			}
		})
	}
}
