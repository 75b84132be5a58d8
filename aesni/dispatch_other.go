//go:build !amd64 || !gc || purego

package aesni

import "unsafe"

func init() { registerImpls() }

func autoPick(int) Impl { return Portable }

func dispatchTable() []DispatchRange { return []DispatchRange{{16, Portable}} }

func dispatchSource() string { return "no assembly kernels in this build" }

const preferYMM = false

func expandKey(c *Cipher, k1, k2 []byte) { expandKeyGeneric(c, k1, k2) }

func encryptUnit(c *Cipher, d, s *byte, n int, tweak *[16]byte) {
	if forced == Generic {
		xtsGeneric(c, unsafe.Slice(d, n), unsafe.Slice(s, n), tweak, false)
		return
	}
	xtsPortable(c, unsafe.Slice(d, n), unsafe.Slice(s, n), tweak, false)
}

func decryptUnit(c *Cipher, d, s *byte, n int, tweak *[16]byte) {
	if forced == Generic {
		xtsGeneric(c, unsafe.Slice(d, n), unsafe.Slice(s, n), tweak, true)
		return
	}
	xtsPortable(c, unsafe.Slice(d, n), unsafe.Slice(s, n), tweak, true)
}

func encryptSectors(c *Cipher, dst, src []byte, unit int, sector, step uint64) {
	unitsEach(c, dst, src, unit, sector, step, false)
}

func decryptSectors(c *Cipher, dst, src []byte, unit int, sector, step uint64) {
	unitsEach(c, dst, src, unit, sector, step, true)
}

// unitsEach makes one call of f per data unit of unit bytes, unit i with
// the plain64 tweak of sector + i*step.
func unitsEach(c *Cipher, dst, src []byte, unit int, sector, step uint64, decrypt bool) {
	var t [16]byte
	for off := 0; off < len(src); off += unit {
		plain64(&t, sector)
		if decrypt {
			decryptUnit(c, &dst[off], &src[off], unit, &t)
		} else {
			encryptUnit(c, &dst[off], &src[off], unit, &t)
		}
		sector += step
	}
}
