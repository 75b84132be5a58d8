package sector

import (
	"bytes"
	"testing"

	"github.com/xtsctl/xtsctl/xts"
)

// FuzzCodec checks the batched, parallel sector API against one
// xts.Encrypt per sector with independently computed dm-crypt tweaks, for
// random sector sizes, IV modes, IV offsets, start sectors and run lengths.
func FuzzCodec(f *testing.F) {
	f.Add(uint8(0), false, uint64(0), uint64(0), uint16(1), byte(1))
	f.Add(uint8(3), true, uint64(16), uint64(1<<40), uint16(40), byte(2))
	f.Add(uint8(1), false, ^uint64(0), ^uint64(0)-3, uint16(200), byte(3))
	f.Fuzz(func(t *testing.T, sizeSel uint8, large bool, ivOffset, first uint64, count uint16, fill byte) {
		size := 512 << (sizeSel % 4)
		n := int(count%300) + 1
		p := Params{Size: size, IVOffset: ivOffset}
		if large {
			p.IVMode = Plain64LargeSectors
		}
		key := bytes.Repeat([]byte{fill, fill ^ 0x5a, 3, 4}, 16)
		key[63] ^= 0x80 // xts.NewCipher refuses equal halves
		c, err := xts.NewCipher(key)
		if err != nil {
			t.Fatal(err)
		}
		s, err := NewCodec(c, p)
		if err != nil {
			t.Fatal(err)
		}
		s.SetWorkers(3)
		pt := make([]byte, n*size)
		for i := range pt {
			pt[i] = byte(i*7) ^ fill
		}
		want := make([]byte, len(pt))
		u := uint64(size / 512)
		for i := range n {
			tweak := ivOffset + (first+uint64(i))*u // wraps like the kernel's u64
			if large {
				tweak /= u
			}
			c.Encrypt(want[i*size:(i+1)*size], pt[i*size:(i+1)*size], tweak)
		}
		got := make([]byte, len(pt))
		s.Encrypt(got, pt, first)
		if !bytes.Equal(got, want) {
			t.Fatalf("size %d, large %v, iv offset %d, first %d, %d sectors: differs from per-sector encryption", size, large, ivOffset, first, n)
		}
		s.Decrypt(got, got, first)
		if !bytes.Equal(got, pt) {
			t.Fatal("decrypt does not invert encrypt")
		}
	})
}
