//go:build !amd64 || !gc || purego

package aesni

import "unsafe"

func init() { registerImpls() }

func autoPick(int) Impl { return Generic }

func dispatchTable() []DispatchRange { return []DispatchRange{{16, Generic}} }

const preferYMM = false

func expandKey(c *Cipher, k1, k2 []byte) { expandKeyGeneric(c, k1, k2) }

func encryptUnit(c *Cipher, d, s *byte, n int, tweak *[16]byte) {
	xtsGeneric(c, unsafe.Slice(d, n), unsafe.Slice(s, n), tweak, false)
}

func decryptUnit(c *Cipher, d, s *byte, n int, tweak *[16]byte) {
	xtsGeneric(c, unsafe.Slice(d, n), unsafe.Slice(s, n), tweak, true)
}

func encryptSectors(c *Cipher, dst, src []byte, unit int, sector, step uint64) {
	sectorsGeneric(c, dst, src, unit, sector, step, false)
}

func decryptSectors(c *Cipher, dst, src []byte, unit int, sector, step uint64) {
	sectorsGeneric(c, dst, src, unit, sector, step, true)
}
